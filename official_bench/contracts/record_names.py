"""The file names of a TFRecord set, for every layer that looks for them.

Two layouts: classic, as build_imagenet_data.py, DLPerf and
official-bench-build-records write it, `{data_dir}/{split}-00000-of-01024`;
and a prepared TFDS directory, `*-{split}.tfrecord-*` in data_dir or in
data_dir/<name>/<version>/. Hidden files (a builder's unfinished .tmp
shards) and directories never count. The trainer's pipeline reads them with
TensorFlow's file system (data/records/record_files.py); the launcher looks
for the train files here, on this machine's file system, before any run
(launch/data_dir.py), so a DATA_DIR without them stops it at once.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from typing import Callable, List, Optional, Tuple

CLASSIC = "classic"
TFDS = "tfds"
LAYOUTS = ("auto", CLASSIC, TFDS)
# What official-bench-build-records writes beside the shards it built
# (data/build/manifest.py); the records pipeline reads its counts.
BUILD_MANIFEST = "build_records.json"


def pattern(layout: str, split: str) -> str:
    """The glob of a layout's files of `split`: train-* or
    *-train.tfrecord-*."""
    return f"{split}-*" if layout == CLASSIC else f"*-{split}.tfrecord-*"


def looked_for(split: str, layout: str = "auto") -> str:
    """What `find` looks for, in words for an error line."""
    words = {CLASSIC: f"{pattern(CLASSIC, split)} (classic)",
             TFDS: f"{pattern(TFDS, split)} (TFDS, also under <name>/"
                   "<version>/)"}
    return " and ".join(words[k] for k in (CLASSIC, TFDS)
                        if layout in ("auto", k))


def span(paths: List[str]) -> str:
    """A set's files in a log line: "(first ... last)" by base name, or
    "(only)" for one file, "(none)" for none."""
    names = [os.path.basename(p) for p in paths]
    if not names:
        return "(none)"
    return f"({names[0]})" if len(names) == 1 else \
        f"({names[0]} ... {names[-1]})"


@dataclasses.dataclass(frozen=True)
class FileSystem:
    """How `find` lists files, and a dataset's files are checked: this
    machine's (the launcher, the TensorFlow-free reader) or TensorFlow's
    tf.io.gfile (the trainer: gs:// and the like)."""
    glob: Callable[[str], List[str]]
    isdir: Callable[[str], bool]
    escape: Callable[[str], str]  # a literal path part inside a pattern
    exists: Callable[[str], bool] = os.path.exists
    listdir: Callable[[str], List[str]] = os.listdir
    size: Callable[[str], int] = os.path.getsize  # bytes


LOCAL = FileSystem(glob.glob, os.path.isdir, glob.escape)


# The split folders of an image folder as official-bench-build-records
# --input_dir reads it (train/<class>/*.jpg, validation/ or val/<class>/...).
IMAGE_SPLIT_DIRS = {"train": ("train",), "validation": ("validation", "val")}


def image_folder_split(data_dir: str, fs: FileSystem = LOCAL
                       ) -> Optional[str]:
    """The first image-folder split folder `data_dir` holds (a folder of
    images given where records were wanted), or None."""
    for names in IMAGE_SPLIT_DIRS.values():
        for name in names:
            if fs.isdir(os.path.join(data_dir, name)):
                return name
    return None


def image_folder_fix(data_dir: str, found: str, then: str) -> str:
    """What to do with an image folder (split folder `found`) given where
    records were wanted; `then`: pointing the run at the records, in the
    words of where it was given ('set data_dir to DIR', 'set
    DATA_DIR=DIR')."""
    return (f"it holds an image folder ({found}/), not TFRecords: build "
            f"records from it (official-bench-build-records "
            f"--input_dir={data_dir} --output_dir=DIR) and {then}")


def _visible(paths: List[str], fs: FileSystem) -> List[str]:
    return sorted(p for p in paths if not os.path.basename(p).startswith(".")
                  and not fs.isdir(p))


def _version_key(path: str) -> Tuple:
    """A TFDS version folder (1.0.10) as numbers, for latest-first order."""
    parts = os.path.basename(path.rstrip("/")).split(".")
    return tuple(int(p) if p.isdigit() else -1 for p in parts)


def find(data_dir: str, split: str, layout: str = "auto",
         name: Optional[str] = None, fs: FileSystem = LOCAL) -> List[str]:
    """The files of `split` in `data_dir` for `layout` (auto: classic
    first, as the pipeline chooses; TFDS in data_dir itself, else in the
    latest <name>/<version>/ that has them), sorted; [] when none."""
    root = fs.escape(data_dir)
    if layout in ("auto", CLASSIC):
        files = _visible(fs.glob(os.path.join(root, pattern(CLASSIC, split))),
                         fs)
        if files or layout == CLASSIC:
            return files
    tfds = pattern(TFDS, split)
    files = _visible(fs.glob(os.path.join(root, tfds)), fs)
    if files:
        return files
    versions = sorted(fs.glob(os.path.join(
        root, fs.escape(name) if name else "*", "*")),
        key=_version_key, reverse=True)
    for version_dir in versions:
        files = _visible(fs.glob(os.path.join(fs.escape(version_dir), tfds)),
                         fs)
        if files:
            return files
    return []
