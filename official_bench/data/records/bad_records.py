"""Bad records: the message naming one, and the skip-and-count filter.

With `skip_bad_records: false` (default) the guard
(data/records/record_guard.py) stops the input at the first bad record with
`message(...)` plus SKIP_HINT; with `true` the pipeline's `keep_or_log` filter
drops it, logs the message and a running count per split, kept in a
`SkippedRecords` that the pipeline owns (not a process-wide counter: a second
run or pipeline in the same process counts from zero). The words, the
count and its log lines are record_problems.py's, which the TensorFlow-free
reader (host_examples.py) uses too. A training pipeline repeats its
records: once it has skipped every record of its share since its last good
one (`BadRun`), no batch can come, and it stops with an error instead of
skipping on forever (as host_examples.py's loader workers do).
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence, Set, Tuple

from official_bench.data.records.framing import count_records
from official_bench.data.records.record_problems import (
    BLOCK_FAILED,
    CORRUPT_FILE,
    END_OK,
    OK,
    PREFIX,
    SkippedRecords,
    all_skipped,
    log_skipped,
    parse_message,
)
from official_bench.runtime.keras_setup import tf

# Distinct bad records in a row after which the share's records are
# counted (once), unless one comes round again first.
COUNT_AFTER = 1024


class BadRun:
    """The records a training pipeline skipped since its last good one.
    `share()` counts the records of its share of the files, called once and
    only when the run gets long (COUNT_AFTER records, or one seen again);
    once the run holds that many, `skipped` returns the error line."""

    def __init__(self, key: str, share: Callable[[], int]):
        self.key, self._share = key, share
        self.records: Set[Tuple[str, int]] = set()
        self.limit: Optional[int] = None

    def good(self, count: int) -> None:
        if count > 0:
            self.records.clear()

    def skipped(self, ids: Iterable[Tuple[str, int]], line: str) -> str:
        ids = list(ids)
        again = any(i in self.records for i in ids)
        self.records.update(ids)
        if self.limit is None and (again or
                                   len(self.records) >= COUNT_AFTER):
            self.limit = max(1, self._share())
        if self.limit is None or len(self.records) < self.limit:
            return ""
        return "official_bench: " + all_skipped(
            self.key, "the input pipeline", self.limit, line)


def _records_in(path: str) -> int:
    try:
        if "://" in path:
            return count_records(path, opener=tf.io.gfile.GFile)
        return count_records(path)
    except (OSError, tf.errors.OpError):
        return 0  # gone: the reader reports it


def share_records(files: Sequence[str], num_pipelines: int,
                  pipeline_id: int) -> int:
    """Records one input pipeline reads per pass, sharded as
    record_reader.record_dataset shards: by file when each pipeline gets
    one, else by record."""
    if num_pipelines > 1 and len(files) >= num_pipelines:
        return sum(map(_records_in, files[pipeline_id::num_pipelines]))
    return sum(map(_records_in, files)) // max(1, num_pipelines)


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


def _note(split: str, skipped: SkippedRecords, run: Optional[BadRun]):
    """The filter's Python side: logs and counts a bad element, tells `run`
    a block's good records; returns the error line that stops the input,
    or ''."""
    def note(text, count, made, record):
        lines = text.decode("utf-8", "replace").splitlines()
        if count:
            log_skipped(split, skipped, lines, count)
        if run is None:
            return b""
        run.good(int(made))
        if not (record and lines):
            return b""
        ids = [parse_message(line)[:2] for line in lines]
        return run.skipped(ids, lines[-1]).encode("utf-8")
    return note


def keep_or_log(split: str, skipped: SkippedRecords,
                run: Optional[BadRun] = None):
    """The filter of a skip_bad_records pipeline: keeps good records, logs
    and counts (in `skipped`) the bad ones and drops them. With `run` (a
    training pipeline) the blocks' markers tell it their good records too
    (one call per block), and the input stops once `run` says every record
    of the share is bad."""
    note = _note(split, skipped, run)

    def keep(image, label, status, filename, index, detail):
        def report():
            text, count = _bad_lines(label, status, filename, index, detail)
            marker = tf.equal(status, END_OK) | tf.equal(status, BLOCK_FAILED)
            made = tf.where(marker, index, tf.constant(0, tf.int64))
            stop = tf.numpy_function(
                note, [text, count, made, tf.not_equal(status, CORRUPT_FILE)],
                tf.string, stateful=True)
            check = tf.debugging.Assert(tf.equal(stop, ""), [stop])
            with tf.control_dependencies([check]):
                return tf.constant(False)
        ok = tf.equal(status, OK)
        quiet = ok if run is not None else ok | tf.equal(status, END_OK)
        return tf.cond(quiet, lambda: ok, report)
    return keep
