"""host/peaks.py: the GPU datasheet table by nvidia-smi name, and the CPU
peak from /proc/cpuinfo (no TensorFlow)."""

import pytest

from official_bench.host import peaks

# (nvidia-smi name, table row, fp32 run's peak with TF32 on, fp16, bf16)
GPUS = [
    ("Tesla V100-SXM2-16GB", "V100 SXM2", 15.7, 125.0, None),
    ("Tesla V100-SXM2-32GB", "V100 SXM2", 15.7, 125.0, None),
    ("Tesla V100-PCIE-32GB", "V100 PCIe", 14.0, 112.0, None),
    ("Tesla V100S-PCIE-32GB", "V100S PCIe", 16.4, 130.0, None),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM", 156.0, 312.0, 312.0),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM", 156.0, 312.0, 312.0),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe", 156.0, 312.0, 312.0),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe", 156.0, 312.0, 312.0),
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 494.5, 989.5, 989.5),
    ("NVIDIA H100 SXM5 80GB", "H100 SXM", 494.5, 989.5, 989.5),
    ("NVIDIA H100 PCIe", "H100 PCIe", 378.0, 756.5, 756.5),
    ("NVIDIA H100 NVL", "H100 NVL", 417.5, 835.5, 835.5),
    ("NVIDIA H200", "H200 SXM", 494.5, 989.5, 989.5),
    ("NVIDIA H200 NVL", "H200 NVL", 417.5, 835.5, 835.5),
    ("NVIDIA L4", "L4", 60.0, 121.0, 121.0),
    ("NVIDIA L40S", "L40S", 183.0, 362.05, 362.05),
    ("NVIDIA L40", "L40", 90.5, 181.05, 181.05),
    ("NVIDIA A10", "A10", 62.5, 125.0, 125.0),
    ("Tesla T4", "T4", 8.1, 65.0, None),
]


@pytest.mark.parametrize("name, row, fp32, fp16, bf16", GPUS)
def test_nvidia_smi_names_find_their_datasheet_row(name, row, fp32, fp16,
                                                   bf16):
    assert peaks.match_gpu(name).name == row
    assert peaks.gpu_peak(name, "fp32", tf32=True).tflops == fp32
    assert peaks.gpu_peak(name, "fp16", tf32=True).tflops == fp16
    got = peaks.gpu_peak(name, "bf16", tf32=True)
    assert (got.tflops if got else None) == bf16
    assert "datasheet" in peaks.gpu_peak(name, "fp16", tf32=True).source


def test_the_issue_s_figures():
    """Issue 29's facts: V100 125 fp16 / 15.7 fp32, A100 312 / 156 TF32 /
    19.5 fp32, H100 SXM ~989 / ~495 TF32, H200 the same."""
    assert peaks.gpu_peak("Tesla V100-SXM2-16GB", "fp32", True).tflops == 15.7
    a100 = "NVIDIA A100-SXM4-80GB"
    assert peaks.gpu_peak(a100, "fp32", tf32=False).tflops == 19.5
    h100 = peaks.match_gpu("NVIDIA H100 80GB HBM3")
    assert round(h100.fp16) == 990 and round(h100.tf32) == 494
    assert peaks.match_gpu("NVIDIA H200") .fp16 == h100.fp16


def test_fp32_uses_tf32_only_where_the_gpu_has_it():
    a100 = peaks.gpu_peak("NVIDIA A100-SXM4-80GB", "fp32", tf32=True)
    assert a100.tflops == 156.0 and "TF32" in a100.source
    assert "TF32" in a100.label
    # V100 has no TF32: its fp32 peak whatever TensorFlow's setting.
    assert peaks.gpu_peak("Tesla V100-SXM2-16GB", "fp32", True).tflops == 15.7


@pytest.mark.parametrize("name", [
    "NVIDIA A10G", "NVIDIA GeForce RTX 4090", "NVIDIA B200", "Tesla K80",
    "Tesla V100-SXM3-32GB-H", "", "NVIDIA A1000"])
def test_unknown_gpus_have_no_peak(name):
    assert peaks.gpu_peak(name, "fp32", tf32=True) is None


def test_unknown_gpu_takes_the_configured_peak():
    peak = peaks.device_peak("NVIDIA B200", "bf16", gpu=True, tf32=True,
                             override=2250.0)
    assert peak.tflops == 2250.0 and peak.source == "runtime.peak_tflops"
    # and it wins over the table
    assert peaks.device_peak("NVIDIA A100-SXM4-80GB", "fp16", gpu=True,
                             tf32=True, override=100).tflops == 100.0
    assert peaks.device_peak("NVIDIA B200", "bf16", gpu=True,
                             tf32=True) is None


def test_doctor_line_per_gpu():
    lines = peaks.describe_gpus(["NVIDIA A100-SXM4-80GB", "NVIDIA A10G"])
    assert lines["NVIDIA A100-SXM4-80GB"].startswith(
        "A100 SXM: fp32 156 (TF32), fp16 312, bf16 312 TFLOP/s dense")
    assert "peak unknown" in lines["NVIDIA A10G"]


