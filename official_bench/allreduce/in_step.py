"""The step's communication timed as training runs it.

Training does not all-reduce back to back as nccl-tests does: a compute
step sits between gradient all-reduces and the small collectives follow
the gradient's, and on a shaped link that changes their times. So every
process repeats training's pattern at once (gradient all-reduce, k small
all-reduces, one compute step) and the record keeps the one process whose
communication took least (the others' extra is waiting for it); why, and
the measurements behind it: docs/scaling_model.md. TensorFlow-free: the
caller passes the functions that communicate and compute.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable, List, Optional, Sequence

WARMUP_CYCLES = 3  # untimed cycles first (tracing, connections)


@dataclasses.dataclass
class Timings:
    """One process's cycles: seconds of the gradient's all-reduce and of
    the small collectives (all k together; 0 when k is 0)."""
    gradient: List[float]
    small: List[float]


@dataclasses.dataclass
class CommInStep:
    """The step's communication in training's pattern, the times of the
    process that communicated least (module docstring); seconds."""
    gradient_seconds: float  # mean over cycles
    small_seconds: float  # mean over cycles, all k together
    gradient_median_seconds: float
    small_median_seconds: float
    small_collectives: int
    cycles: int
    processes: int = 1

    @property
    def seconds(self) -> float:
        """What one step waits on communication when nothing overlaps."""
        return self.gradient_seconds + self.small_seconds

    def as_dict(self):
        return dataclasses.asdict(self)

    def line(self) -> str:
        return ("Communication in the step's pattern: gradient all-reduce "
                "%.2f ms mean (median %.2f), %d small collectives %.2f ms "
                "mean (median %.2f); %d cycles over %d processes" % (
                    self.gradient_seconds * 1e3,
                    self.gradient_median_seconds * 1e3,
                    self.small_collectives, self.small_seconds * 1e3,
                    self.small_median_seconds * 1e3, self.cycles,
                    self.processes))


def measure(gradient: Callable[[], None], small: Optional[Callable[[], None]],
            step: Callable[[], None], cycles: int,
            clock=time.perf_counter) -> Timings:
    """Runs `cycles` cycles of gradient all-reduce, small collectives
    (None: the step has none) and one compute step, timing the first two;
    each callable waits for what it runs."""
    if cycles < 1:
        raise ValueError(f"cycles must be >= 1, got {cycles}")
    out = Timings([], [])
    for k in range(WARMUP_CYCLES + cycles):
        start = clock()
        gradient()
        mid = clock()
        if small is not None:
            small()
        end = clock()
        step()
        if k >= WARMUP_CYCLES:
            out.gradient.append(mid - start)
            out.small.append(end - mid if small is not None else 0.0)
    return out


def summarize(small_collectives: int,
              processes: Sequence[Timings]) -> CommInStep:
    """Every process's timings -> CommInStep of the process whose
    gradient all-reduce and small collectives took least in total over
    the cycles all of them timed (module docstring: per-phase minima
    would drop a stall twice); mean and median over its cycles."""
    cycles = min(len(p.gradient) for p in processes)

    def total(p: Timings) -> float:
        return sum(p.gradient[:cycles]) + sum(p.small[:cycles])

    best = min(processes, key=total)
    gradient, small = best.gradient[:cycles], best.small[:cycles]
    return CommInStep(statistics.mean(gradient), statistics.mean(small),
                      statistics.median(gradient), statistics.median(small),
                      small_collectives, cycles, len(processes))
