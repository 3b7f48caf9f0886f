"""Which TFRecord files a dataset config names, and their layout, on the
file system the caller passes: TensorFlow's (record_files.py, for the
tf.data pipeline: gs:// too) or this machine's (the TensorFlow-free reader,
host_examples.py). One set of rules and error lines for both.

Two layouts, chosen by `layout` (auto detects them): classic
(`build_imagenet_data.py`, DLPerf: `{data_dir}/train-00000-of-01024`, keys
`image/encoded`, 1-based `image/class/label`, optional boxes) and tfds (a
prepared tensorflow-datasets directory read without TFDS, in `data_dir` or
`data_dir/<name>/<version>/`, keys `image`, `label`). Errors name the key
and the directory. TensorFlow-free.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
from typing import Callable, List, Optional, Sequence, Tuple

from absl import logging

from official_bench.config import ConfigError, DatasetConfig
from official_bench.config.paths import missing_dir_message
from official_bench.contracts import record_names
from official_bench.data.records.record_problems import GONE_SIZE

CLASSIC = record_names.CLASSIC
TFDS = record_names.TFDS
FileSystem = record_names.FileSystem
LOCAL = record_names.LOCAL


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


def other_layout(layout: Layout) -> Layout:
    """The layout a record without `layout`'s label key may be in."""
    return TFDS_LAYOUT if layout.name == CLASSIC else CLASSIC_LAYOUT


def config_key(is_training: bool) -> str:
    return "train_dataset" if is_training else "validation_dataset"


def files_line(is_training: bool, files: Sequence[str], layout: Layout,
               split: str) -> str:
    """The log line naming the files a records pipeline found (both
    backends)."""
    return (f"{config_key(is_training)}: {len(files)} {layout.name} record "
            f"file(s) for split {split} {record_names.span(list(files))}")


def label_offset(ds: DatasetConfig, layout: Layout) -> int:
    """What is subtracted from stored labels: `label_offset`, else the
    layout's (classic 1, TFDS 0)."""
    return ds.label_offset if ds.label_offset is not None else \
        layout.label_offset


def _named_files(ds: DatasetConfig, key: str, fs: FileSystem) -> List[str]:
    files = []
    for name in ds.filenames:
        path = name if (os.path.isabs(name) or not ds.data_dir or
                        "://" in name) else os.path.join(ds.data_dir, name)
        if not fs.exists(path):
            raise ConfigError(f"{key}.filenames: {path!r} does not exist")
        files.append(path)
    return files


def _check_data_dir(ds: DatasetConfig, key: str, fs: FileSystem) -> str:
    if not ds.data_dir:
        raise ConfigError(
            f"{key}.data_dir is not set: builder: records needs the directory "
            f"of the TFRecord files (--data_dir=...), or use builder: "
            "synthetic")
    if not fs.isdir(ds.data_dir):
        raise ConfigError(missing_dir_message(key, ds.data_dir))
    if not fs.listdir(ds.data_dir):
        raise ConfigError(f"{key}.data_dir {ds.data_dir!r} is empty; write "
                          "TFRecords there first (python -m "
                          "official_bench.data.build.build_records)")
    return ds.data_dir


_SHARD_NAME = re.compile(r"^(?P<split>.+)-(?P<index>\d+)-of-(?P<count>\d+)$")


class Once:
    """Keys asked about before, in this process: a warning said once per
    key (a data_dir and split), whichever pipeline or epoch asks."""

    def __init__(self):
        self._seen: set = set()

    def __call__(self, *key) -> bool:
        """True the first time `key` is asked about, then False."""
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


_warned = Once()  # (data_dir, split): each set's warning once per process


def partial_set_problem(split: str, files: Sequence[str],
                        is_dir: Optional[Callable[[str], bool]] = None
                        ) -> str:
    """What is wrong with a classic set named `<split>-NNNNN-of-MMMMM`, in
    words, or "" when it is whole: files of several counts (two builds: the
    trainer would read both), or fewer files than their names count (an
    unfinished build or a partial copy; a missing name that `is_dir(name)`
    says is a directory is called one). Other names are not judged."""
    by_count = collections.defaultdict(set)
    for path in files:
        m = _SHARD_NAME.match(os.path.basename(path))
        if not m or m.group("split") != split:
            return ""
        by_count[int(m.group("count"))].add(int(m.group("index")))
    if not by_count:
        return ""
    if len(by_count) > 1:
        sets = ", ".join(f"{len(found)} of {split}-*-of-{count:05d}"
                         for count, found in sorted(by_count.items()))
        return (f"holds {split} files of {len(by_count)} sets ({sets}): "
                "all of them are read, so images of two builds are mixed "
                "(likely twice); remove the set you do not want, or name "
                "the files in filenames")
    (count, found), = by_count.items()
    missing = [f"{split}-{k:05d}-of-{count:05d}"
               for k in sorted(set(range(count)) - found)]
    if not missing:
        return ""
    dirs = [name for name in missing if is_dir and is_dir(name)]
    where = "" if not dirs else (
        f"; {len(dirs)} of them a directory by that name, not a file, first "
        f"{dirs[0]}" if len(dirs) > 1 or dirs[0] != missing[0] else
        ", a directory by that name, not a file")
    return (f"holds {len(found)} of the {count} files {split}-*-of-"
            f"{count:05d} ({len(missing)} missing, first {missing[0]}"
            f"{where}): reading the {len(found)} there (an unfinished "
            "build? re-run it)")


