"""Is the GPU busy while a check trains? (The readers: host/probes.py.)

"Busy" is decided from the samples taken after the run's warm-up: the N
busiest GPUs (N = GPUs the run uses) must each average at least
BUSY_THRESHOLD percent. Taking the busiest rather than fixed indices avoids
mapping CUDA's device order onto NVML's (they can differ); the doctor
assumes nothing else uses the GPUs while it runs.
"""

from __future__ import annotations

from typing import Sequence

from official_bench.doctor.verdicts import Finding
from official_bench.host.probes import GpuSample

BUSY_THRESHOLD = 20.0  # percent, mean over the samples after warm-up


def busy(samples: Sequence[Sequence[GpuSample]], gpus_used: int,
         threshold: float = BUSY_THRESHOLD) -> Finding:
    """The `gpus_used` busiest GPUs each averaged >= threshold percent."""
    if len(samples) < 2:
        return Finding(False, f"GPU busy unknown: {len(samples)} utilisation "
                              "sample(s) after warm-up, need 2 (more steps: "
                              "--steps)")
    per_gpu = {}
    for sample in samples:
        for g in sample:
            per_gpu.setdefault(g.index, []).append(g.utilisation)
    means = sorted(((sum(v) / len(v), i) for i, v in per_gpu.items()),
                   reverse=True)
    if len(means) < gpus_used:
        return Finding(False, f"GPU busy unknown: sampler sees {len(means)} "
                              f"GPU(s), the run uses {gpus_used}")
    top = means[:gpus_used]
    text = "GPU util " + ", ".join(f"GPU{i} {m:.0f}%" for m, i in top) + \
        f" ({len(samples)} samples)"
    if top[-1][0] < threshold:
        return Finding(False, f"{text}: below {threshold:.0f}%, the GPU was "
                              "mostly idle",
                       fix="the GPU waited on the host: check the log's "
                           "TimeHistory lines, the input pipeline threads "
                           "(runtime.gpu_thread_mode, dataset_num_private_"
                           "threads) and that the run really used the GPU")
    return Finding(True, text)
