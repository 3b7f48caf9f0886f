"""Bad records: the message naming one, and the skip-and-count filter.

With `skip_bad_records: false` (default) the guard
(data/records/record_guard.py) stops the input at the first bad record with
`message(...)` plus SKIP_HINT; with `true` the pipeline's `keep_or_log` filter
drops it, logs the message and a running count per split, kept in a
`SkippedRecords` that the pipeline owns (not a process-wide counter: a second
run or pipeline in the same process counts from zero). The verifier
(data/build/record_verify.py) parses the message lines back.
"""

from __future__ import annotations

import collections
import re
import threading
from typing import Dict, Optional

from absl import logging

from official_bench.data.records.record_reader import (
    BAD_EXAMPLE,
    BAD_IMAGE,
    BLOCK_FAILED,
    END_OK,
    OK,
)
from official_bench.runtime.keras_setup import tf


class SkippedRecords:
    """Records one pipeline skipped so far, per split. Thread-safe: the
    filter's numpy_function can run on several tf.data threads at once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts: Dict[str, int] = collections.Counter()

    def add(self, split: str, count: int) -> int:
        """Counts `count` more for `split`; returns its running total."""
        with self._lock:
            self._counts[split] += count
            return self._counts[split]

    def count(self, split: Optional[str] = None) -> int:
        """Skipped so far (all splits, or one)."""
        with self._lock:
            if split is None:
                return sum(self._counts.values())
            return self._counts.get(split, 0)


def message(filename, index, detail) -> tf.Tensor:
    return tf.strings.join([
        "official_bench: bad record ", tf.strings.as_string(index), " in ",
        filename, ": ", detail])


SKIP_HINT = ("; set skip_bad_records: true in the dataset config to skip "
              "bad records")


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
        total = skipped.add(split, int(count))
        for line in lines:
            logging.warning("%s; skipped (skip_bad_records: true)", line)
        logging.warning("official_bench: %d bad record(s) skipped in %s so "
                        "far", total, split)
        return total
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


_LINE = re.compile(r"^official_bench: bad record (-?\d+) in (.*?): (.*)$")


def parse_message(line: str):
    """A BLOCK_FAILED message line back into (filename, index, status, why)."""
    match = _LINE.match(line)
    if not match:
        return "", -1, BAD_EXAMPLE, line
    index, filename, detail = match.groups()
    status = BAD_IMAGE if "cannot be decoded" in detail else BAD_EXAMPLE
    return filename, int(index), status, detail
