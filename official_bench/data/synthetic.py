"""Synthetic ImageNet-shaped batches: measures compute and communication only.

One random batch per replica is made once and repeated, so no step pays for
decoding or augmentation. Images are random normals (what standardised
ImageNet pixels look like) and labels are random classes; each replica's
pipeline is seeded by its input pipeline id, so replicas differ.
"""

from __future__ import annotations

from official_bench.config import DatasetConfig
from official_bench.runtime.keras_setup import tf


def synthetic_dataset(ds: DatasetConfig, batch_size: int,
                      pipeline_id: int = 0, seed: int = 0) -> tf.data.Dataset:
    """An endless dataset of one fixed (images, labels) batch."""
    shape = (batch_size, ds.image_size, ds.image_size, ds.num_channels)
    # Stateless ops: a parameter-server dataset_fn may not create variables.
    images = tf.cast(tf.random.stateless_normal(shape, seed=[seed, pipeline_id]),
                     ds.dtype)
    labels = tf.random.stateless_uniform(
        (batch_size,), seed=[seed + 1, pipeline_id], minval=0,
        maxval=ds.num_classes, dtype=tf.int32)
    if ds.one_hot:
        labels = tf.one_hot(labels, ds.num_classes)
    dataset = tf.data.Dataset.from_tensors((images, labels)).repeat()
    # Nothing here to tune, and tf.data's autotuner thread competes with the
    # model for CPU cores: with it, resnet_cifar trained 6-10 % slower than a
    # bare tf.function loop on 2 cores (BENCHMARKS.md, trainer overhead).
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
