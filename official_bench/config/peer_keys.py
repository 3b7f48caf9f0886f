"""Keys as peer tools write them, and what they are here.

Model Garden's YAMLs (r2.3 and its neighbours) reach this trainer; what
they write differently is answered from the tables below, the one home of
that knowledge, read by the builder (config/builder.py). Data and lookups
only; TensorFlow-free.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

# train.metrics as Model Garden writes it, a list of names (its
# classifier_trainer's metric table) -> our MetricsConfig field.
METRIC_NAMES = {"acc": "accuracy", "accuracy": "accuracy",
                "top_1": "accuracy", "top_5": "top_5"}


def metrics_from_list(names: List[Any]) -> Tuple[Dict[str, bool], List[Any]]:
    """Model Garden's `train.metrics: [accuracy, top_5]`: our mapping (each
    named metric on, the others off) and the names it does not know."""
    wanted = {METRIC_NAMES.get(n) if isinstance(n, str) else None
              for n in names}
    unknown = [n for n in names
               if not isinstance(n, str) or n not in METRIC_NAMES]
    return ({field: field in wanted for field in sorted(
        set(METRIC_NAMES.values()))}, unknown)


def metrics_list_error(unknown: List[Any]) -> str:
    """The error for train.metrics names Model Garden does not have."""
    return (f"unknown metric name(s) {', '.join(map(repr, unknown))}; valid: "
            f"{', '.join(METRIC_NAMES)} (a list, as Model Garden writes it), "
            "or a mapping {accuracy: bool, top_5: bool}")

