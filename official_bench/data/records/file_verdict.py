"""The framing check's answers in a run (framing.FileCheck), for any
training loop: stop between steps when a file is bad, and before the
results, wait for the check and stop or count.

With `skip_bad_records: false` a truncated or corrupt file stops the run
with the bad-record line (`stop_if_bad` between steps, as soon as the
check finds it; else `finish` at the end), exit 1; with `true` `finish`
logs each such file once more and counts the distinct files (the readers
log it at every pass: docs/data.md). The TensorFlow backend calls
these through file_check.py (its fit callback); a JAX loop calls them
itself. `start_local` starts the check on this machine's files, without
TensorFlow. An empty (0-byte) file is a warning when the check starts, a
file whose records differ from what the build wrote into it (its
.shards record, set_counts.py) one when it ends. TensorFlow-free.
"""

from __future__ import annotations

from typing import Optional

from absl import logging

from official_bench.config import DatasetConfig
from official_bench.data.records import set_counts
from official_bench.data.records.framing import FileCheck
from official_bench.data.records.record_problems import SKIP_HINT

CHECKED_BUILDERS = ("records", "tfds")


class BadRecordFile(Exception):
    """A record file failed the framing check; str() is the one line."""


def start_local(ds: DatasetConfig, is_training: bool
                ) -> Optional[FileCheck]:
    """A running check of the files `ds` reads on this machine
    (`builder: records`), or None for builders that read no record files
    without TensorFlow."""
    if ds.builder != "records":
        return None
    from official_bench.data.records import record_sets
    files = record_sets.find_files(ds, is_training)[0]
    return warn_empty(FileCheck(files, record_sets.file_sizes(files),
                                key=record_sets.config_key(is_training)))


def warn_empty(check: FileCheck) -> FileCheck:
    """Logs a warning naming each 0-byte file of `check` (its frames end
    where it ends, so the framing check finds nothing); returns `check`."""
    for path, size in zip(check.files, check.sizes):
        if size == 0:
            set_counts.warn_file(check.key, path, 0)
    return check


def warn_counts(check: FileCheck) -> None:
    """After the check: a warning for each whole, non-empty file whose
    records differ from what the build wrote into it."""
    bad = {p.filename for p in check.problems}
    for path, size in zip(check.files, check.sizes):
        if size > 0 and path in check.counts and path not in bad:
            set_counts.warn_file(check.key, path, check.counts[path])


def raise_first(check: FileCheck) -> None:
    """Raises BadRecordFile with the first bad file's line."""
    raise BadRecordFile(check.problems[0].line() + SKIP_HINT)


def stop_if_bad(check: Optional[FileCheck], ds: DatasetConfig) -> None:
    """Between steps: raises BadRecordFile once the check has found a bad
    file, unless bad records are skipped. Costs a list lookup."""
    if check is not None and check.problems and not ds.skip_bad_records:
        raise_first(check)


def finish(check: Optional[FileCheck], ds: DatasetConfig) -> None:
    """Waits for the check (a line every 5 s while it runs), then raises
    BadRecordFile (strict) or logs each bad file as skipped and the count."""
    if check is None:
        return
    problems = check.wait(progress=logging.info)
    if problems and not ds.skip_bad_records:
        raise_first(check)
    warn_counts(check)
    if not problems:
        empty = check.sizes.count(0)
        logging.info("%s%s record file(s) checked: every one is whole%s",
                     f"{check.key}: " if check.key else "", len(check.files),
                     f" ({empty} of them empty, 0 bytes)" if empty else "")
        return
    for problem in problems:
        logging.warning("%s; skipped (skip_bad_records: true)",
                        problem.line())
    logging.warning("official_bench: %d of %d record file(s) truncated or "
                    "corrupt in %s; their records after the damage were not "
                    "read", len(problems), len(check.files), ds.split)
