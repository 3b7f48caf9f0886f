"""Dense peak FLOP/s of the device a run trained on: the MFU denominator.

TensorFlow-free (stdlib only), shared by the trainer's MFU record and the
doctor's GPU check.

GPUs: one table keyed by the name `nvidia-smi` (and TensorFlow's device
details) reports, each with its datasheet's dense figure (no structured
sparsity) per precision. Datasheets that print only the with-sparsity
figure (marked "*" there) are halved, and the entry says so.

CPUs: cores x clock x FMA lanes per cycle x 2 FLOPs, from /proc/cpuinfo.
Only the cores this process may run on count (its affinity); SMT siblings
share a core's FMA units, so they count once. Which clock was assumed and
how many FMA lanes a core has are said in the source text, since both are
assumptions (module docs: docs/mfu.md).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

PRECISIONS = ("fp32", "fp16", "bf16")


@dataclasses.dataclass(frozen=True)
class Peak:
    """One device's dense peak for one precision, and where it came from;
    `label` is the summary line's short form of `source`."""
    tflops: float
    source: str
    label: str = ""


@dataclasses.dataclass(frozen=True)
class GpuSpec:
    """A datasheet row: TFLOP/s per math mode, None where there is none."""
    name: str
    pattern: str  # regex on the normalised nvidia-smi name (see _normalise)
    fp32: float  # CUDA cores, no tensor cores
    tf32: Optional[float]  # tensor cores, TF32 inputs (Ampere and later)
    fp16: float  # tensor cores, fp16 inputs, fp32 accumulate
    bf16: Optional[float]
    source: str


_HALVED = " (dense: half its with-sparsity figure)"
_V100 = "NVIDIA V100 Tensor Core GPU datasheet"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet" + _HALVED
_H200 = "NVIDIA H200 Tensor Core GPU datasheet" + _HALVED

# Most specific first: the first pattern that matches wins.
GPUS: Tuple[GpuSpec, ...] = (
    GpuSpec("V100S PCIe", r"\bV100S\b", 16.4, None, 130.0, None, _V100),
    GpuSpec("V100 SXM2", r"\bV100\b.*\bSXM2\b", 15.7, None, 125.0, None,
            _V100),
    GpuSpec("V100 PCIe", r"\bV100\b.*\bPCIE\b", 14.0, None, 112.0, None,
            _V100),
    GpuSpec("A100 PCIe", r"\bA100\b.*\bPCIE\b", 19.5, 156.0, 312.0, 312.0,
            _A100),
    GpuSpec("A100 SXM", r"\bA100\b", 19.5, 156.0, 312.0, 312.0, _A100),
    GpuSpec("H100 PCIe", r"\bH100\b.*\bPCIE\b", 51.0, 378.0, 756.5, 756.5,
            _H100),
    GpuSpec("H100 NVL", r"\bH100\b.*\bNVL\b", 60.0, 417.5, 835.5, 835.5,
            _H100),
    GpuSpec("H100 SXM", r"\bH100\b.*\b(SXM\w*|HBM3)\b", 67.0, 494.5, 989.5,
            989.5, _H100),
    GpuSpec("H200 NVL", r"\bH200\b.*\bNVL\b", 60.0, 417.5, 835.5, 835.5,
            _H200),
    GpuSpec("H200 SXM", r"\bH200\b", 67.0, 494.5, 989.5, 989.5, _H200),
    GpuSpec("L40S", r"\bL40S\b", 91.6, 183.0, 362.05, 362.05,
            "NVIDIA L40S GPU datasheet"),
    GpuSpec("L40", r"\bL40\b", 90.5, 90.5, 181.05, 181.05,
            "NVIDIA L40 GPU datasheet"),
    GpuSpec("L4", r"\bL4\b", 30.3, 60.0, 121.0, 121.0,
            "NVIDIA L4 Tensor Core GPU datasheet" + _HALVED),
    GpuSpec("A10", r"\bA10\b", 31.2, 62.5, 125.0, 125.0,
            "NVIDIA A10 Tensor Core GPU datasheet"),
    GpuSpec("A30", r"\bA30\b", 10.3, 82.0, 165.0, 165.0,
            "NVIDIA A30 Tensor Core GPU datasheet"),
    GpuSpec("A40", r"\bA40\b", 37.4, 74.8, 149.7, 149.7,
            "NVIDIA A40 GPU datasheet"),
    GpuSpec("T4", r"\bT4\b", 8.1, None, 65.0, None,
            "NVIDIA T4 Tensor Core GPU datasheet"),
)


def _normalise(name: str) -> str:
    """'NVIDIA A100-SXM4-80GB' -> 'A100 SXM4 80GB': upper case, vendor and
    brand words dropped, '-' and '_' as spaces, so that one pattern covers
    nvidia-smi's spellings across driver versions."""
    words = re.sub(r"[-_/,()]+", " ", name.upper()).split()
    return " ".join(w for w in words
                    if w not in ("NVIDIA", "TESLA", "GEFORCE", "QUADRO"))


