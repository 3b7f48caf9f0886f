"""Throughput measurement: the TimeHistory log line and per-run statistics.

The log line is a contract (DLPerf's tools parse it), defined in
official_bench.contracts.throughput:

    TimeHistory: {seconds:.2f} seconds, {examples_per_second:.2f} examples/second between steps {a} and {b}

examples/second counts the GLOBAL batch (all workers and replicas). Each
interval ends when step b's results are ready: we read the step's loss,
which waits for the device, so asynchronous dispatch cannot make an
interval look shorter than it was. Time spent in evaluation between epochs
is left out of the interval it falls in.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable, Dict, List, Optional

from absl import logging

# The line, the finish mark and Interval are a contract shared with the
# extractor (and DLPerf): official_bench.contracts.throughput owns them.
from official_bench.contracts.throughput import (  # noqa: F401 - re-exported
    FINISH_MARK, LINE_FORMAT, Interval, format_eta, format_line,
    images_per_second_over_window)
from official_bench.runtime.keras_setup import keras


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
            f"{self.num_replicas} replicas x {self.per_replica_batch_size} "
            f"images), step time mean {self.step_time_mean * 1e3:.1f} ms "
            f"median {self.step_time_median * 1e3:.1f} ms p99 "
            f"{self.step_time_p99 * 1e3:.1f} ms, {self.num_images} images in "
            f"{self.wall_time:.1f} s"
            + ("" if self.warmup_excluded else
               " (run too short to leave out warm-up: all steps counted)")
            + (f" (profiled steps {self.excluded_steps[0]}.."
               f"{self.excluded_steps[1]} left out)"
               if self.excluded_steps else ""))


def percentile(values: List[float], q: float) -> float:
    """Nearest-rank percentile: an observed value, not an interpolation."""
    ordered = sorted(values)
    rank = max(1, int(-(-q * len(ordered) // 100)))  # ceil
    return ordered[min(rank, len(ordered)) - 1]


def compute_stats(intervals: List[Interval], step_times: List[float],
                  warmup_steps: int, *, total_steps: int, wall_time: float,
                  global_batch: int, num_replicas: int,
                  log_steps: int, excluded_steps=None,
                  first_step: int = 0) -> ThroughputStats:
    """Averages over intervals (and steps) that start after warm-up and do
    not touch `excluded_steps` (first, last), e.g. profiled steps."""
    lo, hi = excluded_steps or (0, -1)
    intervals_used = [i for i in intervals
                      if i.end_step < lo or i.start_step >= hi]
    kept = [t for k, t in enumerate(step_times)
            if not lo <= first_step + k + 1 <= hi]
    counted = [i for i in intervals_used if i.start_step >= warmup_steps]
    steps = [t for k, t in enumerate(step_times)
             if k >= warmup_steps and not lo <= first_step + k + 1 <= hi]
    excluded = bool(counted)
    if not counted:
        counted, steps = intervals_used, kept
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
            counted) if basis == "intervals" else None)


class TimeHistory(keras.callbacks.Callback):
    """Logs the TimeHistory line every `log_steps` steps and shows progress.

    Keeps tensors in `logs` (no per-step device sync); it syncs only when it
    logs, by reading the loss of the step that closes an interval.
    """

    def __init__(self, global_batch: int, log_steps: int, total_steps: int,
                 progress_seconds: float = 30.0, initial_step: int = 0,
                 log_fn: Callable[..., None] = logging.info,
                 clock: Callable[[], float] = time.perf_counter):
        super().__init__()
        self._supports_tf_logs = True
        self.global_batch = global_batch
        self.log_steps = log_steps
        self.total_steps = total_steps
        self.progress_seconds = progress_seconds
        self.log_fn = log_fn
        self.clock = clock
        self.step = initial_step
        self.first_step = initial_step
        self.intervals: List[Interval] = []
        self.step_times: List[float] = []
        self.last_loss: Optional[float] = None
        self._interval_start = None
        self._interval_first_step = initial_step
        self._last_step_end = None
        self._paused_at = None
        self._last_progress = None
        self._train_start = None
        self.wall_time = 0.0

    # -- clocks -----------------------------------------------------------
    def on_train_begin(self, logs=None):
        now = self.clock()
        self._train_start = self._interval_start = self._last_step_end = now
        self._last_progress = now

    def on_test_begin(self, logs=None):
        if self._train_start is not None:
            self._paused_at = self.clock()

    def on_test_end(self, logs=None):
        if self._paused_at is not None:
            paused = self.clock() - self._paused_at
            self._interval_start += paused
            self._last_step_end += paused
            self._last_progress += paused
            self._train_start += paused
            self._paused_at = None

    # -- steps ------------------------------------------------------------
    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_first_step = self.step

    def on_train_batch_end(self, batch, logs=None):
        """Called once per loop: with steps_per_loop > 1 Keras passes the
        index of the loop's last step in the epoch, so steps are counted from
        it rather than from the number of calls."""
        before = self.step
        base = getattr(self, "_epoch_first_step", self.first_step)
        self.step = max(before + 1, base + batch + 1)
        done = self.step - before
        closes_interval = (self.step - self.first_step) // self.log_steps > \
            (before - self.first_step) // self.log_steps
        now = self.clock()
        wants_progress = now - self._last_progress >= self.progress_seconds
        last = self.step >= self.total_steps
        if closes_interval or wants_progress or last:
            self._sync(logs)
            now = self.clock()
        # One entry per step: a loop's time is shared by its steps.
        self.step_times.extend([(now - self._last_step_end) / done] * done)
        self._last_step_end = now
        if closes_interval:
            self._close_interval(now)
        if wants_progress or last:
            self._progress(now)

    def _sync(self, logs) -> None:
        """Waits for the step by reading its loss back to the host.

        Under a parameter-server strategy steps run on remote workers: wait
        for every scheduled step through the model's ClusterCoordinator.
        """
        coordinator = getattr(self.model, "_cluster_coordinator", None)
        if coordinator is not None:
            coordinator.join()
            if hasattr(logs, "fetch"):  # a RemoteValue of the logs dict
                logs = logs.fetch()
        if isinstance(logs, dict) and "loss" in logs:
            try:
                self.last_loss = float(logs["loss"])
            except (TypeError, ValueError):
                self.last_loss = None

    def _close_interval(self, now: float) -> None:
        seconds = now - self._interval_start
        steps = self.step - self._interval_first_step
        rate = self.global_batch * steps / seconds if seconds > 0 else 0.0
        interval = Interval(self._interval_first_step, self.step, seconds,
                            rate)
        self.intervals.append(interval)
        self.log_fn(format_line(interval))
        self._interval_start = now
        self._interval_first_step = self.step

    def _progress(self, now: float) -> None:
        done = self.step - self.first_step
        todo = self.total_steps - self.first_step
        elapsed = now - self._train_start
        rate = self.global_batch * done / elapsed if elapsed > 0 else 0.0
        eta = elapsed / done * (todo - done) if done else 0.0
        loss = f", loss {self.last_loss:.4f}" if self.last_loss is not None \
            else ""
        self.log_fn("official_bench: step %d/%d (%d%%), %.2f examples/second "
                    "so far%s, ETA %s", self.step, self.total_steps,
                    100 * done // max(1, todo), rate, loss, format_eta(eta))
        self._last_progress = now

    def on_train_end(self, logs=None):
        if self._train_start is not None:
            self.wall_time = self.clock() - self._train_start
