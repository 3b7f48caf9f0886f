"""Bad records: the message naming one, and the skip-and-count filter.

With `skip_bad_records: false` (default) the guard
(data/records/record_guard.py) stops the input at the first bad record with
`message(...)` plus SKIP_HINT; with `true` the pipeline's `keep_or_log` filter
drops it, logs the message and a running count per split, kept in a
`SkippedRecords` that the pipeline owns (not a process-wide counter: a second
run or pipeline in the same process counts from zero). The words, the
count and its log lines are record_problems.py's, which the TensorFlow-free
reader (host_examples.py) uses too.
"""

from __future__ import annotations

from official_bench.data.records.record_problems import (
    BLOCK_FAILED,
    END_OK,
    OK,
    PREFIX,
    SkippedRecords,
    log_skipped,
)
from official_bench.runtime.keras_setup import tf


def message(filename, index, detail) -> tf.Tensor:
    """record_problems.message_line as a TensorFlow string."""
    return tf.strings.join([PREFIX, tf.strings.as_string(index), " in ",
                            filename, ": ", detail])


def _bad_lines(label, status, filename, index, detail):
    """(message lines, count) of a bad element; ('', 0) for OK / END_OK."""
    block = tf.equal(status, BLOCK_FAILED)
    single = tf.logical_not(block) & tf.not_equal(status, OK) & \
        tf.not_equal(status, END_OK)
    text = tf.where(block, detail, tf.where(
        single, message(filename, index, detail), ""))
    count = tf.where(block, tf.cast(label, tf.int64),
                     tf.cast(single, tf.int64))
    return text, count


def _log_skipped(split: str, skipped: SkippedRecords):
    def log(text, count):
        lines = text.decode("utf-8", "replace").splitlines()
        return log_skipped(split, skipped, lines, count)
    return log


def keep_or_log(split: str, skipped: SkippedRecords):
    """The filter of a skip_bad_records pipeline: keeps good records, logs
    and counts (in `skipped`) the bad ones and drops them."""
    log = _log_skipped(split, skipped)

    def keep(image, label, status, filename, index, detail):
        def report():
            text, count = _bad_lines(label, status, filename, index, detail)
            total = tf.numpy_function(log, [text, count], tf.int64,
                                      stateful=True)
            with tf.control_dependencies([total]):
                return tf.constant(False)
        ok = tf.equal(status, OK)
        return tf.cond(ok | tf.equal(status, END_OK), lambda: ok, report)
    return keep
