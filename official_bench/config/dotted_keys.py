"""Plain nested dicts addressed by dotted keys
("train.time_history.log_steps").

The CLI flags, the launcher and --params_override all describe a config
layer as such a tree before config/builder.py types it, so they share these
three helpers instead of each walking dicts its own way. TensorFlow-free:
the launcher imports it.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Mapping


class TreeError(ValueError):
    """A dotted key runs through a value that is not a mapping."""


def get(tree: Mapping[str, Any], dotted: str) -> Any:
    """The value at `dotted`, or None where any part is missing."""
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def put(tree: Dict[str, Any], dotted: str, value: Any) -> None:
    """Sets `dotted` to `value`, making the parent mappings it needs."""
    *parents, leaf = dotted.split(".")
    node = tree
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise TreeError(f"{dotted!r} is set below {part!r}, which holds "
                            f"a {type(node).__name__}, not a mapping")
    node[leaf] = value


def deep_merge(base: Mapping[str, Any],
               top: Mapping[str, Any]) -> Dict[str, Any]:
    """A new tree: `top` over `base`, mappings merged key by key."""
    out = copy.deepcopy(dict(base))
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
