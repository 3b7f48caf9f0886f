"""Record files -> raw records, each with the reader's verdict.

Every element is (filename, index, record, status, detail). Each file's
reader checks that it read the whole file (a corrupt or truncated file
ends in a CORRUPT_FILE element instead of an anonymous TensorFlow error);
`record_dataset` shards, shuffles and repeats the files and records for an
input pipeline. Parsing and decoding come after (data/records/record_guard.py).
"""

from __future__ import annotations

from typing import Optional, Sequence

from official_bench.config import DatasetConfig
from official_bench.data.records.record_problems import (  # noqa: F401
    BAD_EXAMPLE,
    BAD_IMAGE,
    BAD_LABEL,
    BLOCK_FAILED,
    CORRUPT_FILE,
    END_OK,
    GONE,
    OK,
    TRUNCATED,
    UNREADABLE,
)
from official_bench.runtime.keras_setup import tf

READ_BUFFER_BYTES = 8 * 1024 * 1024
INTERLEAVE_CYCLE = 10  # files read at once per pipeline (r2.3: 10)
READ_CHUNK = 64  # records per step of the reader's byte count

# The record status codes (OK, CORRUPT_FILE, ...) are record_problems.py's,
# imported above for the pipeline's modules and tests.


def read_file(filename: tf.Tensor, size: tf.Tensor) -> tf.data.Dataset:
    """One file's records as (filename, index, record, status, detail).

    Read errors end the file instead of raising; a final element with
    status CORRUPT_FILE says so when fewer than `size` bytes were read.
    The byte count runs on chunks of READ_CHUNK records (an empty chunk
    marks the end), so it costs one function call per chunk, not per
    record.
    """
    records = tf.data.TFRecordDataset(filename,
                                      buffer_size=READ_BUFFER_BYTES)
    # ignore_errors() retries a file that cannot be opened forever, so a
    # file that vanished is not opened at all (and reported below).
    exists = tf.size(tf.io.matching_files(filename)) > 0
    records = records.take(tf.where(exists, tf.constant(-1, tf.int64), 0))
    chunks = records.ignore_errors().batch(READ_CHUNK)
    chunks = chunks.concatenate(
        tf.data.Dataset.from_tensors(tf.zeros([0], tf.string)))

    def step(state, chunk):
        index, offset = state
        n = tf.shape(chunk, out_type=tf.int64)[0]
        framed = tf.reduce_sum(
            tf.cast(tf.strings.length(chunk), tf.int64) + 16)

        def records_out():
            return ((index + n, offset + framed),
                    (tf.fill([n], filename), index + tf.range(n), chunk,
                     tf.fill([n], OK), tf.fill([n], "")))

        def end_out():
            corrupt = tf.not_equal(offset, size)
            m = tf.cast(corrupt, tf.int64)
            detail = tf.case([
                (tf.less(size, 0), lambda: tf.constant(GONE)),
                (tf.equal(offset, 0),
                 lambda: tf.strings.format(UNREADABLE, size))],
                default=lambda: tf.strings.format(TRUNCATED,
                                                  (index, offset, size)))
            return ((index, offset),
                    (tf.fill([m], filename), tf.fill([m], index),
                     tf.fill([m], ""), tf.fill([m], CORRUPT_FILE),
                     tf.fill([m], detail)))
        return tf.cond(n > 0, records_out, end_out)

    chunks = chunks.scan((tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
                         step)
    return chunks.unbatch()


def derive_seed(seed: Optional[int], *salt: int) -> Optional[int]:
    """A seed per use and input pipeline from the run's seed (None
    stays None: a different order each run)."""
    if seed is None:
        return None
    value = seed
    for s in salt:
        value = (value * 1000003 + s) % (2 ** 31 - 1)
    return value


def record_dataset(files: Sequence[str], sizes: Sequence[int],
                   ds: DatasetConfig, ctx: tf.distribute.InputContext,
                   is_training: bool, seed: Optional[int]) -> tf.data.Dataset:
    """Files -> raw records (filename, index, record, status, detail).

    Sharded for `ctx`, shuffled (files and records) and repeated when
    training. `seed` fixes both shuffles (None: a different order each run).
    """
    num_pipelines, pipeline_id = ctx.num_input_pipelines, ctx.input_pipeline_id
    by_file = len(files) >= num_pipelines
    deterministic = bool(ds.deterministic)
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.constant(list(files), tf.string),
         tf.constant([int(s) for s in sizes], tf.int64)))
    n_files = len(files)
    if num_pipelines > 1 and by_file:
        dataset = dataset.shard(num_pipelines, pipeline_id)
        n_files = len(range(pipeline_id, len(files), num_pipelines))
    if is_training and ds.file_shuffle_buffer_size > 1 and n_files > 1:
        # Sharding by record needs every pipeline to read the same order:
        # one seed for all of them (and never None).
        file_seed = derive_seed(seed, 1, pipeline_id) if by_file else \
            derive_seed(seed if seed is not None else 0, 1)
        dataset = dataset.shuffle(min(ds.file_shuffle_buffer_size, n_files),
                                  seed=file_seed,
                                  reshuffle_each_iteration=True)
    if is_training and not ds.cache:
        dataset = dataset.repeat()
    dataset = dataset.interleave(
        read_file, cycle_length=max(1, min(INTERLEAVE_CYCLE, n_files)),
        block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic or not by_file)
    if num_pipelines > 1 and not by_file:
        dataset = dataset.shard(num_pipelines, pipeline_id)
    if ds.cache:
        dataset = dataset.cache()
    if is_training and ds.shuffle_buffer_size > 1:
        dataset = dataset.shuffle(ds.shuffle_buffer_size,
                                  seed=derive_seed(seed, 2, pipeline_id),
                                  reshuffle_each_iteration=True)
    if is_training and ds.cache:
        dataset = dataset.repeat()
    return dataset
