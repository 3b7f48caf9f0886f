"""Which backend a run trained on, for the readers that keep the two apart
(the run history's cases, official-bench-compare's sides).

The run's own record says it first: result.json's ``config.runtime.backend``
(in every result.json the trainer writes), then ``environment.backend``. A
log without its result.json is placed by its tree
(``{LOG_DIR}/{backend}/resnet50/bz{B}/...``, contracts/log_tree.py; the
model_dirs too). A run none of these name is TensorFlow's: the runs made
before the JAX backend existed.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from official_bench.contracts import log_tree

DEFAULT = "tensorflow"
_BY_DIR = {folder: name for name, folder in log_tree.BACKEND_DIRS.items()}


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def of_record(config: Optional[Mapping[str, Any]],
              environment: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The backend a result.json's config (or its environment) names; None
    when neither does."""
    runtime = config.get("runtime") if isinstance(config, Mapping) else None
    named = _text(runtime.get("backend")) if isinstance(
        runtime, Mapping) else None
    if named is None and isinstance(environment, Mapping):
        named = _text(environment.get("backend"))
    return named


def of_path(path: Optional[str]) -> Optional[str]:
    """The backend a log's or model_dir's place in the tree names (the
    folder above ``resnet50/bz{B}``, the deepest such), or None."""
    if not path:
        return None
    parts = os.path.normpath(path).split(os.sep)
    model = log_tree.FRAMEWORK_DIRS[-1]
    found = None
    for i in range(len(parts) - 2):
        if parts[i] in _BY_DIR and parts[i + 1] == model and \
                log_tree.BATCH_DIR.parse(parts[i + 2]) is not None:
            found = _BY_DIR[parts[i]]
    return found


def backend(config: Optional[Mapping[str, Any]] = None,
            environment: Optional[Mapping[str, Any]] = None,
            path: Optional[str] = None) -> str:
    """The run's backend: its record's, else its tree's, else DEFAULT."""
    return of_record(config, environment) or of_path(path) or DEFAULT
