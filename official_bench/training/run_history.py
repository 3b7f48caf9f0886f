"""The trainer's one write to the run history (contracts/history_db.py).

After the timed loop and result.json, the chief (Horovod rank 0, the
multi-worker chief, the one process of a single-node run) appends its run;
other processes write nothing, so a run is one row however many workers it
had. TensorFlow-free on purpose (it runs after TensorFlow's part is done):
the row comes from the same dict that went into result.json.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, Optional

from absl import logging

from official_bench.config import ExperimentConfig
from official_bench.contracts import history_db, history_row
from official_bench.host import write_errors


class HistoryWriteError(RuntimeError):
    """The history file is not one this run may write to; ``str()`` is the
    line, starting "official_bench:"."""


def history_path(cfg: ExperimentConfig) -> Optional[str]:
    """The file this run's row goes to; None when the history is off or
    there is no model_dir to put it beside."""
    if not cfg.history.enabled:
        return None
    return cfg.history.path or history_db.default_path(cfg.model_dir)


def _plain(value: Any) -> Any:
    """numpy scalars in the in-memory record as plain numbers."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def record_run(cfg: ExperimentConfig, record: Optional[Dict[str, Any]],
               is_chief: bool) -> Optional[str]:
    """Append the run to the history and say where, once ("history:
    PATH"), with one line more when the write migrated the file's format
    (history_db.migration_note); returns the file, or None when nothing
    was written (history off, not the chief, no result, a run too short
    for the window).
    :class:`HistoryWriteError` (one error line from the CLI) for a file
    that is not a sound history, which is left untouched;
    write_errors.NotWritable for a full disk, a read-only file or folder."""
    path = history_path(cfg)
    if path is None or not is_chief or not record:
        return None
    start = time.perf_counter()
    data = json.loads(json.dumps(record, default=_plain))
    # The absolute model_dir: the row's tree (history_db.Row.tree).
    row = history_row.row_from_result(
        data, "trainer", os.path.abspath(cfg.model_dir) if cfg.model_dir
        else "")
    if row is None:
        logging.info("official_bench: history: %s (nothing appended: no "
                     "counted interval)", path)
        return None
    try:
        with write_errors.writing(path, "the run history"):
            history_db.append(path, [row], on_migrate=lambda line:
                              logging.warning("official_bench: %s", line))
    except history_db.HistoryError as e:
        raise HistoryWriteError(f"official_bench: {e}") from None
    logging.info("official_bench: history: %s (run appended, %.0f ms)",
                 path, (time.perf_counter() - start) * 1e3)
    return path
