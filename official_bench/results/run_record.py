"""The per-run result JSON the trainer writes into model_dir.

Schema "official_bench.result/1": {"schema", "config", "stats",
"environment", "history", "evaluation"}; the extractor reads it when it sits
next to a run's log. Written atomically: a reader never sees half a file.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any, Dict

SCHEMA = "official_bench.result/1"


def atomic_write_text(path: str, text: str) -> None:
    """Writes to a temporary file in the same directory, then renames."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _jsonable(value: Any) -> Any:
    """NaN/inf become null: strict JSON readers reject them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _jsonable(value.item())
    return value


def write_run_record(path: str, record: Dict[str, Any]) -> str:
    record = dict(record, schema=SCHEMA)
    atomic_write_text(path, json.dumps(_jsonable(record), indent=2) + "\n")
    return path
