"""Synthetic ImageNet-shaped batches: measures compute and communication only.

One random batch per input pipeline is made once and repeated, so no step
pays for decoding or augmentation. Images are random normals (what
standardised ImageNet pixels look like), or uniform 0..255 uint8 with
`transfer_uint8` (the model normalises them), and labels are random
classes; each pipeline is seeded by its id, so pipelines differ.

Where the batch lives is `synthetic_location`: `host` (this module, what
Model Garden r2.3 and DLPerf measured: the batch is a tf.data element,
copied to the device every step) or `device` (data/resident_batch.py: made
once on each replica's device, no copy per step).
"""

from __future__ import annotations

from official_bench.config import DatasetConfig
from official_bench.runtime.device_prefetch import without_autotune
from official_bench.runtime.keras_setup import tf


def synthetic_batch(ds: DatasetConfig, batch_size: int, stream, seed: int = 0):
    """(images, labels) of one pipeline or replica; `stream` (an int or an
    integer tensor) picks the random stream. Stateless ops only: a
    parameter-server dataset_fn may not create variables, and the device
    path runs this inside a replica function."""
    shape = (batch_size, ds.image_size, ds.image_size, ds.num_channels)
    stream = tf.cast(stream, tf.int64)
    image_seed = tf.stack([tf.constant(seed, tf.int64), stream])
    label_seed = tf.stack([tf.constant(seed + 1, tf.int64), stream])
    if ds.transfer_uint8:
        images = tf.cast(tf.random.stateless_uniform(
            shape, seed=image_seed, minval=0, maxval=256, dtype=tf.int32),
            tf.uint8)
    else:
        images = tf.cast(tf.random.stateless_normal(shape, seed=image_seed),
                         ds.dtype)
    labels = tf.random.stateless_uniform(
        (batch_size,), seed=label_seed, minval=0, maxval=ds.num_classes,
        dtype=tf.int32)
    if ds.one_hot:
        labels = tf.one_hot(labels, ds.num_classes)
    return images, labels


def synthetic_dataset(ds: DatasetConfig, batch_size: int,
                      pipeline_id: int = 0, seed: int = 0) -> tf.data.Dataset:
    """An endless dataset of one fixed (images, labels) batch (host)."""
    dataset = tf.data.Dataset.from_tensors(
        synthetic_batch(ds, batch_size, pipeline_id, seed)).repeat()
    # Nothing here to tune, and tf.data's autotuner thread competes with the
    # model for CPU cores: with it, resnet_cifar trained 6-10 % slower than a
    # bare tf.function loop on 2 cores (BENCHMARKS.md, trainer overhead).
    return without_autotune(dataset)
