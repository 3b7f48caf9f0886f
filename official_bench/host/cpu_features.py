"""The CPU's instruction-set flags, and the rules made from them.

TensorFlow-free (the trainer's CLI decides its CPU kernels from these before
TensorFlow is imported). The flags are the `flags` line of /proc/cpuinfo
(Linux on x86); elsewhere there is none and every rule here answers "don't
know" (None), so the callers leave TensorFlow's own choice alone.

Four rules, each a small function so the tests can feed it any flag set:

- `tensorflow_enables_onednn`: what TensorFlow 2.21 does by itself on Linux
  (`DefaultOneDnnPolicy` in tensorflow/core/util/port.cc: oneDNN on only
  with AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX);
- `onednn_is_faster`: where official_bench turns oneDNN on (measured in
  BENCHMARKS.md, "CPU kernels": oneDNN beat Eigen on every x86 CPU with
  AVX2 and FMA we ran, AVX2-only included, where TensorFlow leaves it off);
- `has_bf16_units`: the cores compute bfloat16 natively (AVX512_BF16 or
  AMX-BF16); without them bfloat16 is emulated and far slower than float32;
- `onednn_takes_bf16`: TensorFlow 2.21's oneDNN runs bfloat16 ops at all
  (`IsDataTypeSupportedByOneDNNOnThisCPU` in tensorflow/core/util/util.cc:
  AVX512F or AVX_NE_CONVERT); elsewhere they fall back to Eigen.
"""

from __future__ import annotations

from typing import FrozenSet, Iterable, Optional

CPUINFO = "/proc/cpuinfo"
# TensorFlow 2.21 port.cc DefaultOneDnnPolicy (Linux x86), as cpuinfo names.
TENSORFLOW_ONEDNN_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni",
                           "amx_tile", "amx_int8", "amx_bf16")
# Where oneDNN measured faster than Eigen (BENCHMARKS.md, "CPU kernels").
ONEDNN_FASTER_FLAGS = ("avx2", "fma")
BF16_UNIT_FLAGS = ("avx512_bf16", "amx_bf16")
# TensorFlow 2.21 util.cc: oneDNN takes bfloat16 with AVX512F or
# AVX_NE_CONVERT. Linux keeps AVX_NE_CONVERT for KVM and does not list it
# in cpuinfo; every CPU with it has AVX_VNNI, so only a CPU without both
# flags below is known to lack it.
ONEDNN_BF16_FLAGS = ("avx512f", "avx_ne_convert")
ONEDNN_BF16_HINT = "avx_vnni"

Flags = FrozenSet[str]


def parse_flags(cpuinfo_text: str) -> Optional[Flags]:
    """The first `flags : ...` line of /proc/cpuinfo text as a set; None
    when there is none (not x86 Linux: aarch64 says `Features`)."""
    for line in cpuinfo_text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return frozenset(value.split())
    return None


def model_name(cpuinfo_text: str) -> Optional[str]:
    """The first `model name` of /proc/cpuinfo text (for reports)."""
    for line in cpuinfo_text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "model name":
            return value.strip()
    return None


def read_cpuinfo(path: str = CPUINFO) -> str:
    """/proc/cpuinfo's text; "" where it cannot be read (not Linux)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def read_flags(path: str = CPUINFO) -> Optional[Flags]:
    """This machine's CPU flags, or None where they cannot be known."""
    return parse_flags(read_cpuinfo(path))


def _has_all(flags: Iterable[str], wanted: Iterable[str]) -> bool:
    have = set(flags)
    return all(w in have for w in wanted)


def tensorflow_enables_onednn(flags: Optional[Flags]) -> Optional[bool]:
    """Whether TensorFlow 2.21 (Linux, x86) turns oneDNN on by itself."""
    if flags is None:
        return None
    return any(f in flags for f in TENSORFLOW_ONEDNN_FLAGS)


def onednn_is_faster(flags: Optional[Flags]) -> Optional[bool]:
    """Whether oneDNN is the faster choice for training on this CPU: an x86
    CPU with AVX2 and FMA (why: BENCHMARKS.md, "CPU kernels"). False for an
    older x86 CPU, whose speed we have not measured; None without flags."""
    if flags is None:
        return None
    return _has_all(flags, ONEDNN_FASTER_FLAGS)


def has_bf16_units(flags: Optional[Flags]) -> Optional[bool]:
    """Whether the cores compute bfloat16 natively (AVX512_BF16 or AMX)."""
    if flags is None:
        return None
    return any(f in flags for f in BF16_UNIT_FLAGS)


def onednn_takes_bf16(flags: Optional[Flags]) -> Optional[bool]:
    """Whether TensorFlow's oneDNN runs bfloat16 ops on this CPU (else they
    fall back to Eigen); None without flags, or where only AVX_NE_CONVERT,
    which cpuinfo does not list, could tell (an AVX_VNNI CPU without
    AVX512F)."""
    if flags is None:
        return None
    if any(f in flags for f in ONEDNN_BF16_FLAGS):
        return True
    return None if ONEDNN_BF16_HINT in flags else False
