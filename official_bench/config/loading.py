"""Reading config layers: YAML files and --params_override text.

Each reader returns a plain nested mapping (one layer) or raises a
ConfigError naming the input; typing and checking the layers is
config/builder.py's and config/validate.py's job. Limits on a layer's shape
keep hostile YAML (deep nesting, alias cycles, "billion laughs") from
ending in a RecursionError or exhausting memory.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping

import yaml

from official_bench.config import dotted_keys
from official_bench.config.schema import ConfigError

# Mappings and lists inside one layer: the config itself is 4 levels deep,
# so 32 is never needed; deeper (or self-referring) values would end the
# merge and the error messages, which walk values recursively, in a
# RecursionError. MAX_LAYER_VALUES bounds the walk over YAML aliases that
# share one value many times ("billion laughs").
MAX_NESTING = 32
MAX_LAYER_VALUES = 100_000


def _safe_load(stream: Any, what: str) -> Any:
    """yaml.safe_load, refusing a key given twice in one mapping (YAML would
    keep the last silently: _check_unique_keys); nesting too deep for
    PyYAML's recursive reader is a ConfigError naming `what` (other YAML
    errors are left to the caller, whose message says which input it
    was)."""
    loader = yaml.SafeLoader(stream)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_unique_keys(loader, node, what)
        return loader.construct_document(node)
    except RecursionError:
        raise ConfigError(f"{what} nests mappings or lists too deeply to "
                          f"read (no key takes more than {MAX_NESTING} "
                          "levels)") from None
    finally:
        loader.dispose()


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _check_unique_keys(loader: yaml.SafeLoader, root: yaml.Node,
                       what: str) -> None:
    """ConfigError naming `what`, the key and both lines when a mapping
    gives one key twice (as YAML reads it: `yes` and `true` are one key).
    Keys a `<<` merge brings in may be overridden: that is what it is for.
    Iterative, each node once (aliases share nodes, may form cycles)."""
    stack: List[Any] = [(root, "")]
    seen = set()
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node.value))
        if not isinstance(node, yaml.MappingNode):
            continue
        lines: Dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                stack.append((value_node, path))
                continue
            key = loader.construct_object(key_node) \
                if isinstance(key_node, yaml.ScalarNode) else id(key_node)
            name = f"{path}.{key}" if path else str(key)
            line = key_node.start_mark.line + 1
            if key in lines:
                raise ConfigError(f"{what}: key {name!r} is given twice, on "
                                  f"lines {lines[key]} and {line} (YAML "
                                  "would keep the last); remove one")
            lines[key] = line
            stack.append((value_node, name))


def check_layer_shape(layer: Mapping[str, Any], source: str) -> None:
    """Refuses a layer nested more than MAX_NESTING deep, one that contains
    itself (a YAML alias cycle such as `&x {a: *x}`) or one with more than
    MAX_LAYER_VALUES values, naming the key path. Iterative on purpose."""
    stack = [(layer, "", 0, frozenset())]
    seen = 0
    while stack:
        value, path, depth, parents = stack.pop()
        if isinstance(value, Mapping):
            items = [(f"{path}.{k}" if path else str(k), v)
                     for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        where = path or "the top level"
        if id(value) in parents:
            raise ConfigError(f"{source}: {where} contains itself (a YAML "
                              "alias cycle such as `&x {a: *x}`)")
        if depth >= MAX_NESTING:
            raise ConfigError(f"{source}: {where} nests mappings or lists "
                              f"more than {MAX_NESTING} levels deep; no key "
                              "takes that")
        seen += len(items)
        if seen > MAX_LAYER_VALUES:
            raise ConfigError(f"{source}: more than {MAX_LAYER_VALUES} "
                              "values (YAML aliases repeating one value?); "
                              "a config has a few hundred")
        inner = parents | {id(value)}
        stack.extend((v, p, depth + 1, inner) for p, v in items)


def read_yaml_file(path: str, what: str = "config file") -> Dict[str, Any]:
    """Reads a YAML mapping; a missing file or bad YAML names the file as
    `what` (the config file, or a --params_override file)."""
    if os.path.isdir(path):
        raise ConfigError(f"{what} {path!r} is a directory, not a YAML "
                          "file")
    if not os.path.isfile(path):
        raise ConfigError(f"{what} {path!r} does not exist")
    try:
        with open(path, encoding="utf-8") as f:
            data = _safe_load(f, f"{what} {path!r}")
    except yaml.YAMLError as e:
        raise ConfigError(f"{what} {path!r} is not valid YAML: {e}")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what} {path!r} is not UTF-8 text (byte "
                          f"{e.start}: {e.reason})")
    except OSError as e:
        raise ConfigError(f"{what} {path!r} cannot be read: "
                          f"{e.strerror}")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {path!r} must hold a mapping, "
                          f"got {type(data).__name__}")
    return data


def _split_top_level(text: str, sep: str = ",") -> List[str]:
    """Splits on `sep` outside brackets and quotes: `a=[1,2],b=3`."""
    parts, depth, quote, current = [], 0, None, []
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


_DOTTED_ASSIGNMENT = re.compile(r"^\s*[A-Za-z_][\w.]*\s*=")


def parse_params_override(text: str, name: str = "--params_override"
                          ) -> Dict[str, Any]:
    """Parses --params_override: a YAML file, a YAML/JSON string, or
    a.b=1,c=2. `name` is how its errors name it (the API's keyword
    argument is "params_override")."""
    text = text.strip()
    if not text:
        return {}
    if os.path.isfile(text):
        return read_yaml_file(text, f"{name} file")
    if os.path.isdir(text):
        raise ConfigError(f"{name} {text!r} is a folder; give "
                          "a YAML file, a mapping or a.b=value pairs")
    if (text.endswith((".yaml", ".yml")) and "\n" not in text
            and ":" not in text):
        raise ConfigError(f"{name} file {text!r} does not exist")
    if _DOTTED_ASSIGNMENT.match(text):
        tree: Dict[str, Any] = {}
        for item in _split_top_level(text):
            if "=" not in item:
                raise ConfigError(f"{name} item {item!r} is not "
                                  "of the form key.path=value")
            key, raw = item.split("=", 1)
            try:
                value = _safe_load(raw, f"{name} "
                                   f"{key.strip()}") if raw.strip() else None
            except yaml.YAMLError as e:
                raise ConfigError(f"{name} {key.strip()}: cannot "
                                  f"parse value {raw!r}: {e}")
            try:
                dotted_keys.put(tree, key.strip(), value)
            except dotted_keys.TreeError as e:
                raise ConfigError(f"{name}: {e}")
        return tree
    try:
        data = _safe_load(text, name)
    except yaml.YAMLError as e:
        raise ConfigError(f"{name} is not valid YAML/JSON and not "
                          f"a file: {e}")
    if not isinstance(data, dict):
        raise ConfigError(f"{name} must be a mapping, a file or "
                          f"a.b=value pairs; got {text!r}")
    return data


def describe(text: str) -> str:
    """An override string short enough to name its layer in an error."""
    text = text.strip()
    return repr(text if len(text) <= 60 else text[:57] + "...")
