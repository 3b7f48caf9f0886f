"""`builder: python`: user Python code yields numpy batches, tf.data feeds
them.

`python_source: "package.module:function"` names a function called once per
input pipeline (per worker process) with a `SourceContext`; it returns an
iterable of (images, labels) numpy batches of the per-replica batch size
(see batch_spec.py). The batches enter tf.data through `from_generator`
with a declared signature, are one-hot encoded when `one_hot` is true, and
the strategy prefetches them to the replicas' devices. The iterable should
be endless for training (the trainer takes train.steps batches).

Errors name the source: a spec that does not import or is not callable is
a ConfigError before training starts; an exception inside the iterable or a
batch with the wrong shape, dtype or labels stops the run with
"official_bench: python_source <spec>: ..." naming the field. A source that
makes no batch for `python_timeout_seconds` (the first batch's wait
includes calling the function) stops the run the same way instead of
hanging it: the source runs in its own thread, and tf.data's thread waits
for each batch with a deadline. All of that is TensorFlow-free, in
python_batches.py (the JAX backend feeds the same batches); this module is
the tf.data end.
"""

from __future__ import annotations

from official_bench.config import DatasetConfig
from official_bench.data.feeds.batch_spec import BatchSpec
from official_bench.data.feeds.python_batches import (
    batch_spec,
    checked_batches,
    load_source,
    source_context,
)
from official_bench.runtime.keras_setup import tf


def finish(dataset: tf.data.Dataset, ds: DatasetConfig) -> tf.data.Dataset:
    """One-hot labels when configured (shared with the zmq builder)."""
    if ds.one_hot:
        dataset = dataset.map(
            lambda x, y: (x, tf.one_hot(y, ds.num_classes)),
            num_parallel_calls=tf.data.AUTOTUNE)
    return dataset


def signature(bspec: BatchSpec):
    return (tf.TensorSpec(bspec.image_shape, tf.as_dtype(bspec.image_dtype)),
            tf.TensorSpec((bspec.batch_size,), tf.int32))


def python_dataset(ds: DatasetConfig, ctx: tf.distribute.InputContext,
                   batch_size: int, is_training: bool,
                   seed: int) -> tf.data.Dataset:
    """The batches of `ds.python_source` for this input pipeline."""
    key = "train_dataset" if is_training else "validation_dataset"
    fn = load_source(ds.python_source, f"{key}.python_source")
    bspec = batch_spec(ds, batch_size)
    source_ctx = source_context(ds, batch_size, is_training, seed,
                                ctx.input_pipeline_id,
                                ctx.num_input_pipelines)
    dataset = tf.data.Dataset.from_generator(
        lambda: checked_batches(fn, ds.python_source, source_ctx, bspec,
                                ds.python_timeout_seconds, key),
        output_signature=signature(bspec))
    return finish(dataset, ds)
