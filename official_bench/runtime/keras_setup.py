"""The one place that decides which Keras official_bench uses: tf-keras.

Keras 3 cannot train under MultiWorkerMirroredStrategy or Horovod here (see
docs/design.md), so every module imports `keras` from this file instead of
using `tf.keras`. We also set TF_USE_LEGACY_KERAS=1 when TensorFlow has not
been imported yet, so that third-party code that says `tf.keras` (Horovod's
callbacks, user callbacks) sees the same Keras. When TensorFlow was imported
first (a notebook), `tf.keras` may stay Keras 3 for the user's own code, but
official_bench still builds and trains everything with tf-keras.

JAX stays hidden while TensorFlow imports (when it is not loaded already):
TensorFlow's TFLite helpers import `jax.jit` if JAX is installed, as it is
for the JAX backend, which cost every TensorFlow process 0.8 s of start-up
for a converter official_bench never calls. `import jax` works afterwards;
only TFLite's JAX conversion stays off in that process.
"""

import contextlib
import os
import sys

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# Quieten TensorFlow's C++ start-up chatter unless the user chose a level.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from official_bench.host import cuda_noise  # noqa: E402


@contextlib.contextmanager
def _jax_hidden():
    """`import jax` fails inside (unless JAX is already loaded)."""
    if "jax" in sys.modules:
        yield
        return
    sys.modules["jax"] = None  # the import system's "not importable"
    try:
        yield
    finally:
        if "jax" in sys.modules and sys.modules["jax"] is None:
            del sys.modules["jax"]


# Without a GPU, TensorFlow's CUDA start-up lines (cuInit's UNKNOWN ERROR
# (303)) are dropped while it loads and first lists its devices, and the
# reason is said once, in our words (host/cuda_noise.py).
NO_GPU = cuda_noise.no_gpu_reason() if "tensorflow" not in sys.modules \
    else None
with (cuda_noise.dropping_lines() if NO_GPU
      else contextlib.nullcontext()), _jax_hidden():
    import tensorflow as tf  # noqa: E402
    if NO_GPU:
        tf.config.list_physical_devices("GPU")
if NO_GPU:
    from absl import logging  # noqa: E402
    logging.info("official_bench: %s", NO_GPU)

try:
    import tf_keras as keras  # noqa: E402
except ImportError as e:  # pragma: no cover - install problem
    raise ImportError(
        "official_bench needs the tf-keras package of the same minor release "
        f"as TensorFlow {tf.__version__} (pip install "
        f"'tf-keras~={'.'.join(tf.__version__.split('.')[:2])}.0')") from e

__all__ = ["keras", "tf"]
