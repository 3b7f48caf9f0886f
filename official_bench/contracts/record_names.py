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

import glob
import os
from typing import List, Optional

CLASSIC = "classic"
TFDS = "tfds"
LAYOUTS = ("auto", CLASSIC, TFDS)


def pattern(layout: str, split: str) -> str:
    """The glob of a layout's files of `split`: train-* or *-train.tfrecord-*."""
    return f"{split}-*" if layout == CLASSIC else f"*-{split}.tfrecord-*"


def looked_for(split: str, layout: str = "auto") -> str:
    """What `find` looks for, in words for an error line."""
    words = {CLASSIC: f"{pattern(CLASSIC, split)} (classic)",
             TFDS: f"{pattern(TFDS, split)} (TFDS, also under <name>/"
                   "<version>/)"}
    return " and ".join(words[k] for k in (CLASSIC, TFDS)
                        if layout in ("auto", k))


def _visible(paths: List[str]) -> List[str]:
    return sorted(p for p in paths if not os.path.basename(p).startswith(".")
                  and not os.path.isdir(p))


def find(data_dir: str, split: str, layout: str = "auto",
         name: Optional[str] = None) -> List[str]:
    """The local files of `split` in `data_dir` for `layout` (auto: classic
    first, as the pipeline chooses), sorted; [] when there are none."""
    if layout in ("auto", CLASSIC):
        files = _visible(glob.glob(os.path.join(
            glob.escape(data_dir), pattern(CLASSIC, split))))
        if files or layout == CLASSIC:
            return files
    tfds = pattern(TFDS, split)
    files = _visible(glob.glob(os.path.join(glob.escape(data_dir), tfds)))
    if files:
        return files
    for version_dir in sorted(glob.glob(os.path.join(
            glob.escape(data_dir), glob.escape(name) if name else "*", "*"))):
        files = _visible(glob.glob(os.path.join(glob.escape(version_dir),
                                                tfds)))
        if files:
            return files
    return []
