"""Thread counts of worker processes, from /proc/<pid>/status (Linux).

A collective op that leaks a thread per call grows a worker by thousands of
threads over a long run; a short run shows it as steady growth after
warm-up. The verdict compares the first sample after warm-up with the
highest after it: the last may be taken while a worker exits, its threads
already gone, and would hide a leak.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from official_bench.doctor.verdicts import Finding
from official_bench.host.probes import thread_count  # noqa: F401

MAX_GROWTH = 30  # threads, first sample after warm-up to the peak


def reader(pids: Sequence[int], proc: str = "/proc"):
    """A sampler read function: {pid: threads} of the still running pids."""
    def read() -> Optional[Dict[int, int]]:
        counts = {p: thread_count(p, proc) for p in pids}
        counts = {p: c for p, c in counts.items() if c is not None}
        return counts or None
    return read


def stable(samples: List[Dict[int, int]], pids: Sequence[int],
           max_growth: int = MAX_GROWTH) -> Finding:
    """Each pid grew by less than max_growth threads over the samples."""
    texts, ok = [], True
    for n, pid in enumerate(pids):
        series = [s[pid] for s in samples if pid in s]
        if len(series) < 2:
            return Finding(False, f"threads unknown: worker {n} has "
                                  f"{len(series)} sample(s) after warm-up, "
                                  "need 2 (more steps: --steps)")
        peak = max(series)
        growth = peak - series[0]
        texts.append(f"w{n} {series[0]} after warm-up, peak {peak}")
        ok = ok and growth < max_growth
    text = "threads " + ", ".join(texts)
    if not ok:
        return Finding(False, f"{text}: grew by {max_growth} or more after "
                              "warm-up (a thread leak)",
                       fix="a worker leaks threads: one per collective op "
                           "comes from runtime.collective_timeout_seconds "
                           "(leave it unset)")
    return Finding(True, text)
