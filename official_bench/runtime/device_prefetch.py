"""tf.distribute's per-device prefetch, without tf.data's autotune thread.

Every MultiDeviceIterator (one_device, mirrored, multi_worker_mirrored)
ends each device's pipeline in a `prefetch` of the batches already made,
in a dataset with default options, so tf.data autotunes it: one thread
per device whose period doubles from 10 ms up to 60 s, and whose end the
iterator's deletion waits out. That deletion comes at the end of every
fit, which would return up to a minute after its last step (BENCHMARKS.md,
"The tail after training"). The stage has a fixed buffer and nothing to
tune, so it is built here with autotuning off.

This wraps TensorFlow's private `_create_device_dataset`
(tensorflow/python/data/ops/multi_device_iterator_ops.py, in 2.18-2.21);
where it is missing, nothing is changed and the log says so. The options
stage it adds has a GPU kernel with host-memory handles, as the prefetch
has (`OptionsDataset` in tensorflow/core/kernels/data/options_dataset_op.cc).
"""

from __future__ import annotations

from absl import logging

from official_bench.runtime.keras_setup import tf

_MARK = "_official_bench_no_autotune"


def without_autotune(dataset):
    """`dataset` with tf.data's autotuning off (nothing else changed); the
    one place it is turned off (also for the synthetic and token feeds)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def install() -> bool:
    """Per-device datasets of MultiDeviceIterators made from now on in this
    process skip autotuning; True when installed (again: a no-op)."""
    from tensorflow.python.data.ops import multi_device_iterator_ops as mdi
    original = getattr(mdi, "_create_device_dataset", None)
    if original is None or not callable(original):
        logging.warning(
            "official_bench: this TensorFlow has no multi_device_iterator_ops."
            "_create_device_dataset, so its per-device prefetch keeps "
            "tf.data's autotune thread (fit may return up to 60 s after its "
            "last step)")
        return False
    if getattr(original, _MARK, False):
        return True

    def create_device_dataset(*args, **kwargs):
        return without_autotune(original(*args, **kwargs))

    setattr(create_device_dataset, _MARK, True)
    create_device_dataset.__wrapped__ = original
    mdi._create_device_dataset = create_device_dataset
    return True
