"""The record files' framing check (framing.py) in a run: started with the
input, watched during fit, answered before the results are written.

With `skip_bad_records: false` a truncated or corrupt file stops the run
with the bad-record line (during fit as soon as the check finds it, else at
the end), exit 1; with `true` each such file is logged as skipped and
counted once. The same answer in every run, however far training read.
"""

from __future__ import annotations

from typing import Optional

from absl import logging

from official_bench.config import DatasetConfig
from official_bench.data.records.bad_records import SKIP_HINT
from official_bench.data.records.framing import FileCheck
from official_bench.runtime.keras_setup import keras, tf

CHECKED_BUILDERS = ("records", "tfds")


class BadRecordFile(Exception):
    """A record file failed the framing check; str() is the one line."""


def start(ds: DatasetConfig, is_training: bool) -> Optional[FileCheck]:
    """A running check of the files `ds` reads, or None for builders that
    read no record files."""
    if ds.builder not in CHECKED_BUILDERS:
        return None
    if ds.builder == "tfds":
        from official_bench.data.records.tfds import tfds_files
        files = tfds_files(ds, is_training)[0]
    else:
        from official_bench.data.records.record_files import find_files
        files = find_files(ds, is_training)[0]
    from official_bench.data.records.record_files import file_sizes
    return FileCheck(files, file_sizes(files), opener=tf.io.gfile.GFile)


def _raise_first(check: FileCheck) -> None:
    raise BadRecordFile(check.problems[0].line() + SKIP_HINT)


class StopOnBadFile(keras.callbacks.Callback):
    """Stops fit at the first batch after the check found a bad file
    (skip_bad_records: false): the run ends with that file's line."""

    def __init__(self, check: FileCheck):
        super().__init__()
        self.check = check

    def on_train_batch_end(self, batch, logs=None):
        if self.check.problems:
            _raise_first(self.check)


def callbacks(check: Optional[FileCheck], ds: DatasetConfig) -> list:
    """[StopOnBadFile] where a bad file should stop the run, else []."""
    if check is None or ds.skip_bad_records:
        return []
    return [StopOnBadFile(check)]


def finish(check: Optional[FileCheck], ds: DatasetConfig) -> None:
    """Waits for the check (a line every 5 s while it runs), then raises
    BadRecordFile (strict) or logs each bad file as skipped and the count."""
    if check is None:
        return
    problems = check.wait(progress=logging.info)
    if not problems:
        logging.info("%s record file(s) checked: every one is whole",
                     len(check.files))
        return
    if not ds.skip_bad_records:
        _raise_first(check)
    for problem in problems:
        logging.warning("%s; skipped (skip_bad_records: true)",
                        problem.line())
    logging.warning("official_bench: %d of %d record file(s) truncated or "
                    "corrupt in %s; their records after the damage were not "
                    "read", len(problems), len(check.files), ds.split)
