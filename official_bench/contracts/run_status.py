"""The launcher's status record beside each run's log, and what the
extractor makes of it.

A log can hold every TimeHistory interval of a run that still failed (a
trainer SIGKILLed at its last step, a result that was never written); only
the launcher saw the exit. It writes `<log>.status.json` atomically when the
run ends; the extractor excludes any run whose record is not "ok". Logs with
no record (DLPerf's own trees, runs started by hand) keep the log rules.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any, Dict, Optional, Tuple

from official_bench.contracts import exit_status
from official_bench.contracts.log_tree import status_path
from official_bench.host.atomic import write_text_atomic

SCHEMA = "official_bench.run_status/1"


def signal_name(rc: Optional[int]) -> Optional[str]:
    """The signal behind an exit status: -N (Popen) or 128+N (shells)."""
    num = exit_status.signal_number(rc)
    try:
        return signal.Signals(num).name if num else None
    except ValueError:
        return None


def write_status(log_path: str, *, status: str, rc: Optional[int],
                 reason: str, started: float, ended: float, node: int,
                 host: str, worker: str = "") -> str:
    record = {"schema": SCHEMA, "status": status, "exit": rc,
              "signal": signal_name(rc), "reason": reason,
              "started": started, "ended": ended, "node": node,
              "host": host, "worker": worker}
    path = status_path(log_path)
    write_text_atomic(path, json.dumps(record, indent=2) + "\n")
    return path


def load_status(log_path: str) -> Tuple[Optional[Dict[str, Any]],
                                        Optional[str]]:
    """(record, None), (None, None) without a file, (None, warning) when the
    file cannot be read."""
    path = status_path(log_path)
    if not os.path.exists(path):
        return None, None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict) or "status" not in data:
            raise ValueError("no 'status' key")
        return data, None
    except (OSError, ValueError) as e:
        return None, f"{path}: unusable status record ({e})"


def exclusion(record: Optional[Dict[str, Any]]) -> Optional[str]:
    """Why the extractor must not count this run, or None."""
    if record is None or record.get("status") == "ok":
        return None
    rc = record.get("exit")
    sig = record.get("signal")
    how = f"exit {rc}" + (f", {sig}" if sig else "")
    reason = record.get("reason") or ""
    return (f"the launcher saw this run {record.get('status')} ({how})"
            + (f": {reason}" if reason else ""))
