"""A validated config is frozen: checked once, it cannot change afterwards.

The config dataclasses (config/schema.py) share `ConfigNode`: mutable
while config/builder.py fills them and config/validate.py fills the
derived values, frozen by `freeze` at the end of config/layering
.build_config. A later attribute write on the config or any config inside
it raises FrozenConfigError naming the key. Code that derives new values
(the replicas of a run, a one-device copy) makes a new config with
`replace_keys` (frozen again) or `dataclasses.replace`; the parts it does
not change are shared, which is safe because they are frozen too. Lists
inside a config are not frozen.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, Mapping, Optional, TypeVar

from official_bench.config import dotted_keys

# The instance attribute holding a frozen node's key path ("" for the whole
# config, "train_dataset." for a dataset); absent while it is mutable.
_FROZEN_AT = "_frozen_at"
# ... and on a whole config, the dotted keys whose values were derived from
# others (config/validate.fill_derived), not set by a layer.
_DERIVED = "_derived_keys"
# ... and the layer that set a key, for the keys whose source a check needs
# (model_dir: a config file's, config/paths.check_model_dir_free).
_SOURCES = "_key_sources"

T = TypeVar("T")


class FrozenConfigError(dataclasses.FrozenInstanceError):
    """An attribute write on a validated (frozen) config."""


class ConfigNode:
    """Base of the config dataclasses: attribute writes raise once the
    config is frozen (`freeze`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        _refuse_if_frozen(self, name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        _refuse_if_frozen(self, name)
        object.__delattr__(self, name)


def _refuse_if_frozen(node: Any, name: str) -> None:
    prefix = node.__dict__.get(_FROZEN_AT)
    if prefix is not None:
        raise FrozenConfigError(
            f"config is frozen after validation: {prefix}{name}; use "
            "config.replace_keys or dataclasses.replace for a copy with new "
            "values")


def is_frozen(node: Any) -> bool:
    return _FROZEN_AT in node.__dict__


def freeze(node: T, prefix: str = "") -> T:
    """Freezes `node` and every config inside it; returns `node`."""
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, ConfigNode):
            freeze(value, f"{prefix}{f.name}.")
    object.__setattr__(node, _FROZEN_AT, prefix)
    return node


def mark_derived(cfg: Any, keys: Iterable[str]) -> None:
    """Records that `keys` of a whole config were derived, for `settings`."""
    object.__setattr__(cfg, _DERIVED, frozenset(keys))


def mark_sources(cfg: Any, sources: Mapping[str, str]) -> None:
    """Records which layer set each of `sources`' keys (key -> source)."""
    object.__setattr__(cfg, _SOURCES, dict(sources))


def key_source(cfg: Any, key: str) -> Optional[str]:
    """The layer that set `key` of a config fresh from load_config (as
    errors name it: "file params.yaml", "--params_override ..."); None
    where no layer set it, or for a copy made afterwards."""
    return cfg.__dict__.get(_SOURCES, {}).get(key)


def settings(cfg: Any) -> Dict[str, Any]:
    """A config as a nested dict, its derived values null: given back as a
    layer (load_config(cfg, params_override=...)), they follow the layers
    over it again instead of keeping the values they had."""
    tree = cfg.as_dict()
    for key in cfg.__dict__.get(_DERIVED, ()):
        dotted_keys.put(tree, key, None)
    return tree


def replace_keys(node: T, values: Mapping[str, Any]) -> T:
    """A copy of `node` with the dotted keys set ("train_dataset.num_devices":
    8), frozen if `node` was; `node` is unchanged and the configs on no
    key's path are shared with it."""
    changes: Dict[str, Any] = {}
    nested: Dict[str, Dict[str, Any]] = {}
    for key, value in values.items():
        head, dot, rest = key.partition(".")
        if dot:
            nested.setdefault(head, {})[rest] = value
        else:
            changes[head] = value
    both = set(changes) & set(nested)
    if both:
        raise ValueError(f"replace_keys: {sorted(both)[0]} is set and so is "
                         "a key below it")
    for head, below in nested.items():
        changes[head] = replace_keys(getattr(node, head), below)
    copy = dataclasses.replace(node, **changes)
    if is_frozen(node):
        freeze(copy, node.__dict__[_FROZEN_AT])
    if _DERIVED in node.__dict__:  # a key set here is no longer derived
        mark_derived(copy, {k for k in node.__dict__[_DERIVED] if not any(
            k == v or k.startswith(v + ".") for v in values)})
    return copy