# ------------------------------------------------------------------ CPUs

def _cpuinfo(n, *, vendor, family, model, name, flags, mhz="2596.144",
             siblings_per_core=1):
    blocks = []
    for p in range(n):
        blocks.append(
            f"processor\t: {p}\nvendor_id\t: {vendor}\ncpu family\t: "
            f"{family}\nmodel\t\t: {model}\nmodel name\t: {name}\n"
            f"cpu MHz\t\t: {mhz}\nphysical id\t: 0\n"
            f"core id\t\t: {p // siblings_per_core}\nflags\t\t: {flags}\n")
    return "\n".join(blocks) + "\n"


# This machine (lscpu: AMD EPYC, family 25, model 17: Zen 4, with AVX-512).
ZEN4 = _cpuinfo(2, vendor="AuthenticAMD", family=25, model=17,
                name="AMD EPYC", flags="fpu sse2 avx fma avx2 avx512f "
                "avx512_bf16 avx512_vnni")
XEON = _cpuinfo(8, vendor="GenuineIntel", family=6, model=85,
                name="Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz",
                flags="sse2 avx fma avx2 avx512f", mhz="1000.000",
                siblings_per_core=2)
HASWELL = _cpuinfo(4, vendor="GenuineIntel", family=6, model=63,
                   name="Intel(R) Xeon(R) CPU E5-2680 v3 @ 2.50GHz",
                   flags="sse2 avx fma avx2")


def test_zen4_peak_from_flags_cores_and_cpu_mhz():
    facts = peaks.parse_cpuinfo(ZEN4, {0, 1})
    assert facts.cores == 2 and facts.clock_source == "cpuinfo cpu MHz"
    # 512-bit ops on two 256-bit pipes: 16 fp32 FMA = 32 FLOP per cycle.
    peak = peaks.cpu_peak(facts, "fp32")
    assert peak.tflops == pytest.approx(2 * 2.596144 * 32 / 1000)
    assert "2.60 GHz (cpuinfo cpu MHz)" in peak.source
    assert "Zen 4" in peak.source
    assert peak.label == "CPU fp32 peak at 2.60 GHz"
    # avx512_bf16: two bf16 products per fp32 lane
    assert peaks.cpu_peak(facts, "bf16").tflops == pytest.approx(
        2 * peak.tflops)
    # no avx512_fp16: fp16 is computed in fp32
    fp16 = peaks.cpu_peak(facts, "fp16")
    assert fp16.tflops == peak.tflops and "computed in fp32" in fp16.source


def test_only_allowed_cores_count_and_smt_siblings_once():
    # 8 logical CPUs, 2 per core: 4 cores; affinity {0, 1, 2} = 2 cores.
    assert peaks.parse_cpuinfo(XEON, range(8)).cores == 4
    assert peaks.parse_cpuinfo(XEON, {0, 1, 2}).cores == 2
    assert peaks.parse_cpuinfo(ZEN4, {1}).cores == 1


def test_clock_order_max_then_model_name_then_cpu_mhz():
    facts = peaks.parse_cpuinfo(XEON, range(8))
    assert (facts.clock_ghz, facts.clock_source) == (
        2.4, "base clock in the model name")
    facts = peaks.parse_cpuinfo(XEON, range(8), max_mhz=3700.0)
    assert facts.clock_ghz == 3.7 and "max MHz" in facts.clock_source


def test_flop_per_cycle_by_isa():
    xeon = peaks.parse_cpuinfo(XEON, range(8))
    assert peaks.cpu_flop_per_cycle(xeon, "fp32")[0] == 64  # 2 x 512-bit
    haswell = peaks.parse_cpuinfo(HASWELL, range(4))
    assert peaks.cpu_flop_per_cycle(haswell, "fp32")[0] == 32  # 2 x 256
    assert peaks.cpu_peak(haswell, "fp32").tflops == pytest.approx(
        4 * 2.5 * 32 / 1000)


def test_amx_bf16():
    spr = _cpuinfo(1, vendor="GenuineIntel", family=6, model=143,
                   name="Intel(R) Xeon(R) Platinum 8480+ @ 2.00GHz",
                   flags="avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile")
    facts = peaks.parse_cpuinfo(spr, {0})
    assert peaks.cpu_flop_per_cycle(facts, "bf16")[0] == 1024
    assert peaks.cpu_flop_per_cycle(facts, "fp32")[0] == 64


def test_no_clock_no_peak_and_empty_cpuinfo():
    facts = peaks.parse_cpuinfo(ZEN4.replace("cpu MHz", "cpu Mhz?"), {0})
    assert facts.clock_ghz is None and peaks.cpu_peak(facts, "fp32") is None
    assert peaks.parse_cpuinfo("", {0}) is None


def test_this_machine_has_a_positive_cpu_peak():
    facts = peaks.read_cpu_facts()
    if facts is None:
        pytest.skip("no /proc/cpuinfo")
    assert facts.cores >= 1
    peak = peaks.cpu_peak(facts, "fp32")
    assert peak is None or peak.tflops > 0
