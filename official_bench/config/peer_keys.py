"""Keys as peer tools write or place them, and what they are here.

Model Garden's YAMLs (r2.3 and its neighbours) reach this trainer; what
they write or place differently is answered from the tables below, the
one home of that knowledge, read by the builder (config/builder.py): an
unknown key names ours, train.metrics takes its list form. Data and
lookups only; TensorFlow-free.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

# train.metrics as Model Garden writes it, a list of names (its
# classifier_trainer's metric table) -> our MetricsConfig field.
METRIC_NAMES = {"acc": "accuracy", "accuracy": "accuracy",
                "top_1": "accuracy", "top_5": "top_5"}

# A key where a peer's YAML places or names it -> the key it is here.
KEYS = {
    "runtime.model_dir": "model_dir",  # Model Garden's examples YAML
    "runtime.mode": "mode",
    "model.model_name": "model.name",  # the same YAML; r2.3 says name
}



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


def key_hint(path: str) -> Optional[str]:
    """For a key a peer places or names differently (KEYS), the error that
    names ours; None for any other key."""
    ours = KEYS.get(path)
    if ours is None:
        return None
    section, _, leaf = ours.rpartition(".")
    if path.rpartition(".")[0] == section:
        return (f"unknown key; did you mean {leaf!r}? ({ours}, as in Model "
                "Garden r2.3)")
    where = f"in section {section}" if section else "a top-level key"
    return (f"unknown key here; {ours} is {where} (not under "
            f"{path.rpartition('.')[0]})")

