"""Per-run throughput statistics from the TimeHistory intervals.

What a run measured, whichever backend timed it: the mean and median of
the interval rates after warm-up, images / time over the same window, step
times (mean, median, p99) and the summary line. TensorFlow-free: the
TensorFlow backend's TimeHistory callback and the JAX backend's loop both
hand their intervals here.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Dict, List, Optional

from official_bench.contracts import counting
from official_bench.contracts.throughput import (
    FINISH_MARK,
    Interval,
    images_per_second_over_window,
)


@dataclasses.dataclass
class ThroughputStats:
    """What one run measured; all rates count the global batch.

    Units: rates in examples (images) per second; step_time_* and wall_time
    in seconds (the log's summary line prints step times in ms)."""
    average_examples_per_second: Optional[float]
    median_examples_per_second: Optional[float]
    per_replica_examples_per_second: Optional[float]
    step_time_mean: Optional[float]
    step_time_median: Optional[float]
    step_time_p99: Optional[float]
    num_images: int
    wall_time: float
    total_steps: int
    global_batch_size: int
    per_replica_batch_size: int
    num_replicas: int
    log_steps: int
    warmup_steps: int
    warmup_excluded: bool
    intervals: List[Interval]
    # "intervals" (TimeHistory intervals) or "whole_run": a run shorter than
    # one log_steps interval reports images / wall time, warm-up included.
    basis: str = "intervals"
    # Steps (first, last) traced by the profiler: intervals touching them
    # are left out of the rates, those steps out of the step times.
    excluded_steps: Optional[List[int]] = None
    # Images / time over the counted intervals (contracts/throughput.py):
    # never above average_examples_per_second, the mean of their rates.
    images_per_second_over_window: Optional[float] = None
    # How many step times step_time_* are over, and whether each was timed
    # with the device drained at both its ends (measure/intervals.py); a
    # run too short for a sampled step falls back to every step's time.
    step_time_samples: int = 0
    step_time_synced: bool = False

    def as_dict(self) -> Dict:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        if self.basis == "whole_run":
            return (f"{FINISH_MARK}: {self.total_steps} steps, "
                    f"{self.num_images} images in {self.wall_time:.1f} s: "
                    f"{self.average_examples_per_second:.2f} examples/second "
                    f"over the whole run, warm-up included (no complete "
                    f"{self.log_steps}-step interval; not a benchmark "
                    "number)")
        return (
            f"{FINISH_MARK}: {self.total_steps} steps, average "
            f"{self.average_examples_per_second:.2f} examples/second (mean "
            "of interval rates"
            + (f"; {self.images_per_second_over_window:.2f} images / time "
               "over the counted window"
               if self.images_per_second_over_window is not None else "")
            + "; median "
            f"{self.median_examples_per_second:.2f}, "
            f"{self.per_replica_examples_per_second:.2f} per replica, "
            f"{_count(self.num_replicas, 'replica')} x "
            f"{_count(self.per_replica_batch_size, 'image')}), step time "
            f"mean {self.step_time_mean * 1e3:.1f} ms "
            f"median {self.step_time_median * 1e3:.1f} ms p99 "
            f"{self.step_time_p99 * 1e3:.1f} ms, {self.num_images} images in "
            f"{self.wall_time:.1f} s"
            + ("" if self.warmup_excluded else
               " (run too short to leave out warm-up: all steps counted)")
            + (f" (profiled steps {self.excluded_steps[0]}.."
               f"{self.excluded_steps[1]} left out)"
               if self.excluded_steps else ""))


def _count(n: int, noun: str) -> str:
    """'1 replica', '8 replicas'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def percentile(values: List[float], q: float) -> float:
    """Nearest-rank percentile: an observed value, not an interpolation."""
    ordered = sorted(values)
    rank = max(1, int(-(-q * len(ordered) // 100)))  # ceil
    return ordered[min(rank, len(ordered)) - 1]


def _in_window(step: int, counted: List[Interval]) -> bool:
    """Whether `step` lies in one of the counted intervals (all steps when
    none counts: a run too short for one)."""
    return not counted or any(i.start_step < step <= i.end_step
                              for i in counted)


def compute_stats(intervals: List[Interval], step_times: List[float],
                  warmup_steps: int, *, total_steps: int, wall_time: float,
                  global_batch: int, num_replicas: int,
                  log_steps: int, excluded_steps=None,
                  first_step: int = 0,
                  synced: Optional[List[bool]] = None) -> ThroughputStats:
    """Averages over intervals (and steps) that start after warm-up and do
    not touch `excluded_steps` (first, last), e.g. profiled steps. Step
    times: those `synced` marks (device step times), where any count."""
    lo, hi = excluded_steps or (0, -1)
    # Which intervals count is contracts/counting.py's rule (the extractor,
    # the launcher and the history read result.json's with the same one).
    counted = counting.trainer_counted(intervals, warmup_steps,
                                       excluded_steps)
    # warm-up counts from the run's first step (a resumed run's intervals
    # start at its checkpoint's step): counting.warmup_start
    start = counting.warmup_start(intervals, warmup_steps)
    excluded = any(i.start_step >= start for i in counted)
    # Step k is the run's step first_step + k + 1; with counted intervals,
    # only those inside them, the window the img/s are over (the steps
    # after the last whole interval are not).
    counted_steps = [k for k in range(len(step_times))
                     if (k >= warmup_steps or not excluded)
                     and not lo <= first_step + k + 1 <= hi
                     and _in_window(first_step + k + 1, counted)]
    timed = [k for k in counted_steps if synced and synced[k]]
    steps = [step_times[k] for k in (timed or counted_steps)]
    rates = [i.examples_per_second for i in counted]
    basis = "intervals"
    if not rates and wall_time > 0 and total_steps > 0:
        # Too short for one interval (a notebook's train.steps=5): still
        # report something, marked as the whole run.
        rates, basis = [total_steps * global_batch / wall_time], "whole_run"
    avg = statistics.fmean(rates) if rates else None
    return ThroughputStats(
        average_examples_per_second=avg,
        median_examples_per_second=statistics.median(rates) if rates else None,
        per_replica_examples_per_second=avg / num_replicas if rates else None,
        step_time_mean=statistics.fmean(steps) if steps else None,
        step_time_median=statistics.median(steps) if steps else None,
        step_time_p99=percentile(steps, 99) if steps else None,
        num_images=total_steps * global_batch,
        wall_time=wall_time,
        total_steps=total_steps,
        global_batch_size=global_batch,
        per_replica_batch_size=global_batch // max(1, num_replicas),
        num_replicas=num_replicas,
        log_steps=log_steps,
        warmup_steps=warmup_steps,
        warmup_excluded=excluded,
        intervals=list(intervals),
        basis=basis,
        excluded_steps=list(excluded_steps) if excluded_steps else None,
        images_per_second_over_window=images_per_second_over_window(
            counted) if basis == "intervals" else None,
        step_time_samples=len(steps), step_time_synced=bool(timed))
