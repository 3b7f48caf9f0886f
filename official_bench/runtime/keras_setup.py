"""The one place that decides which Keras official_bench uses: tf-keras.

Keras 3 cannot train under MultiWorkerMirroredStrategy or Horovod here (see
docs/design.md), so every module imports `keras` from this file instead of using
`tf.keras`. We also set TF_USE_LEGACY_KERAS=1 when TensorFlow has not been
imported yet, so that third-party code that says `tf.keras` (Horovod's
callbacks, user callbacks) sees the same Keras. When TensorFlow was imported
first (a notebook), `tf.keras` may stay Keras 3 for the user's own code, but
official_bench still builds and trains everything with tf-keras.
"""

import os
import sys

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# Quieten TensorFlow's C++ start-up chatter unless the user chose a level.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import tensorflow as tf  # noqa: E402

try:
    import tf_keras as keras  # noqa: E402
except ImportError as e:  # pragma: no cover - install problem
    raise ImportError(
        "official_bench needs the tf-keras package of the same minor release "
        f"as TensorFlow {tf.__version__} (pip install "
        f"'tf-keras~={'.'.join(tf.__version__.split('.')[:2])}.0')") from e

__all__ = ["keras", "tf"]
