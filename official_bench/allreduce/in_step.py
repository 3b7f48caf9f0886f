"""The step's communication timed as training runs it (issue 14 §4).

The all-reduce benchmark's bandwidth rows time each all-reduce back to
back, as nccl-tests does. Training does not: between one step's gradient
all-reduce and the next there is a step of compute, and the small
collectives (metric results) follow the gradient's. On the netem test's
20 Mbit/s link the difference is large: alone, the 312 KB gradient took
133.5 ms (median; p90 145 ms); in profiled training steps the same
all-reduce took 120-124 ms in some steps (the link's token bucket refilled
during compute) and 145-210 ms in others, and the small collectives
sometimes 33-42 ms instead of 3-6 ms (about Linux's 40 ms minimum delayed
ACK), so the step was 10-17 ms slower than the isolated numbers allow
(BENCHMARKS.md, "Communication in the step's pattern").

So, beside the bandwidth rows, the benchmark repeats training's pattern on
every process at once: the gradient's all-reduce (the model's tensors, one
batched call), the step's k small all-reduces (chained in one call), one
compute step of the model on this device; each all-reduce timed. The
processes move in lock step (each collective waits for both), so a stall
on one of them shows twice: as its own slow phase (a late ACK in its small
collectives) and as its peer's wait in the next phase (the peer's compute
started earlier and its next gradient all-reduce waits the difference).
Taking each phase's fastest process cycle by cycle would remove the stall
both times: on the 20 Mbit/s link that was 9.5 ms of a 160 ms step that
training paid. So the record keeps one process: the one whose
communication took least over all cycles, i.e. the one whose compute was
slowest and so waited for nobody (the compute-after-a-wait measurement
takes the slowest process's compute too; together they are one process's
cycle). Stalls come now and then, and throughput pays their average, so
the scaling model takes that process's mean over cycles (medians
are kept to show how skewed the times are). TensorFlow-free: the caller
passes the functions that communicate and compute.
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
