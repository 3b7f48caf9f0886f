"""The `utilisation` field of result.json and its part of the summary line.

Written by the trainer's sampler (measure/utilisation.py), read by the
extractor (mean GPU utilisation per case), so the shape is defined here,
TensorFlow-free. Every measured quantity is summarised the same way, as
{"mean", "p10", "p90"} over the samples taken while the run trained:

    {"period_seconds": 1.0, "samples": 42,
     "gpu": "no GPU"  |  {"source": "NVML (pynvml)",
                          "run_gpus": [0, 1]   (see busiest()),
                          "utilisation_percent": {...}   (mean over those),
                          "per_gpu": [{"index": 0,
                                       "utilisation_percent": {...},
                                       "memory_used_mib": {...}}, ...]},
     "tf_peak_memory_mib": "no GPU"  |  {"/device:GPU:0": {...}, ...},
        (TensorFlow's allocator; on the JAX backend "xla_peak_memory_mib",
         XLA's, keyed by JAX device: {"cuda:0": {...}})
     "process": {"cores": 2,
                 "cpu_utilisation": {...}  (fraction of `cores`, 0..1),
                 "rss_mib": {...}, "threads": {...}},
     "load_average": {"start": 5.27, "end": 6.41, "cpu_count": 2}}
        (1-minute load average at the loop's start and end; os.cpu_count())

"no GPU" says why a GPU field is empty: no GPU in the run, or no sampler
for one (the reason is kept in "gpu_note").
"""

from __future__ import annotations

import os
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

