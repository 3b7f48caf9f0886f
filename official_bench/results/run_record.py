"""The per-run result JSON the trainer writes into model_dir.

Schema "official_bench.result/1": {"schema", "config", "stats",
"environment", "history", "evaluation"}; the extractor reads it when it sits
next to a run's log. Written atomically: a reader never sees half a file.
Its name in model_dir is contracts/log_tree.result_file_name's.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict

from official_bench.results.atomic import write_text_atomic

SCHEMA = "official_bench.result/1"


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
    write_text_atomic(path, json.dumps(_jsonable(record), indent=2) + "\n")
    return path
