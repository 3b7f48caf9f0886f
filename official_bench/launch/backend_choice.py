"""The sweep's backend (runtime.backend), decided once, before the plan.

The trainer follows its config: the config file, then --params_override
(config/layering.py). The launcher reads the same layers, CONFIG_FILE's
runtime.backend and PARAMS_OVERRIDE's, with BACKEND as one more layer on
top where it is set, and decides one `Backend`: the log tree
(logs/{backend}/...), the interpreter check (preflight.py), the knobs a
backend refuses and the trainer's --params_override (which then names it,
so the trainer cannot pick another) all use that answer. BACKEND that
disagrees with a backend the config or PARAMS_OVERRIDE names is a
contradiction: one line, exit CONFIG, before anything starts.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Tuple

from official_bench.config import dotted_keys
from official_bench.config.backends import TRAITS
from official_bench.launch.errors import PlanError
from official_bench.launch.settings import Settings

KEY = "runtime.backend"
DEFAULT = "tensorflow"


@dataclasses.dataclass(frozen=True)
class Backend:
    """The backend every run of the sweep uses and where that came from:
    BACKEND (`knob`: 'BACKEND=jax (env BACKEND)'), the layer of the config
    that named it last (`layer`: PARAMS_OVERRIDE or the config file's
    path), or neither (the default)."""
    name: str
    knob: str = ""
    layer: str = ""

    @property
    def named(self) -> str:
        """How a refusal names it: 'BACKEND=jax', or 'runtime.backend jax
        (PARAMS_OVERRIDE)'."""
        if self.layer and not self.knob:
            return f"{KEY} {self.name} ({self.layer})"
        return f"BACKEND={self.name}"

    def ask(self, name: str) -> str:
        """How a refusal says to choose backend `name` instead: where this
        one was chosen (BACKEND=..., or runtime.backend ... in the
        config)."""
        if self.layer and not self.knob:
            return f"{KEY} {name}"
        return f"BACKEND={name}"


def config_layers(config_file: str, yaml_tree: Dict[str, Any],
                  user: Dict[str, Any]) -> List[Tuple[str, Any]]:
    """(layer, value) of each layer the trainer reads that names
    runtime.backend, in the trainer's order (the last one wins)."""
    layers = [(config_file, dotted_keys.get(yaml_tree, KEY)),
              ("PARAMS_OVERRIDE", dotted_keys.get(user, KEY))]
    return [(layer, value) for layer, value in layers if value is not None]


def decide(settings: Settings, config_file: str, yaml_tree: Dict[str, Any],
           user: Dict[str, Any]) -> Backend:
    """The one backend of the sweep: BACKEND where it is set, else what
    the config's layers name last, else the default. PlanError when a
    layer names a backend the trainer does not have, or when BACKEND
    contradicts the config."""
    named = config_layers(config_file, yaml_tree, user)
    for layer, value in named:
        if value not in TRAITS:
            raise PlanError(f"{KEY} {value!r} ({layer}) is not a backend; "
                            f"valid: {', '.join(TRAITS)}")
    layer, value = named[-1] if named else ("", None)
    if settings.source("backend") == "default":
        return Backend(value or DEFAULT, layer=layer)
    knob = settings.describe("backend").replace("'", "")
    if value is not None and value != settings.backend:
        raise PlanError(
            f"{knob} contradicts {KEY} {value} ({layer}): the trainer "
            f"follows the config and would run {value}; set one of them, "
            "or the same backend in both")
    return Backend(settings.backend, knob=knob, layer=layer)
