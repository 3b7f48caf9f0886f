"""DATA_DIR, looked at before anything starts: the files the trainer will
read must be there.

With DATA_DIR set every run reads real data (launch/overrides.py switches a
builder that ignores data_dir, such as the CPU smoke config's synthetic, to
records). A DATA_DIR that is missing, or holds no train files of the names
the trainer's builder reads (contracts/record_names.py), would fail every
run after the barrier and TensorFlow's start on every node; `problem` names
the directory and what was looked for instead, so the plan stops at once
(exit CONFIG) with no log written. A remote path (gs://...) is the trainer's to
read: `problem` leaves it alone and `describe` says so.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from official_bench.config import dotted_keys
from official_bench.config.schema import DatasetConfig
from official_bench.contracts import record_names

KEY = "train_dataset"
# Builders that read TFRecords of record_names' layouts from data_dir.
RECORD_BUILDERS = ("records", "service")


def train_keys(merged: Dict[str, Any],
               yaml_tree: Dict[str, Any]) -> Dict[str, Any]:
    """train_dataset's builder, split, layout, name and filenames as the
    trainer will see them: the launcher's overrides, else the config
    file's, else the schema's default."""
    defaults = DatasetConfig()
    out = {}
    for key in ("builder", "split", "layout", "name", "filenames"):
        value = dotted_keys.get(merged, f"{KEY}.{key}")
        if value is None:
            value = dotted_keys.get(yaml_tree, f"{KEY}.{key}")
        out[key] = getattr(defaults, key) if value is None else value
    return out


def is_remote(data_dir: str) -> bool:
    return "://" in data_dir


def train_files(data_dir: str, keys: Dict[str, Any]) -> List[str]:
    """The train files the builder will read ([] when none)."""
    if keys["builder"] in RECORD_BUILDERS:
        layout = keys["layout"] if keys["layout"] in \
            record_names.LAYOUTS else "auto"
        return record_names.find(data_dir, keys["split"], layout,
                                 keys["name"])
    # tfds reads a prepared TFDS tree, python its own source: any entry.
    return sorted(os.path.join(data_dir, n) for n in os.listdir(data_dir)
                  if not n.startswith("."))


def problem(data_dir: str, described: str,
            keys: Dict[str, Any]) -> Optional[str]:
    """The one line (after 'error: <script>: ') when `data_dir` cannot give
    the trainer its train files; None when it can, when the builder reads
    a `filenames` list, or for a remote path. `described`: the knob and
    its source, e.g. "DATA_DIR='/d' (env DATA_DIR)"."""
    if is_remote(data_dir) or keys["filenames"]:
        return None
    fix = ("write a record set there (official-bench-build-records), or "
           "unset DATA_DIR for synthetic data")
    if not os.path.isdir(data_dir):
        return f"{described} does not exist or is not a directory; {fix}"
    try:
        if train_files(data_dir, keys):
            return None
    except OSError as e:
        return f"{described} cannot be read: {e.strerror or e}"
    builder = keys["builder"]
    if builder in RECORD_BUILDERS:
        wanted = record_names.looked_for(keys["split"], keys["layout"])
        images = record_names.image_folder_split(data_dir)
        if images is not None:
            fix = record_names.image_folder_fix(data_dir, images,
                                                "set DATA_DIR=DIR")
        return (f"{described} holds no {keys['split']} files for "
                f"{KEY}.builder {builder}: looked for {wanted}; {fix}")
    return f"{described} is empty ({KEY}.builder {builder}); {fix}"


def describe(data_dir: str, keys: Dict[str, Any]) -> str:
    """The plan's note: what the runs read."""
    builder = keys["builder"]
    if is_remote(data_dir):
        return (f"DATA_DIR {data_dir}: {KEY}.builder {builder} reads it "
                "(a remote path: not checked before the runs)")
    if keys["filenames"]:
        return (f"DATA_DIR {data_dir}: {KEY}.builder {builder} reads "
                f"{KEY}.filenames ({len(keys['filenames'])} file(s))")
    files = train_files(data_dir, keys)
    return (f"DATA_DIR {data_dir}: {KEY}.builder {builder} reads "
            f"{len(files)} {keys['split']} file(s) "
            f"{record_names.span(files)}")
