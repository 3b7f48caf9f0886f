"""A dataset config against the counts official-bench-build-records wrote
beside its shards (build_records.json: each split's records, the class
list), before training, on both backends. A num_classes too small for the
classes is a ConfigError naming both numbers. A num_examples that
disagrees is one warning naming both, once per data_dir and split:
num_examples sets the steps of an epoch (and of an evaluation), so 1281167
on a small set trains an 'epoch' of thousands of passes over it without a
word; not an error. An evaluation longer than one pass over the validation
records is an error (eval_pass_problem's words, for both backends): the
evaluation would stop early and report the batches it got. A num_classes
larger than the classes is a warning (a head with unused outputs). Per
file: the lines for a 0-byte file and for one whose records differ from
its shard's record (.shards/<name>.json), which the framing check and
the JAX evaluation's count log (file_verdict.py, host_examples.py).
TensorFlow-free.
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


def surplus_classes(ds: DatasetConfig, key: str, classes: Optional[int],
                    offset: int) -> Optional[str]:
    """The line for a num_classes larger than `classes` 1-based labels
    less `offset` need: outputs no label trains (the --dataset default of
    10 or 1000 on a set of another size)."""
    need = None if classes is None else classes + 1 - offset
    if need is None or ds.num_classes <= need:
        return None
    return (f"{key}.num_classes is {ds.num_classes} but data_dir "
            f"{ds.data_dir} ({MANIFEST}) has {classes} classes, labels up to "
            f"{classes - offset} with label_offset {offset}: the model has "
            f"{ds.num_classes - need} outputs no label trains; set "
            f"{key}.num_classes={need}")


def _local_manifest_dir(ds: DatasetConfig) -> bool:
    """Whether `ds` reads a local data_dir (not a file list, not a remote
    one), where a build_records manifest can be read."""
    return bool(ds.data_dir) and not ds.filenames and \
        "://" not in ds.data_dir


def check_counts(ds: DatasetConfig, key: str, offset: int) -> None:
    """For a local data_dir with a manifest: a num_classes too small for
    its classes is a ConfigError now, naming both numbers (the run would
    stop at the first label past it, or skip them all as bad records);
    a num_examples that disagrees, or a num_classes larger than the
    classes, is a warning, once."""
    if not _local_manifest_dir(ds):
        return
    records, classes = read_counts(ds.data_dir, ds.split)
    for line in mismatches(ds, key, None, classes, offset):
        raise ConfigError(line)
    if _warned(ds.data_dir, ds.split):
        surplus = surplus_classes(ds, key, classes, offset)
        for line in mismatches(ds, key, records, None, offset) + \
                ([surplus] if surplus else []):
            logging.warning("%s", line)


def eval_pass_problem(key: str, source: str, records: int, batch: int,
                      steps: int) -> Optional[str]:
    """The line for an evaluation of `steps` batches of `batch` that one
    pass over `records` records (from `source`) cannot fill; None when it
    can. Both backends' words."""
    most = records // batch
    if most >= steps:
        return None
    fix = (f"lower {key}.batch_size (one global batch is more than the "
           "records) or give it more records") if most == 0 else \
        (f"set {key}.num_examples={records} (and evaluation.steps, if set, "
         f"to at most {most})")
    return (f"{key}: {source} gives at most {most} batches of {batch} "
            f"({records} records), the evaluation takes {steps} "
            "(evaluation.steps, else this dataset's num_examples / the "
            f"global batch): {fix}")


def check_eval_pass(ds: DatasetConfig, batch: int, steps: int,
                    key: str = "validation_dataset") -> None:
    """Before training, where a local data_dir's manifest counts the
    validation records: a ConfigError when one pass over them cannot give
    the evaluation's `steps` batches of `batch`."""
    if ds.builder != "records" or ds.layout == "tfds" or \
            not _local_manifest_dir(ds):
        return
    records, _ = read_counts(ds.data_dir, ds.split)
    if records is None:
        return
    problem = eval_pass_problem(
        key, f"one pass over data_dir {ds.data_dir} ({MANIFEST})", records,
        batch, steps)
    if problem:
        raise ConfigError(problem)


# Where official-bench-build-records keeps each finished shard's record
# (data/build/shard_skips.py writes it): <folder>/.shards/<shard>.json.
SHARD_RECORDS = ".shards"


def shard_record_path(folder: str, shard: str) -> str:
    """The builder's record of `shard` in `folder`."""
    return os.path.join(folder, SHARD_RECORDS, shard + ".json")


def built_records(path: str) -> Optional[int]:
    """How many records official-bench-build-records wrote into the local
    shard `path` (its `.shards/<name>.json` beside it), or None where no
    such record is (another tool's files, a remote or unreadable one)."""
    if "://" in path:
        return None
    folder, name = os.path.split(path)
    if not os.path.isdir(os.path.join(folder, SHARD_RECORDS)):
        return None
    try:
        with open(shard_record_path(folder, name), encoding="utf-8") as f:
            records = json.load(f).get("records")
    except (OSError, ValueError, AttributeError):
        return None
    return records if isinstance(records, int) else None


def empty_file_line(key: str, path: str) -> Optional[str]:
    """The warning for a 0-byte record file (the usual trace of a copy
    onto a full disk: its records are silently not there), or None when
    the build itself wrote no record into it."""
    built = built_records(path)
    if built == 0:
        return None
    wrote = "" if built is None else \
        f" (the build wrote {built} into it, {_record_name(path)})"
    return (f"{_head(key)}{path} is empty (0 bytes): it holds no records"
            f"{wrote}; a copy onto a full disk?")


def count_line(key: str, path: str, count: int) -> Optional[str]:
    """The warning for a record file whose `count` whole records differ
    from what the build wrote into it (its .shards record), else None."""
    built = built_records(path)
    if built is None or built == count:
        return None
    return (f"{_head(key)}{path} holds {count} record(s) but the build "
            f"wrote {built} into it ({_record_name(path)}): a copy that "
            "ended at a record's end, or a file of another build? copy it "
            "again or re-run official-bench-build-records")


def warn_file(key: str, path: str, records: int) -> None:
    """Logs the warning, if any, for a whole record file of `records`
    records: empty (empty_file_line), or other than the build wrote into
    it (count_line); the framing check's and the JAX evaluation count's."""
    line = empty_file_line(key, path) if records == 0 else \
        count_line(key, path, records)
    if line:
        logging.warning("official_bench: %s", line)


def _head(key: str) -> str:
    return f"{key}: record file " if key else "record file "


def _record_name(path: str) -> str:
    return shard_record_path(*os.path.split(path))
