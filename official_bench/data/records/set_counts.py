"""A dataset config against the counts official-bench-build-records wrote
beside its shards (build_records.json: each split's records, the class
list). A num_examples or num_classes that disagrees is one warning naming
both numbers, once per data_dir and split: num_examples sets the steps of
an epoch (and of an evaluation), so 1281167 on a small set trains an
'epoch' of thousands of passes over it without a word. TensorFlow-free.
"""

from __future__ import annotations

import json
import os
from typing import List, Optional

from absl import logging

from official_bench.config import DatasetConfig
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


def warn_mismatches(ds: DatasetConfig, key: str, offset: int) -> None:
    """Logs `mismatches` for a local data_dir with a manifest, once."""
    if ds.filenames or not ds.data_dir or "://" in ds.data_dir:
        return
    if not _warned(ds.data_dir, ds.split):
        return
    records, classes = read_counts(ds.data_dir, ds.split)
    for line in mismatches(ds, key, records, classes, offset):
        logging.warning("%s", line)