def warn_partial_set(key: str, data_dir: str, split: str,
                     files: Sequence[str], fs: FileSystem = LOCAL) -> None:
    """Logs partial_set_problem once per data_dir and split."""
    problem = partial_set_problem(
        split, files, lambda name: fs.isdir(os.path.join(data_dir, name)))
    if problem and _warned(data_dir, split):
        logging.warning("%s.data_dir %s %s", key, data_dir, problem)


def find_files(ds: DatasetConfig, is_training: bool,
               fs: FileSystem = LOCAL) -> Tuple[List[str], Layout]:
    """The sorted record files for `ds.split` and their layout.

    Raises ConfigError naming the key and the directory when data_dir is
    unset, missing or empty, or holds no files for the split.
    """
    key = config_key(is_training)
    if ds.filenames:
        files = _named_files(ds, key, fs)
        return files, layout_for(ds, files, key)
    data_dir = _check_data_dir(ds, key, fs)
    classic = record_names.find(data_dir, ds.split, CLASSIC, fs=fs)
    tfds = record_names.find(data_dir, ds.split, TFDS, ds.name, fs=fs)
    if ds.layout == CLASSIC or (ds.layout == "auto" and classic):
        if ds.layout == "auto" and tfds and _warned("mixed", data_dir,
                                                    ds.split):
            logging.warning("%s.data_dir %s holds both classic (%s-*) and "
                            "TFDS (*-%s.tfrecord-*) files; reading the "
                            "classic ones (set layout: tfds for the others)",
                            key, data_dir, ds.split, ds.split)
        files, layout = classic, CLASSIC_LAYOUT
        warn_partial_set(key, data_dir, ds.split, files, fs)
    elif ds.layout == TFDS or (ds.layout == "auto" and tfds):
        files, layout = tfds, TFDS_LAYOUT
    else:
        files, layout = [], None
    if not files:
        raise ConfigError(
            f"{key}: no files for split {ds.split!r} in data_dir "
            f"{data_dir!r}; looked for "
            f"{record_names.looked_for(ds.split, ds.layout)}"
            f"{image_folder_hint(data_dir, fs)}"
            f"{'' if is_training else NO_EVAL_HINT}")
    return files, layout


# The way out for a set without a validation split.
NO_EVAL_HINT = ("; to train without evaluating, run --mode=train or set "
                "evaluation.skip_eval: true")


def image_folder_hint(data_dir: str, fs: FileSystem = LOCAL) -> str:
    """"" unless `data_dir` holds an image folder's split folder (train/,
    validation/, val/) rather than records: then the words, after the
    error line's "looked for ...", that say to build records from it."""
    found = record_names.image_folder_split(data_dir, fs)
    if found is None:
        return ""
    return "; " + record_names.image_folder_fix(data_dir, found,
                                                 "set data_dir to DIR")


def layout_for(ds: DatasetConfig, files: Sequence[str],
               key: str = "train_dataset") -> Layout:
    """The layout of named files: `layout` when set, else by their names
    (TFDS files have `.tfrecord-` in theirs)."""
    if ds.layout in LAYOUTS:
        return LAYOUTS[ds.layout]
    tfds_like = [".tfrecord-" in os.path.basename(f) for f in files]
    if all(tfds_like):
        return TFDS_LAYOUT
    if not any(tfds_like):
        return CLASSIC_LAYOUT
    raise ConfigError(f"{key}.filenames mixes classic and TFDS file names; "
                      "set layout: classic or tfds")


def file_sizes(files: Sequence[str], fs: FileSystem = LOCAL) -> List[int]:
    """Byte sizes, read once at build time (the readers check they read
    all). A file gone since it was listed is GONE_SIZE: the readers report
    it as a bad file (stopping the run, or skipped and counted with
    skip_bad_records) instead of this call failing the run."""
    return [_size(fs, f) for f in files]


def _size(fs: FileSystem, path: str) -> int:
    try:
        return fs.size(path)
    except OSError:
        return GONE_SIZE


def shard_files(files: Sequence[str], count: int, index: int
                ) -> Tuple[List[str], Tuple[int, int]]:
    """Input pipeline `index` of `count`'s files, as the TensorFlow
    pipeline shards them (record_reader.record_dataset): every count-th
    file from `index` when each pipeline gets at least one file, else
    every file, with its records to be shared out. Returns (files,
    (record shard index, record shard count)); (0, 1) by file."""
    if count <= 1 or len(files) >= count:
        return list(files[index::max(count, 1)]), (0, 1)
    return list(files), (index, count)
