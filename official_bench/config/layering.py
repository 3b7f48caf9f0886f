"""The one layering function: defaults -> config -> params_override(s) ->
overrides, typed and checked.

The CLI (config/flags.config_from_flags), the API (trainer.run) and
the launcher's plan all build their config through `load_config`, so a
layer means the same everywhere and an error names the same sources.
"""

from __future__ import annotations

import os
from typing import Any, List, Mapping, Optional, Sequence, Union

from official_bench.config import frozen, loading, ranges, validate
from official_bench.config.builder import Layer, LayerBuilder
from official_bench.config.schema import (
    ConfigError,
    ExperimentConfig,
    base_config,
)

# A config: a YAML path, a nested mapping, or an ExperimentConfig.
ConfigLike = Union[None, str, os.PathLike, Mapping[str, Any],
                   ExperimentConfig]
# What --params_override takes (a YAML/JSON string, `a.b=1,c=2`, a YAML
# file path) or a mapping, or a list of those applied in order.
OverrideLike = Union[None, str, os.PathLike, Mapping[str, Any],
                     Sequence[Union[str, os.PathLike, Mapping[str, Any]]]]


def layers_of(config: ConfigLike = None,
              params_override: OverrideLike = None,
              overrides: Optional[Mapping[str, Any]] = None,
              overrides_from: str = "flags",
              defaults: Optional[Mapping[str, Any]] = None) -> List[Layer]:
    """The (source, mapping) layers, in order, that `build_config` merges
    over the defaults; each source is how an error will name that layer.

    `overrides_from` names the last layer: "flags" for the CLI, the API's
    keyword arguments for trainer.run; any other than "flags" also names
    params_override without the CLI's "--". `defaults`: an entry point's own
    defaults (the CLI's model_dir/run-<stamp>), the first layer, so the
    config file and every later layer win over them.
    """
    layers: List[Layer] = []
    if defaults:
        layers.append(("the entry point's defaults", defaults))
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        if path:  # an empty --config_file= names no file
            layers.append((f"file {path}", loading.read_yaml_file(path)))
    elif isinstance(config, ExperimentConfig):
        layers.append(("ExperimentConfig", frozen.settings(config)))
    elif isinstance(config, Mapping):
        layers.append(("config dict", config))
    elif config is not None:
        raise ConfigError(f"config: expected a YAML path, a mapping or an "
                          f"ExperimentConfig, got {type(config).__name__}")
    if params_override is not None:
        items = (params_override if isinstance(params_override, (list, tuple))
                 else [params_override])
        name = _flag("params_override", overrides_from)
        layers += [_override_layer(item, name) for item in items
                   if item is not None]
    if overrides:
        layers.append((overrides_from, overrides))
    return layers


def _flag(key: str, overrides_from: str) -> str:
    """How errors name an argument: the CLI's flag, or the API's keyword."""
    return f"--{key}" if overrides_from == "flags" else key


def _override_layer(item: Any, name: str) -> Layer:
    """One params_override: a mapping, or what --params_override takes;
    `name` is how errors name the argument."""
    if isinstance(item, Mapping):
        return ("params_override dict", item)
    if not isinstance(item, (str, os.PathLike)):
        raise ConfigError(f"params_override: expected a string, a path or a "
                          f"mapping (or a list of those), got "
                          f"{type(item).__name__} {item!r}")
    text = os.fspath(item)
    return (f"{name} {loading.describe(text)}",
            loading.parse_params_override(text, name))


def build_config(layers: Sequence[Layer], model_type: str = "resnet",
                 dataset: str = "imagenet",
                 overrides_from: str = "flags") -> ExperimentConfig:
    """Merges (source, mapping) layers over the defaults; strict.
    `overrides_from`: as layers_of's (how model_type and dataset are named).

    Raises one ConfigError listing every problem, each with its key path and
    the layer it came from. The config returned is frozen (config/frozen.py):
    a derived value makes a new one with config.replace_keys.
    """
    b = LayerBuilder(valid=ranges.valid_values)
    tree = base_config(model_type, dataset,
                       flag=_flag("", overrides_from))
    for source, layer in layers:
        if layer is None:
            continue
        if not isinstance(layer, Mapping):
            raise ConfigError(f"{source}: expected a mapping, got "
                              f"{type(layer).__name__}")
        loading.check_layer_shape(layer, source)
        b.merge(tree, layer, source, ExperimentConfig)
    cfg = b.build(ExperimentConfig, tree)
    if not b.errors:
        validate.validate(cfg, b)
    if b.errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(b.errors))
    frozen.mark_derived(cfg, validate.fill_derived(cfg))
    frozen.mark_sources(cfg, _sources(layers, ("model_dir",)))
    return frozen.freeze(cfg)


def _sources(layers: Sequence[Layer], keys: Sequence[str]) -> dict:
    """key -> the last layer that sets that top-level key to a value."""
    found = {}
    for source, layer in layers:
        for key in keys:
            if isinstance(layer, Mapping) and layer.get(key) is not None:
                found[key] = source
    return found


def load_config(config_file: ConfigLike = None,
                params_override: OverrideLike = None,
                overrides: Optional[Mapping[str, Any]] = None,
                model_type: str = "resnet",
                dataset: str = "imagenet",
                overrides_from: str = "flags",
                defaults: Optional[Mapping[str, Any]] = None
                ) -> ExperimentConfig:
    """defaults (built in, then `defaults`) -> config file ->
    params_override(s) -> overrides (flags).

    `config_file` is a YAML path (r2.3's --config_file), or, from the API, a
    mapping or an ExperimentConfig. `params_override` takes what
    --params_override takes (a YAML/JSON string, `a.b=1,c=2`, a YAML file
    path) or a dict, or a list of those.
    """
    return build_config(
        layers_of(config_file, params_override, overrides, overrides_from,
                  defaults),
        model_type=model_type, dataset=dataset,
        overrides_from=overrides_from)