def match_gpu(name: str) -> Optional[GpuSpec]:
    """The table row for an nvidia-smi GPU name; None when unknown."""
    key = _normalise(name)
    for spec in GPUS:
        if re.search(spec.pattern, key):
            return spec
    return None


def gpu_peak(name: str, precision: str, tf32: bool) -> Optional[Peak]:
    """The dense peak for a run at `precision` (fp32, fp16, bf16).

    An fp32 run counts at the TF32 tensor-core peak when TensorFlow runs
    float32 convolutions and matmuls in TF32 (`tf32`, its default since
    TF 2.4) on a GPU that has TF32 (Ampere and later); else at the CUDA-
    core fp32 peak. None for an unknown GPU or a precision it lacks (bf16
    before Ampere).
    """
    spec = match_gpu(name)
    if spec is None:
        return None
    if precision == "fp32":
        if tf32 and spec.tf32 is not None:
            return Peak(spec.tf32, f"{spec.name} TF32 tensor cores "
                        f"(TensorFlow's default for float32), {spec.source}",
                        f"{spec.name} TF32 peak")
        return Peak(spec.fp32, f"{spec.name} fp32, {spec.source}",
                    f"{spec.name} fp32 peak")
    value = spec.fp16 if precision == "fp16" else spec.bf16
    if value is None:
        return None
    return Peak(value, f"{spec.name} {precision} tensor cores, "
                f"{spec.source}", f"{spec.name} {precision} peak")


# ---------------------------------------------------------------- CPUs

@dataclasses.dataclass(frozen=True)
class CpuFacts:
    """What the CPU peak is computed from (read_cpu_facts, or a test)."""
    model: str
    vendor: str
    family: Optional[int]
    cpu_model: Optional[int]
    flags: frozenset
    cores: int  # physical cores among the CPUs the process may use
    clock_ghz: Optional[float]
    clock_source: str  # which clock: max MHz, model name, cpu MHz


def _fields(block: str) -> Dict[str, str]:
    out = {}
    for line in block.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _int(text: Optional[str]) -> Optional[int]:
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None


def parse_cpuinfo(text: str, allowed: Iterable[int],
                  max_mhz: Optional[float] = None) -> Optional[CpuFacts]:
    """CpuFacts from /proc/cpuinfo's text for the processors in `allowed`.

    The clock, in order: `max_mhz` (cpufreq's maximum, lscpu's "CPU max
    MHz": an upper bound, so MFU stays <= 1), the "@ 2.00GHz" of the model
    name (the base clock Intel prints), else cpuinfo's "cpu MHz" (the
    current clock; under a hypervisor the host's nominal clock).
    """
    blocks = [_fields(b) for b in text.split("\n\n") if b.strip()]
    allowed = set(allowed)
    mine = [b for b in blocks if _int(b.get("processor")) in allowed] or \
        [b for b in blocks if "processor" in b]
    if not mine:
        return None
    first = mine[0]
    cores = {(b.get("physical id"), b.get("core id"), None if "core id" in b
              else b.get("processor")) for b in mine}
    model = first.get("model name", "unknown CPU")
    clock, where = None, "unknown clock"
    named = re.search(r"@\s*([\d.]+)\s*GHz", model)
    if max_mhz:
        clock, where = max_mhz / 1000, "max MHz (cpufreq)"
    elif named:
        clock, where = float(named.group(1)), "base clock in the model name"
    elif first.get("cpu MHz"):
        try:
            clock, where = float(first["cpu MHz"]) / 1000, \
                "cpuinfo cpu MHz"
        except ValueError:
            pass
    return CpuFacts(model, first.get("vendor_id", ""),
                    _int(first.get("cpu family")), _int(first.get("model")),
                    frozenset(first.get("flags", "").split()), len(cores),
                    clock, where)


def fp32_fma_per_cycle(facts: CpuFacts) -> Tuple[int, str]:
    """fp32 multiply-adds one core retires per cycle, and the assumption.

    From the SIMD width (flags) and the FMA units of the core design,
    which flags do not tell: AMD by family, others by ISA.
    """
    f, fam, mod = facts.flags, facts.family, facts.cpu_model
    amd = facts.vendor == "AuthenticAMD"
    if amd and fam == 0x1A and "avx512f" in f:
        return 32, "Zen 5: two 512-bit FMA pipes"
    if amd and fam == 0x19 and "avx512f" in f:
        return 16, ("Zen 4: AVX-512 issued on two 256-bit FMA pipes, "
                    "16 fp32 FMA per cycle")
    if amd and fam == 0x17 and mod is not None and mod < 0x30:
        return 8, "Zen/Zen+: two 128-bit FMA pipes"
    if "avx512f" in f:
        return 32, ("AVX-512 with two FMA units, as Xeon Scalable Gold 6xxx"
                    "/Platinum and later have (one-unit parts: half)")
    if "avx2" in f and "fma" in f:
        return 16, "AVX2 with two 256-bit FMA units"
    if "avx" in f:
        return 8, "AVX without FMA: one 256-bit add and one multiply"
    return 4, "SSE: one 128-bit add and one multiply"


