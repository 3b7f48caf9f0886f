"""Which TFRecord files a dataset config names, and their layout, listed
through TensorFlow's file system (local, gs://, ...): record_sets.py's
rules with tf.io.gfile. The pipeline is data/records/pipeline.py.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from official_bench.config import DatasetConfig
from official_bench.contracts import record_names
from official_bench.data.records import record_sets
from official_bench.data.records.record_sets import (  # noqa: F401
    CLASSIC,
    CLASSIC_LAYOUT,
    Layout,
)
from official_bench.runtime.keras_setup import tf

# The trainer lists files through TensorFlow (local, gs://, ...); TensorFlow's
# glob takes a path as it is.
TF_FS = record_names.FileSystem(
    tf.io.gfile.glob, tf.io.gfile.isdir, lambda part: part,
    exists=tf.io.gfile.exists, listdir=tf.io.gfile.listdir,
    size=lambda path: _size(path))


def _size(path: str) -> int:
    """tf.io.gfile's size; OSError for a file that is not there, as
    os.path.getsize (record_sets.file_sizes catches that)."""
    try:
        return tf.io.gfile.stat(path).length
    except tf.errors.NotFoundError as e:
        raise FileNotFoundError(path) from e


def find_files(ds: DatasetConfig, is_training: bool) -> Tuple[List[str],
                                                                 Layout]:
    """record_sets.find_files through TensorFlow's file system."""
    return record_sets.find_files(ds, is_training, TF_FS)


def file_sizes(files: Sequence[str]) -> List[int]:
    """Byte sizes, read once at build time (the reader checks it read all)."""
    return record_sets.file_sizes(files, TF_FS)


def classic_files(data_dir: str, split: str) -> List[str]:
    """The classic shards of `split` in `data_dir`, sorted."""
    return record_names.find(data_dir, split, CLASSIC, fs=TF_FS)
