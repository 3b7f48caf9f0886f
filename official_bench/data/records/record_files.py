"""Which TFRecord files a dataset config names, and their layout.

Two layouts, chosen by `layout` (auto detects them): classic
(`build_imagenet_data.py`, DLPerf: `{data_dir}/train-00000-of-01024`, keys
`image/encoded`, 1-based `image/class/label`, optional boxes) and tfds (a
prepared tensorflow-datasets directory read without TFDS, in `data_dir` or
`data_dir/<name>/<version>/`, keys `image`, `label`). Errors name the key
and the directory. The pipeline is data/records/pipeline.py.
"""

from __future__ import annotations

import dataclasses
import os
from typing import List, Sequence, Tuple

from absl import logging

from official_bench.config import ConfigError, DatasetConfig
from official_bench.config.paths import missing_dir_message
from official_bench.contracts import record_names
from official_bench.runtime.keras_setup import tf

CLASSIC = record_names.CLASSIC
TFDS = record_names.TFDS


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a layout keeps the image and label, and how labels count."""
    name: str
    image_key: str
    label_key: str
    label_offset: int  # subtracted from stored labels
    has_boxes: bool


CLASSIC_LAYOUT = Layout(CLASSIC, "image/encoded", "image/class/label", 1,
                        True)
TFDS_LAYOUT = Layout(TFDS, "image", "label", 0, False)
LAYOUTS = {CLASSIC: CLASSIC_LAYOUT, TFDS: TFDS_LAYOUT}


def config_key(is_training: bool) -> str:
    return "train_dataset" if is_training else "validation_dataset"


# The trainer lists files through TensorFlow (local, gs://, ...); TensorFlow's
# glob takes a path as it is.
TF_FS = record_names.FileSystem(tf.io.gfile.glob, tf.io.gfile.isdir,
                                lambda part: part)


def find_files(ds: DatasetConfig, is_training: bool) -> Tuple[List[str],
                                                                 Layout]:
    """The sorted record files for `ds.split` and their layout.

    Raises ConfigError naming the key and the directory when data_dir is
    unset, missing or empty, or holds no files for the split.
    """
    key = config_key(is_training)
    if ds.filenames:
        files = []
        for name in ds.filenames:
            path = name if (os.path.isabs(name) or not ds.data_dir or
                            "://" in name) else os.path.join(ds.data_dir, name)
            if not tf.io.gfile.exists(path):
                raise ConfigError(f"{key}.filenames: {path!r} does not exist")
            files.append(path)
        return files, _layout_for(ds, files, key)
    if not ds.data_dir:
        raise ConfigError(
            f"{key}.data_dir is not set: builder: records needs the directory "
            f"of the TFRecord files (--data_dir=...), or use builder: "
            "synthetic")
    data_dir = ds.data_dir
    if not tf.io.gfile.isdir(data_dir):
        raise ConfigError(missing_dir_message(key, data_dir))
    if not tf.io.gfile.listdir(data_dir):
        raise ConfigError(f"{key}.data_dir {data_dir!r} is empty; write "
                          "TFRecords there first (python -m "
                          "official_bench.data.build.build_records)")
    classic = record_names.find(data_dir, ds.split, CLASSIC, fs=TF_FS)
    tfds = record_names.find(data_dir, ds.split, TFDS, ds.name, fs=TF_FS)
    if ds.layout == CLASSIC or (ds.layout == "auto" and classic):
        if ds.layout == "auto" and tfds:
            logging.warning("%s.data_dir %s holds both classic (%s-*) and "
                            "TFDS (*-%s.tfrecord-*) files; reading the "
                            "classic ones (set layout: tfds for the others)",
                            key, data_dir, ds.split, ds.split)
        files, layout = classic, CLASSIC_LAYOUT
    elif ds.layout == TFDS or (ds.layout == "auto" and tfds):
        files, layout = tfds, TFDS_LAYOUT
    else:
        files, layout = [], None
    if not files:
        raise ConfigError(
            f"{key}: no files for split {ds.split!r} in data_dir "
            f"{data_dir!r}; looked for "
            f"{record_names.looked_for(ds.split, ds.layout)}")
    return files, layout


def _layout_for(ds: DatasetConfig, files: Sequence[str], key: str) -> Layout:
    if ds.layout in LAYOUTS:
        return LAYOUTS[ds.layout]
    tfds_like = [".tfrecord-" in os.path.basename(f) for f in files]
    if all(tfds_like):
        return TFDS_LAYOUT
    if not any(tfds_like):
        return CLASSIC_LAYOUT
    raise ConfigError(f"{key}.filenames mixes classic and TFDS file names; "
                      "set layout: classic or tfds")


def file_sizes(files: Sequence[str]) -> List[int]:
    """Byte sizes, read once at build time (the reader checks it read all)."""
    return [tf.io.gfile.stat(f).length for f in files]



def classic_files(data_dir: str, split: str) -> List[str]:
    """The classic shards of `split` in `data_dir`, sorted."""
    return record_names.find(data_dir, split, CLASSIC, fs=TF_FS)