def cpu_flop_per_cycle(facts: CpuFacts, precision: str) -> Tuple[int, str]:
    """FLOPs per cycle per core at `precision`, and why.

    bf16: avx512_bf16's dot product does two bf16 products per fp32 lane
    (2x fp32); AMX does 1,024 bf16 FLOPs per cycle per core (Intel's
    Sapphire Rapids figure). fp16: avx512_fp16 doubles fp32's lanes, AMX
    fp16 as bf16; without them TensorFlow computes fp16 in fp32.
    """
    fma, why = fp32_fma_per_cycle(facts)
    if precision == "bf16" and "amx_bf16" in facts.flags:
        return 1024, "AMX bf16 tiles (Intel: 1,024 bf16 FLOP/cycle/core)"
    if precision == "bf16" and "avx512_bf16" in facts.flags:
        return 4 * fma, why + "; avx512_bf16: 2 bf16 products per lane"
    if precision == "fp16" and "amx_fp16" in facts.flags:
        return 1024, "AMX fp16 tiles (1,024 FLOP/cycle/core as bf16)"
    if precision == "fp16" and "avx512_fp16" in facts.flags:
        return 4 * fma, why + "; avx512_fp16: twice fp32's lanes"
    suffix = "" if precision == "fp32" else \
        f"; {precision} computed in fp32 on this CPU"
    return 2 * fma, why + suffix


def cpu_peak(facts: CpuFacts, precision: str) -> Optional[Peak]:
    """cores x clock x FLOP/cycle; None without a clock."""
    if not facts.clock_ghz or facts.cores < 1:
        return None
    per_cycle, why = cpu_flop_per_cycle(facts, precision)
    tflops = facts.cores * facts.clock_ghz * per_cycle / 1000
    return Peak(tflops, f"CPU {precision} peak: {facts.cores} core(s) x "
                f"{facts.clock_ghz:.2f} GHz ({facts.clock_source}) x "
                f"{per_cycle} FLOP/cycle ({why})",
                f"CPU {precision} peak at {facts.clock_ghz:.2f} GHz")


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _max_mhz(cpus: Iterable[int]) -> Optional[float]:
    """cpufreq's maximum clock of the first allowed CPU, None without
    cpufreq (virtual machines often have none)."""
    for cpu in sorted(cpus)[:1]:
        text = _read(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/"
                     "cpuinfo_max_freq")
        try:
            return int(text) / 1000 if text else None  # kHz
        except ValueError:
            return None
    return None


def read_cpu_facts() -> Optional[CpuFacts]:
    """This process's CPU, from /proc/cpuinfo and its affinity (Linux);
    None elsewhere. The one place the peak's host facts are read."""
    text = _read("/proc/cpuinfo")
    if not text:
        return None
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = list(range(os.cpu_count() or 1))
    return parse_cpuinfo(text, allowed, _max_mhz(allowed))


def device_peak(device: str, precision: str, *, gpu: bool, tf32: bool,
                cpu: Optional[CpuFacts] = None,
                override: Optional[float] = None) -> Optional[Peak]:
    """The peak a run's MFU divides by: `override` (runtime.peak_tflops)
    when set, else the GPU table or the CPU derivation; None: unknown."""
    if override:
        return Peak(float(override), "runtime.peak_tflops",
                    "runtime.peak_tflops")
    if gpu:
        return gpu_peak(device, precision, tf32)
    return cpu_peak(cpu, precision) if cpu else None


def describe_gpus(names: List[str], precisions: Iterable[str] = PRECISIONS,
                  tf32: bool = True) -> Mapping[str, str]:
    """name -> 'fp32 156 (TF32), fp16 312, bf16 312 TFLOP/s (datasheet)' or
    'peak unknown': the doctor's one line per GPU."""
    out = {}
    for name in names:
        spec = match_gpu(name)
        if spec is None:
            out[name] = "peak unknown (set runtime.peak_tflops)"
            continue
        parts = []
        for p in precisions:
            peak = gpu_peak(name, p, tf32)
            if peak:
                tf32_note = " (TF32)" if p == "fp32" and tf32 and \
                    spec.tf32 is not None else ""
                parts.append(f"{p} {peak.tflops:g}{tf32_note}")
        out[name] = (f"{spec.name}: " + ", ".join(parts) +
                     f" TFLOP/s dense ({spec.source})")
    return out
