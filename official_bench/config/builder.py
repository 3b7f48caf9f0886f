"""Merging config layers into the typed config, each leaf remembering
which layer set it.

The defaults come first, then each (source, mapping) layer; a key the
schema lacks, a value of the wrong type or shape is recorded as an error
naming the key path and the layer ("... (from --params_override ...)"),
so config/validate.py can add its own and everything is reported at once.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import re
import typing
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from official_bench.config import peer_keys

# The source named for a leaf no layer set.
DEFAULTS = "defaults"

Layer = Tuple[str, Mapping[str, Any]]


def _unknown_key(key: Any, path: str, fields: Mapping[str, Any]) -> str:
    """The error for a key the schema lacks; a key a peer tool places or
    names otherwise gets ours (config/peer_keys.py), a dotted key whose
    head is a field ({'train.steps': 3}) the nesting it needs."""
    head, _, rest = str(key).partition(".")
    peer = peer_keys.key_hint(path)
    if peer:
        return peer
    if rest and head in fields:
        return (f"unknown key: a dotted key inside a mapping is not split; "
                f"nest it as {head}: {{{rest}: ...}}, or give '{path}=...' "
                f"as a params_override string")
    close = difflib.get_close_matches(str(key), list(fields), n=1)
    nearest = f"did you mean {close[0]!r}? " if close else ""
    return (f"unknown key; {nearest}valid keys here: "
            f"{', '.join(sorted(fields))}")


class LayerBuilder:
    """Merges layers into a typed config, remembering each leaf's source."""

    def __init__(self, valid: Callable[[str], Optional[str]] = lambda path:
                 None) -> None:
        """`valid(path)`: the values a key takes, added to its type error
        (None: the type says it all)."""
        self.sources: Dict[str, str] = {}
        self.errors: List[str] = []
        self.valid = valid

    def error(self, path: str, message: str) -> None:
        source = self.sources.get(path, DEFAULTS)
        self.errors.append(f"{path}: {message} (from {source})")

    def merge(self, tree: Dict[str, Any], layer: Mapping[str, Any],
              source: str, cls: type, prefix: str = "") -> None:
        """Applies one layer onto `tree`, rejecting keys `cls` lacks."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        hints = _type_hints(cls)
        for key, value in layer.items():
            path = f"{prefix}{key}"
            if key not in fields:
                self.sources[path] = source
                self.error(path, _unknown_key(key, path, fields))
                continue
            sub = dataclass_of(hints[key])
            if path == "train.metrics" and isinstance(value, list):
                value = self._metrics_list(path, value, source)
            if sub is not None and isinstance(value, Mapping):
                if not isinstance(tree.get(key), dict):
                    tree[key] = dataclasses.asdict(sub())
                self.merge(tree[key], value, source, sub, path + ".")
            else:
                tree[key] = copy.deepcopy(value)
                self._mark(path, value, source)

    def _metrics_list(self, path: str, names: list, source: str
                      ) -> Mapping[str, bool]:
        """train.metrics as Model Garden's list of names (peer_keys)."""
        mapping, unknown = peer_keys.metrics_from_list(names)
        if unknown:
            self.sources[path] = source
            self.error(path, peer_keys.metrics_list_error(unknown))
        return mapping

    def reported(self, path: str) -> bool:
        """True when `path` already has an error (one message per key)."""
        return any(e.startswith(path + ":") for e in self.errors)

    def _mark(self, path: str, value: Any, source: str) -> None:
        self.sources[path] = source
        if isinstance(value, Mapping):
            for k, v in value.items():
                self._mark(f"{path}.{k}", v, source)

    def build(self, cls: type, tree: Mapping[str, Any], prefix: str = ""):
        """Turns a merged tree into dataclasses, checking every leaf's type."""
        kwargs = {}
        hints = _type_hints(cls)
        for f in dataclasses.fields(cls):
            path = f"{prefix}{f.name}"
            if f.name not in tree:
                continue
            value = tree[f.name]
            sub = dataclass_of(hints[f.name])
            if sub is not None:
                if value is None and _is_optional(hints[f.name]):
                    kwargs[f.name] = None
                elif isinstance(value, Mapping):
                    kwargs[f.name] = self.build(sub, value, path + ".")
                else:
                    listed = " (or a list of names)" if path == \
                        "train.metrics" else ""
                    self.error(path, f"expected a mapping{listed}, got "
                                     f"{type(value).__name__} {value!r}")
                continue
            ok, converted = _coerce(value, hints[f.name])
            if ok:
                kwargs[f.name] = converted
            else:
                takes = self.valid(path)
                self.error(path, f"expected {_type_name(hints[f.name])}, got "
                                 f"{type(value).__name__} {value!r}"
                                 f"{_yaml_bool_hint(value, hints[f.name])}"
                                 f"{'; ' + takes if takes else ''}")
        return cls(**kwargs)


def _yaml_bool_hint(value: Any, tp: Any) -> str:
    """For a word YAML 1.1 read as a boolean where text was expected
    (runtime.distribution_strategy=off arrives as False): how to write it."""
    if not isinstance(value, bool) or _type_name(tp) not in ("str",
                                                             "str or null"):
        return ""
    words = "off, no or false" if value is False else "on, yes or true"
    return (f"; YAML reads an unquoted {words} as a boolean: quote the "
            f"word ('{words.split(',')[0]}')")


# The dataclasses' annotations are strings (postponed evaluation); resolving
# them was three quarters of build_config's time. Callers only read the dict.
_type_hints = functools.lru_cache(maxsize=None)(typing.get_type_hints)


def dataclass_of(tp: Any) -> Optional[type]:
    if dataclasses.is_dataclass(tp):
        return tp
    for arg in typing.get_args(tp):
        if dataclasses.is_dataclass(arg):
            return arg
    return None


def _is_optional(tp: Any) -> bool:
    return type(None) in typing.get_args(tp)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Union:
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin in (list, List):
        (item,) = typing.get_args(tp) or (Any,)
        return f"list of {_type_name(item)}"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


# PyYAML reads YAML 1.1, where a float needs a dot and a signed exponent:
# `1e30`, `1e-3` and `2E+5` arrive as strings. A key typed float takes such
# a string as the number it spells (str keys keep their strings).
_FLOAT_TEXT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _is_float_text(value: Any) -> bool:
    return isinstance(value, str) and bool(_FLOAT_TEXT.match(value.strip()))


def _coerce(value: Any, tp: Any) -> Tuple[bool, Any]:
    """Checks `value` against a type hint; ints are accepted as floats."""
    origin = typing.get_origin(tp)
    if origin is Union:
        if float in typing.get_args(tp) and _is_float_text(value):
            return True, float(value)
        for arg in typing.get_args(tp):
            ok, converted = _coerce(value, arg)
            if ok:
                return True, converted
        return False, None
    if origin in (list, List):
        if not isinstance(value, (list, tuple)):
            return False, None
        (item,) = typing.get_args(tp) or (Any,)
        out = []
        for v in value:
            ok, converted = _coerce(v, item)
            if not ok:
                return False, None
            out.append(converted)
        return True, out
    if tp is Any:
        return True, value
    if tp is type(None):
        return value is None, None
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, float(value)
        if _is_float_text(value):
            return True, float(value)
        return False, None
    if tp is str:
        return isinstance(value, str), value
    return isinstance(value, tp), value
