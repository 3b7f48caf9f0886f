"""The NaN guard as a tf-keras callback (train.stop_on_nan).

The check itself, and why it reads the loss only every `log_steps` steps,
is training/nan_check.py's (TensorFlow-free, shared with the JAX backend).
"""

from __future__ import annotations

from official_bench.runtime.keras_setup import keras
from official_bench.training.nan_check import NanCheck


class NanGuard(NanCheck, keras.callbacks.Callback):
    """NanCheck called by Keras' fit after each loop and epoch."""

    def __init__(self, *args, **kwargs):
        keras.callbacks.Callback.__init__(self)
        NanCheck.__init__(self, *args, **kwargs)
        self._supports_tf_logs = True  # no per-step numpy conversion by Keras
