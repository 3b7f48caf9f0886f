"""The interval clock behind every TimeHistory line.

Counts steps, closes an interval every `log_steps` steps with the
TimeHistory line (contracts/throughput.py), keeps each step's time, prints a
progress line at least every `progress_seconds`, and leaves evaluation time
out of the interval it falls in. An interval ends when its last step's
results are ready: the clock reads that step's loss, which waits for the
device, so asynchronous dispatch cannot make an interval look shorter than
it was. Step times mean the same: both backends hand a step to the device
and return before it finishes, so a step is timed only where the device
was drained at both its ends; the clock drains it around every
`sample_every`-th step (`synced`). TensorFlow-free, so both backends time
steps with the same code.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, List, Optional

from absl import logging

from official_bench.contracts.throughput import (
    Interval,
    format_eta,
    format_line,
)

ETA_STEPS = 50  # the latest step times the progress line's ETA is read from
SAMPLES_PER_INTERVAL = 5  # device-timed steps per log_steps interval


class IntervalClock:
    """Times steps into TimeHistory intervals and shows progress; owns the
    intervals, the per-step times and the run's wall time.

    Driven through Keras' callback method names (the TensorFlow backend's
    TimeHistory is this clock as a callback; the JAX loop calls the same
    methods). It keeps what `logs` holds unread (no per-step device sync)
    and syncs only when it logs, by reading the loss of the step that
    closes an interval, and around every `sample_every`-th step (default:
    SAMPLES_PER_INTERVAL per interval), whose time is then the device's:
    `synced[k]` says which of `step_times` are.
    """

    def __init__(self, global_batch: int, log_steps: int, total_steps: int,
                 progress_seconds: float = 30.0, initial_step: int = 0,
                 log_fn: Callable[..., None] = logging.info,
                 clock: Callable[[], float] = time.perf_counter,
                 sample_every: Optional[int] = None):
        self.global_batch = global_batch
        self.log_steps = log_steps
        self.sample_every = sample_every or max(
            1, log_steps // SAMPLES_PER_INTERVAL)
        self.total_steps = total_steps
        self.progress_seconds = progress_seconds
        self.log_fn = log_fn
        self.clock = clock
        self.step = initial_step
        self.first_step = initial_step
        self.intervals: List[Interval] = []
        self.step_times: List[float] = []
        self.synced: List[bool] = []  # step_times[k] is a device step time
        self._last_synced = True  # nothing is in flight before the first
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
            self._last_synced = False

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
        synced = False
        if closes_interval or wants_progress or last or \
                self._brackets_sample(self.step):
            synced = self._sync(logs)
            now = self.clock()
        # One entry per step: a loop's time is shared by its steps.
        self.step_times.extend([(now - self._last_step_end) / done] * done)
        self.synced.extend([synced and self._last_synced and done == 1] *
                           done)
        self._last_step_end = now
        self._last_synced = synced
        if closes_interval:
            self._close_interval(now)
        if wants_progress or last:
            self._progress(now)

    def _brackets_sample(self, step: int) -> bool:
        """Whether `step` ends or is just before a sampled step (every
        sample_every-th), so the device is drained at both its ends."""
        k = self.sample_every
        return (step - self.first_step) % k in (0, k - 1)

    def _sync(self, logs) -> bool:
        """Waits for the step by reading its loss back to the host; False
        when there was no loss to read (nothing was waited for)."""
        if isinstance(logs, dict) and "loss" in logs:
            try:
                self.last_loss = float(logs["loss"])
                return True
            except (TypeError, ValueError):
                self.last_loss = None
        return False

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
        loss = f", loss {self.last_loss:.4f}" if self.last_loss is not None \
            else ""
        eta = self._eta(todo - done)
        self.log_fn("official_bench: step %d/%d (%d%%), %.2f examples/second "
                    "so far%s%s", self.step, self.total_steps,
                    100 * done // max(1, todo), rate, loss,
                    f", ETA {format_eta(eta)}" if eta is not None else "")
        self._last_progress = now

    def _eta(self, steps_left: int) -> Optional[float]:
        """Seconds left at the median of the latest ETA_STEPS step times;
        None before a step after the first (which traces and compiles)."""
        timed = [t for t, ok in zip(self.step_times[1:], self.synced[1:])
                 if ok]
        recent = (timed or self.step_times[1:])[-ETA_STEPS:]
        return statistics.median(recent) * steps_left if recent else None

    def on_train_end(self, logs=None):
        if self._train_start is not None:
            self.wall_time = self.clock() - self._train_start
