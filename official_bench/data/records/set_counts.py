"""A dataset config against the counts official-bench-build-records wrote
beside its shards (build_records.json: each split's records, the class
list), before training, on both backends. A num_classes too small for the
classes is a ConfigError naming both numbers. A num_examples that
disagrees is one warning naming both, once per data_dir and split:
num_examples sets the steps of an epoch (and of an evaluation), so 1281167
on a small set trains an 'epoch' of thousands of passes over it without a
word; not an error. TensorFlow-free.
"""

from __future__ import annotations

import json
import os
from typing import List, Optional

from absl import logging

from official_bench.config import ConfigError, DatasetConfig
from official_bench.contracts import record_names
from official_bench.data.records.record_sets import Once

MANIFEST = record_names.BUILD_MANIFEST
_warned = Once()  # (data_dir, split)


def read_counts(data_dir: str, split: str):
    """(records of `split` or None, number of classes or None) from the
    build's manifest; (None, None) without one (or unreadable)."""
    try:
        with open(os.path.join(data_dir, MANIFEST), encoding="utf-8") as f:
            manifest = json.load(f)
        records = manifest.get("splits", {}).get(split, {}).get("records")
        classes = manifest.get("classes")
    except (OSError, ValueError, AttributeError):
        return None, None
    return (records if isinstance(records, int) else None,
            len(classes) if isinstance(classes, list) and classes else None)


def mismatches(ds: DatasetConfig, key: str, records: Optional[int],
               classes: Optional[int], offset: int) -> List[str]:
    """The lines for a num_examples other than `records` and a
    num_classes too small for `classes` 1-based labels less `offset`."""
    where = f"data_dir {ds.data_dir} ({MANIFEST})"
    lines = []
    if records is not None and ds.num_examples != records:
        lines.append(
            f"{key}.num_examples is {ds.num_examples} but {where} holds "
            f"{records} {ds.split} records; num_examples sets the steps of "
            f"an epoch (or of an evaluation): set {key}.num_examples="
            f"{records}")
    if classes is not None and ds.num_classes < classes + 1 - offset:
        need = classes + 1 - offset
        lines.append(
            f"{key}.num_classes is {ds.num_classes} but {where} has "
            f"{classes} classes, labels up to {classes - offset} with "
            f"label_offset {offset}: set {key}.num_classes={need}")
    return lines


def check_counts(ds: DatasetConfig, key: str, offset: int) -> None:
    """For a local data_dir with a manifest: a num_classes too small for
    its classes is a ConfigError now, naming both numbers (the run would
    stop at the first label past it, or skip them all as bad records);
    a num_examples that disagrees is a warning, once."""
    if ds.filenames or not ds.data_dir or "://" in ds.data_dir:
        return
    records, classes = read_counts(ds.data_dir, ds.split)
    for line in mismatches(ds, key, None, classes, offset):
        raise ConfigError(line)
    if _warned(ds.data_dir, ds.split):
        for line in mismatches(ds, key, records, None, offset):
            logging.warning("%s", line)
