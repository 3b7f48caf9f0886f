"""The wait between the end of training and model.fit returning, said.

After the last step and every callback's on_train_end, model.fit still has
to return, and on its way out TensorFlow destroys the input pipeline's
iterator. That usually takes milliseconds, but it is where the silent tail
after `step 60/60` of issue 28 §6 was (51 s on a first `make bench`).
Measured on a loaded 2-core machine (cpu_smoke, 10-60 steps), it took
4.6-20 s in 6 runs of 25 (104 s once, with a debugger attached) and under
0.1 s in the others, the process using no CPU meanwhile; everything else
between the last step and the summary line took under 0.1 s. A native
stack taken in the wait shows the main thread in the iterator's destructor
(tf.data's RootDataset iterator waiting for one of its background threads
to end), called while Python frees fit's locals: the GIL is held, so no
Python thread can print meanwhile. Hence a line when training ends, saying
what comes, and one after fit returned, saying how long it took when that
was long.
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
