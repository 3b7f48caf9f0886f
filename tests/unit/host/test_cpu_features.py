"""The CPU flag rules (host/cpu_features.py), from cpuinfo text and flag
sets of machines we do not have. TensorFlow-free."""

from official_bench.host import cpu_features as cf

# Flag sets as /proc/cpuinfo spells them (trimmed to what the rules read).
AVX2_EPYC = frozenset("sse4_2 avx f16c fma avx2 bmi2".split())  # issue 31
AVX512_BF16_EPYC = AVX2_EPYC | frozenset(
    "avx512f avx512bw avx512_vnni avx512_bf16".split())  # this machine
SAPPHIRE_RAPIDS = AVX512_BF16_EPYC | frozenset(
    "amx_tile amx_int8 amx_bf16".split())
SKYLAKE_SP = AVX2_EPYC | frozenset("avx512f avx512bw avx512vl".split())
OLD_X86 = frozenset("sse4_2 avx".split())  # Sandy Bridge: no AVX2, no FMA
AVX2_NO_FMA = frozenset("avx avx2".split())

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx fma avx2 avx512_bf16
bugs\t\t: sysret_ss_attrs

processor\t: 1
flags\t\t: fpu sse2
"""
ARM_CPUINFO = """processor\t: 0
Features\t: fp asimd evtstrm aes bf16
CPU implementer\t: 0x41
"""


def test_flags_come_from_the_first_flags_line():
    assert cf.parse_flags(CPUINFO) == {"fpu", "sse2", "avx", "fma", "avx2",
                                       "avx512_bf16"}
    assert cf.model_name(CPUINFO) == "AMD EPYC"


def test_no_flags_line_means_unknown_and_every_rule_says_so():
    """aarch64 lists `Features`, not `flags`: no rule guesses."""
    flags = cf.parse_flags(ARM_CPUINFO)
    assert flags is None
    assert cf.onednn_is_faster(flags) is None
    assert cf.tensorflow_enables_onednn(flags) is None
    assert cf.has_bf16_units(flags) is None
    assert cf.onednn_takes_bf16(flags) is None
    assert cf.read_flags("/nonexistent/cpuinfo") is None


def test_onednn_is_faster_on_any_x86_with_avx2_and_fma():
    for flags in (AVX2_EPYC, AVX512_BF16_EPYC, SAPPHIRE_RAPIDS, SKYLAKE_SP):
        assert cf.onednn_is_faster(flags) is True, sorted(flags)
    for flags in (OLD_X86, AVX2_NO_FMA, frozenset()):
        assert cf.onednn_is_faster(flags) is False, sorted(flags)


def test_tensorflow_turns_onednn_on_only_with_vnni_bf16_or_amx():
    """TensorFlow 2.21's own Linux default (port.cc DefaultOneDnnPolicy):
    off on the AVX2 EPYC and on Skylake-SP, where oneDNN is faster."""
    assert cf.tensorflow_enables_onednn(AVX2_EPYC) is False
    assert cf.tensorflow_enables_onednn(SKYLAKE_SP) is False
    assert cf.tensorflow_enables_onednn(AVX512_BF16_EPYC) is True
    assert cf.tensorflow_enables_onednn(SAPPHIRE_RAPIDS) is True
    assert cf.tensorflow_enables_onednn(frozenset({"avx_vnni"})) is True


def test_bf16_units_are_avx512_bf16_or_amx():
    assert cf.has_bf16_units(AVX512_BF16_EPYC) is True
    assert cf.has_bf16_units(frozenset({"amx_bf16"})) is True
    # avx512f alone (Skylake) emulates bfloat16, as AVX2 does
    assert cf.has_bf16_units(SKYLAKE_SP) is False
    assert cf.has_bf16_units(AVX2_EPYC) is False


def test_onednn_takes_bf16_with_avx512f():
    """TensorFlow 2.21 util.cc: AVX512F or AVX_NE_CONVERT; cpuinfo does not
    list the latter, so an AVX_VNNI CPU without AVX512F is unknown."""
    assert cf.onednn_takes_bf16(SKYLAKE_SP) is True
    assert cf.onednn_takes_bf16(AVX512_BF16_EPYC) is True
    assert cf.onednn_takes_bf16(frozenset({"avx_ne_convert"})) is True
    assert cf.onednn_takes_bf16(AVX2_EPYC) is False
    assert cf.onednn_takes_bf16(AVX2_EPYC | {"avx_vnni"}) is None
    assert cf.onednn_takes_bf16(None) is None


def test_this_machine_is_read(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    assert cf.has_bf16_units(cf.read_flags(str(path))) is True
