"""A TensorFlow profiler trace of steps A..B, on request
(runtime.profile_steps).

The trace goes to `model_dir/profile` in the layout TensorBoard's profile
plugin reads (`plugins/profile/<run>/<host>.xplane.pb`). Tracing slows the
traced steps down, so their timing is left out of the statistics
(measure/stats.compute_stats' `excluded_steps`).
"""

from __future__ import annotations

import os
from typing import Optional, Sequence, Tuple

from absl import logging

from official_bench.runtime.keras_setup import keras, tf
from official_bench.runtime.tf_write_errors import tf_writing


def trace_dir(model_dir: Optional[str]) -> str:
    return os.path.join(model_dir or ".", "profile")


class ProfileSteps(keras.callbacks.Callback):
    """Starts the profiler before step `first` and stops it after `last`.

    Steps count from 1 across epochs, as the TimeHistory line does; with
    steps_per_loop > 1 the trace widens to whole loops.
    """

    def __init__(self, steps: Sequence[int], logdir: str,
                 initial_step: int = 0):
        super().__init__()
        self._supports_tf_logs = True
        self.first, self.last = int(steps[0]), int(steps[1])
        self.logdir = logdir
        self.step = initial_step  # steps finished so far
        self._epoch_first = initial_step
        self.traced: Optional[Tuple[int, int]] = None
        self._active = False
        self._started_at = None
        self._per_loop = 1

    def on_train_begin(self, logs=None):
        spe = getattr(self.model, "_steps_per_execution", None)
        self._per_loop = int(spe.numpy()) if spe is not None else 1

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_first = self.step

    def on_train_batch_begin(self, batch, logs=None):
        upcoming = self._epoch_first + batch + 1
        loop_end = upcoming + self._per_loop - 1
        if self._active or self.traced is not None:
            return
        if loop_end >= self.first and upcoming <= self.last:
            with self._writing():
                tf.profiler.experimental.start(self.logdir)
            self._active, self._started_at = True, upcoming
            logging.info("official_bench: profiling steps %d..%d into %s",
                         upcoming, self.last, self.logdir)

    def on_train_batch_end(self, batch, logs=None):
        self.step = self._epoch_first + batch + 1
        if self._active and self.step >= self.last:
            self._stop()

    def on_train_end(self, logs=None):
        if self._active:
            self._stop()

    def _writing(self):
        """A full disk under the trace is one line; the run's folder the
        profiler was writing (plugins/profile/<run>) is removed, not left
        with a truncated .xplane.pb."""
        runs = os.path.join(self.logdir, "plugins", "profile")
        return tf_writing(self.logdir, "the profiler trace",
                          cleanup_dir=runs)

    def _stop(self) -> None:
        # Wait for the traced steps' device work before closing the trace.
        self._active = False
        with self._writing():
            tf.profiler.experimental.stop()
        self.traced = (self._started_at, self.step)
        logging.info("official_bench: profiler trace of steps %d..%d written "
                     "to %s (TensorBoard: --logdir %s, Profile tab); these "
                     "steps are left out of the statistics", *self.traced,
                     self.logdir, self.logdir)
