"""The record files' framing check (framing.py) in a TensorFlow run:
started with the input (through TensorFlow's file system), watched during
fit by a tf-keras callback, answered before the results are written.

The answers themselves (stop on a cut file, or count it) are
file_verdict.py's, which a TensorFlow-free loop calls directly. The same
answer in every run, however far training read.
"""

from __future__ import annotations

from typing import Optional

from official_bench.config import DatasetConfig
from official_bench.data.records.file_verdict import (  # noqa: F401
    CHECKED_BUILDERS,
    BadRecordFile,
    finish,
    stop_if_bad,
    warn_empty,
)
from official_bench.data.records.framing import FileCheck
from official_bench.runtime.keras_setup import keras, tf


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
    from official_bench.data.records.record_sets import config_key
    return warn_empty(FileCheck(files, file_sizes(files),
                                opener=tf.io.gfile.GFile,
                                key=config_key(is_training)))


class StopOnBadFile(keras.callbacks.Callback):
    """Stops fit at the first batch after the check found a bad file
    (skip_bad_records: false): the run ends with that file's line."""

    def __init__(self, check: FileCheck, ds: DatasetConfig):
        super().__init__()
        self.check = check
        self.ds = ds

    def on_train_batch_end(self, batch, logs=None):
        stop_if_bad(self.check, self.ds)


def callbacks(check: Optional[FileCheck], ds: DatasetConfig) -> list:
    """[StopOnBadFile] where a bad file should stop the run, else []."""
    if check is None or ds.skip_bad_records:
        return []
    return [StopOnBadFile(check, ds)]
