"""The wait between the end of training and model.fit returning, said.

On its way out model.fit destroys the input pipeline's iterator, and where
that pipeline autotunes, the iterator joins tf.data's autotune thread, which
sleeps out its current optimisation period (10 ms doubling to 60 s) instead
of waking when cancelled. A run then seems to hang after its last step. So
this callback logs a line when training ends, saying what comes, and one
after fit returned when that took long (LONG_SECONDS or more).

tf.distribute's own per-device prefetch is built without autotuning
(runtime/device_prefetch.py); the lines are for the pipelines that still
autotune (the configured input's own, where a builder leaves it on) and for
a TensorFlow where that fix could not be installed. Measurements:
BENCHMARKS.md, "The tail after training".
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from absl import logging

from official_bench.runtime.keras_setup import keras

LONG_SECONDS = 2.0  # a shorter wait is not worth a line
WHAT = "TensorFlow stopping the input pipeline's iterator"


class FitTail(keras.callbacks.Callback):
    """Put last in fit's callbacks (the others' on_train_end comes first);
    call `returned()` once model.fit has returned or raised."""

    def __init__(self, long_seconds: float = LONG_SECONDS,
                 log: Callable[..., None] = logging.info,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.long_seconds = long_seconds
        self._log = log
        self._clock = clock
        self._started: Optional[float] = None
        self.seconds: Optional[float] = None

    def on_train_end(self, logs=None):
        self._log("official_bench: training done; model.fit returns after %s",
                  WHAT)
        self._started = self._clock()

    def returned(self) -> Optional[float]:
        """The seconds since on_train_end, logged when long; None when fit
        never reached on_train_end (it raised)."""
        if self._started is None:
            return None
        self.seconds = self._clock() - self._started
        if self.seconds >= self.long_seconds:
            self._log("official_bench: %s took %.1f s", WHAT, self.seconds)
        return self.seconds
