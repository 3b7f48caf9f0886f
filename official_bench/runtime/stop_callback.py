"""Ends tf-keras' fit at the first step boundary after a stop signal.

The signal handling itself is runtime/stop_signals.py's (TensorFlow-free,
shared with the JAX backend's loop, which checks `stopper.requested`
between steps itself).
"""

from __future__ import annotations

from official_bench.runtime.keras_setup import keras
from official_bench.runtime.stop_signals import StopOnSignal


class StopCallback(keras.callbacks.Callback):
    """Ends fit at the first step boundary after a stop was requested.

    Reads a Python attribute only, so it adds no device sync per step.
    """

    def __init__(self, stopper: StopOnSignal, initial_step: int = 0):
        super().__init__()
        self._supports_tf_logs = True
        self.stopper = stopper
        self._epoch_first = initial_step
        self.stopper.step = initial_step

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_first = self.stopper.step

    def on_train_batch_end(self, batch, logs=None):
        self.stopper.step = self._epoch_first + batch + 1
        if self.stopper.requested:
            self.model.stop_training = True