KEY = "utilisation"
LOAD_KEY = "load_average"
NO_GPU = "no GPU"
# Whose allocator's peak memory a run recorded -> its words in the summary.
PEAK_LABELS = {"tf": "TF", "xla": "XLA"}


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (an observed value), as
    measure/stats.percentile."""
    ordered = sorted(values)
    rank = max(1, int(-(-q * len(ordered) // 100)))
    return ordered[min(rank, len(ordered)) - 1]


def describe(values: Sequence[float]) -> Optional[Dict[str, float]]:
    """{"mean", "p10", "p90"} of the samples; None without samples."""
    values = [float(v) for v in values if v is not None]
    if not values:
        return None
    return {"mean": statistics.fmean(values), "p10": percentile(values, 10),
            "p90": percentile(values, 90)}


def _spread(stat: Optional[Dict[str, float]], fmt: str, unit: str = "") -> str:
    """'85% (p10 70%, p90 95%)' for the summary line."""
    if not stat:
        return "n/a"
    return (f"{fmt.format(stat['mean'])}{unit} (p10 {fmt.format(stat['p10'])}"
            f"{unit}, p90 {fmt.format(stat['p90'])}{unit})")


def _percent(stat: Optional[Dict[str, float]]) -> Optional[Dict[str, float]]:
    return {k: 100 * v for k, v in stat.items()} if stat else None


def summary_text(u: Optional[Dict]) -> str:
    """The sampler's part of the trainer's summary line ('' when off)."""
    if not u:
        return ""
    gpu = u.get("gpu")
    if isinstance(gpu, dict):
        mem = [g["memory_used_mib"]["mean"] for g in gpu.get("per_gpu", [])
               if g.get("memory_used_mib")]
        label, peaks = next(((name, u[f"{key}_peak_memory_mib"])
                             for key, name in PEAK_LABELS.items()
                             if f"{key}_peak_memory_mib" in u), ("", None))
        peak = max((p["p90"] for p in peaks.values() if p), default=None) \
            if isinstance(peaks, dict) else None
        gpu_text = ("GPU util "
                    f"{_spread(gpu.get('utilisation_percent'), '{:.0f}', '%')}"
                    + (f", memory used {max(mem):.0f} MiB on the fullest"
                       if mem else "")
                    + (f", {label} peak {peak:.0f} MiB" if peak is not None
                       else ""))
    else:
        gpu_text = f"GPU {NO_GPU}"
    p = u.get("process") or {}
    return (f"; utilisation ({u.get('samples', 0)} samples every "
            f"{u.get('period_seconds', 0):g} s): {gpu_text}; CPU "
            f"{_spread(_percent(p.get('cpu_utilisation')), '{:.0f}', '%')} "
            f"of {p.get('cores')} cores; RSS "
            f"{_spread(p.get('rss_mib'), '{:.0f}', ' MiB')}; threads "
            f"{_spread(p.get('threads'), '{:.0f}')}")


def mean_gpu_utilisation(u: Optional[Dict]) -> Optional[float]:
    """Mean GPU utilisation in percent over the run's GPUs; None without a
    GPU (or without the field: older result files, sampler off)."""
    if not isinstance(u, dict) or not isinstance(u.get("gpu"), dict):
        return None
    stat = u["gpu"].get("utilisation_percent")
    if not isinstance(stat, dict):
        return None
    value = stat.get("mean")
    return float(value) if isinstance(value, (int, float)) and \
        not isinstance(value, bool) else None


def busiest(per_gpu_means: Dict[int, float], gpus_used: int) -> List[int]:
    """Indexes of the `gpus_used` busiest GPUs (by mean utilisation).

    NVML and nvidia-smi list every GPU of the machine in PCI order, CUDA
    numbers the visible ones in its own order, and the two can differ; the
    run's GPUs are taken to be its busiest ones (the doctor does the same),
    which assumes nothing else runs on the machine's other GPUs.
    """
    ranked = sorted(per_gpu_means, key=lambda i: (-per_gpu_means[i], i))
    return sorted(ranked[:max(1, gpus_used)])


def summarise(period: float, samples: List[Dict], gpu_source: Optional[str],
              gpu_note: Optional[str], cores: int, gpus_used: int = 1,
              allocator: str = "tf") -> Dict:
    """The field from the sampler's raw samples, one dict per sample:
    {"gpus": [(index, util %, mem MiB)] or None, "tf_peak": {device: MiB}
    or None, "cpu": fraction of cores or None, "rss_mib", "threads"}.
    The run's mean utilisation is over its `gpus_used` busiest GPUs; the
    allocator's peaks go under "{allocator}_peak_memory_mib"."""
    out: Dict = {"period_seconds": period, "samples": len(samples)}
    per_gpu: Dict[int, Dict[str, List[float]]] = {}
    for s in samples:
        for index, util, mem in s.get("gpus") or []:
            g = per_gpu.setdefault(index, {"u": [], "m": []})
            g["u"].append(util)
            g["m"].append(mem)
    if per_gpu:
        used = busiest({i: statistics.fmean(g["u"])
                        for i, g in per_gpu.items()}, gpus_used)
        means_per_sample = [
            statistics.fmean(u for i, u, _ in s["gpus"] if i in used)
            for s in samples if any(i in used for i, _, _ in s.get("gpus")
                                    or [])]
        out["gpu"] = {"source": gpu_source, "run_gpus": used,
                      "utilisation_percent": describe(means_per_sample),
                      "per_gpu": [{"index": i,
                                   "utilisation_percent": describe(g["u"]),
                                   "memory_used_mib": describe(g["m"])}
                                  for i, g in sorted(per_gpu.items())]}
    else:
        out["gpu"] = NO_GPU
        if gpu_note:
            out["gpu_note"] = gpu_note
    peaks: Dict[str, List[float]] = {}
    for s in samples:
        for device, mib in (s.get("tf_peak") or {}).items():
            peaks.setdefault(device, []).append(mib)
    out[f"{allocator}_peak_memory_mib"] = (
        {d: describe(v) for d, v in peaks.items()} if peaks else NO_GPU)
    out["process"] = {
        "cores": cores,
        "cpu_utilisation": describe([s.get("cpu") for s in samples]),
        "rss_mib": describe([s.get("rss_mib") for s in samples]),
        "threads": describe([s.get("threads") for s in samples])}
    return out


def load_now() -> Optional[float]:
    """The machine's 1-minute load average (None where the platform has
    none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def load_record(start: Optional[float], end: Optional[float]) -> Dict:
    """The `load_average` item: the load at the timed loop's start and end
    and the CPU count it is relative to."""
    return {"start": start, "end": end, "cpu_count": os.cpu_count()}


def _number(value) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and \
        not isinstance(value, bool) else None


def highest_load(u: Optional[Dict]) -> Optional[Tuple[float, int]]:
    """(the higher of the run's start and end load, its CPU count), or None
    without the item (older result files, sampler off)."""
    item = u.get(LOAD_KEY) if isinstance(u, dict) else None
    if not isinstance(item, dict):
        return None
    loads = [v for v in (_number(item.get("start")), _number(item.get("end")))
             if v is not None]
    cpus = _number(item.get("cpu_count"))
    if not loads or not cpus:
        return None
    return max(loads), int(cpus)


def process_cpu_share(u: Optional[Dict]) -> Optional[float]:
    """The trainer process's mean share of its cores (0..1), or None."""
    process = u.get("process") if isinstance(u, dict) else None
    stat = process.get("cpu_utilisation") if isinstance(process, dict) \
        else None
    return _number(stat.get("mean")) if isinstance(stat, dict) else None
