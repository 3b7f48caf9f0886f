"""`builder: records`: ImageNet-style TFRecord files -> batched tf.data.Dataset.

Two file layouts, chosen by `layout` (auto detects them; data/records/
record_files.py finds the files; files and keys in docs/data.md): classic
(`build_imagenet_data.py`, DLPerf: `train-00000-of-01024`, JPEG and a 1-based
label, optional boxes used as the train crop's boxes) and tfds (a prepared
tensorflow-datasets directory, read without TFDS; 0-based labels).

The pipeline, in order (each step assigns what tf.data returns):
files -> shard by file (when every input pipeline gets at least one file)
-> shuffle files -> repeat (training) -> interleave-read -> [shard by
record] -> [cache] -> shuffle records (training) -> [repeat] -> blocks of
GUARD_BLOCK records, each parsed + decoded + augmented inside an
error-catching inner dataset, blocks in parallel -> [skip filter] -> batch
(drop_remainder) -> one-hot -> options (deterministic, parallel batch).
Evaluation reads each record once per pass (no repeat, no shuffle). With
`deterministic: true` the shuffles and the augmentation use the run's seed.

Bad data becomes a status naming the file and the record instead of an
anonymous TensorFlow error: each file's reader checks that it read the whole
file (record_reader.py), and each record is parsed and decoded inside a guard
(record_guard.py). With `skip_bad_records: false` (default) the first one
stops the input; with `true` it is dropped and counted, and a training
pipeline whose every record is bad stops (bad_records.py).
data/build/record_verify.py checks whole files the same way (--verify).
"""  # noqa: E501

from __future__ import annotations

from typing import Optional, Sequence

from absl import logging

from official_bench.config import DatasetConfig
from official_bench.data.records.bad_records import (
    BadRun,
    keep_or_log,
    share_records,
)
from official_bench.data.records.record_files import file_sizes, find_files
from official_bench.data.records.record_guard import (
    GUARD_BLOCK,
    DecodeFn,
    Decoder,
)
from official_bench.data.records.record_problems import SkippedRecords
from official_bench.data.records.record_reader import (
    derive_seed,
    record_dataset,
)
from official_bench.data.records.record_sets import (
    CLASSIC,
    Layout,
    config_key,
    files_line,
    label_offset,
)
from official_bench.data.records.set_counts import check_counts
from official_bench.runtime.keras_setup import tf


def build_dataset(files: Sequence[str], layout: Layout, ds: DatasetConfig,
                  ctx: tf.distribute.InputContext, batch_size: int,
                  is_training: bool, seed: Optional[int],
                  sizes: Optional[Sequence[int]] = None,
                  decode_fn: Optional[DecodeFn] = None,
                  skipped: Optional[SkippedRecords] = None
                  ) -> tf.data.Dataset:
    """Record files -> batches of (images, labels) for one input pipeline.

    Images are [batch, size, size, channels] in `ds.dtype` (uint8 with
    transfer_uint8); labels are int32 class ids, or one-hot float32 with
    `ds.one_hot`. Shared by `builder: records` and `builder: tfds`.
    `decode_fn` replaces the per-image decode/crop/resize (benchmarks).
    `skipped` counts the records dropped with skip_bad_records (a new
    count for this pipeline when not given).
    """
    sizes = file_sizes(files) if sizes is None else sizes
    offset = label_offset(ds, layout)
    shuffle_seed = seed if ds.deterministic else None
    dataset = record_dataset(files, sizes, ds, ctx, is_training, shuffle_seed)
    # Blocks of records, each with a random seed pair: every record's
    # stateless augmentation seed derives from it (see guarded_block).
    block_seeds = tf.data.Dataset.random(
        seed=derive_seed(shuffle_seed, 3, ctx.input_pipeline_id)).batch(2)
    dataset = tf.data.Dataset.zip((dataset.batch(GUARD_BLOCK), block_seeds))
    decoder = Decoder(ds, layout, offset, is_training, decode_fn)
    strict = not ds.skip_bad_records
    dataset = dataset.interleave(
        lambda block, block_seed: decoder.guarded_block(block, block_seed,
                                                        strict),
        cycle_length=tf.data.AUTOTUNE, block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=bool(ds.deterministic))
    if not strict:
        run = BadRun(config_key(True), lambda: share_records(
            files, ctx.num_input_pipelines, ctx.input_pipeline_id)) \
            if is_training else None
        dataset = dataset.filter(keep_or_log(
            ds.split, skipped if skipped is not None else SkippedRecords(),
            run))
    dataset = dataset.batch(batch_size, drop_remainder=True)

    def select(image, label, *_):
        if ds.one_hot:
            label = tf.one_hot(label, ds.num_classes)
        return image, label
    dataset = dataset.map(select)
    options = tf.data.Options()
    options.deterministic = bool(ds.deterministic)
    options.experimental_optimization.parallel_batch = True
    options.experimental_optimization.map_parallelization = True
    return dataset.with_options(options)


def records_dataset(ds: DatasetConfig, ctx: tf.distribute.InputContext,
                    batch_size: int, is_training: bool, seed: int = 0,
                    skipped: Optional[SkippedRecords] = None
                    ) -> tf.data.Dataset:
    """The `records` builder (see data.factory.BUILDERS); `skipped` as in
    build_dataset."""
    files, layout = find_files(ds, is_training)
    logging.info("%s", files_line(is_training, files, layout, ds.split))
    if layout.name == CLASSIC:
        check_counts(ds, config_key(is_training), label_offset(ds, layout))
    return build_dataset(files, layout, ds, ctx, batch_size, is_training,
                         seed, skipped=skipped)
