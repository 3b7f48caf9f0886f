"""Keras 3 on JAX: the one place the JAX backend imports them.

JAX fixes its platform and, on CPUs, its device count when it first
initialises, and Keras picks its backend when first imported; so this
module sets both first (`load`), from the config: the CPU platform when
runtime.num_gpus is 0 (as the TensorFlow backend trains on CPU then, even
where a GPU exists), `runtime.cpu_devices` host devices for mirrored on
CPUs, the first num_gpus GPUs otherwise. A process whose Keras 3 already
runs another backend cannot switch: that is one clear error.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

from official_bench.config.errors import ConfigError
from official_bench.jax_backend import xla_options

CPU_DEVICES_FLAG = "--xla_force_host_platform_device_count"


class BackendError(ConfigError):
    """Keras 3 or JAX cannot be set up as the config asks (the CLI's one
    error line and exit status for a bad setting, as for the TensorFlow
    backend's GPU-count mismatch)."""


@dataclasses.dataclass
class Loaded:
    """The imported modules and where they were told to run."""
    keras: Any
    jax: Any
    platform: str  # "cpu" or "gpu"


def missing_modules() -> Dict[str, str]:
    """import name -> pip package, for what the JAX backend lacks here."""
    need = {"jax": "jax", "keras": "keras"}
    return {m: p for m, p in need.items()
            if importlib.util.find_spec(m) is None}


def load(num_gpus: int, local_devices: int = 1,
         environ: Optional[Dict[str, str]] = None,
         xla_flags: Sequence[str] = ()) -> Loaded:
    """Imports JAX and Keras 3 set up to use `local_devices` devices of
    this process: GPUs when `num_gpus` > 0 (the first ones, as numbered
    under CUDA_VISIBLE_DEVICES), else host devices; `xla_flags`
    (runtime.xla_flags) in XLA_FLAGS, checked (xla_options.py)."""
    environ = os.environ if environ is None else environ
    missing = missing_modules()
    if missing:
        raise BackendError(
            "runtime.backend jax needs " + ", ".join(
                f"{m} (pip {p})" for m, p in missing.items())
            + ": pip install -e '.[jax]' (JAX's CUDA wheels on GPUs: "
            "docs/backends.md)")
    _check_keras_backend(environ)
    environ["KERAS_BACKEND"] = "jax"
    if num_gpus == 0 and local_devices > 1:
        _set_cpu_device_count(environ, local_devices)
    import jax
    platform = "gpu" if num_gpus > 0 else "cpu"
    xla_options.apply(environ, xla_flags, _backend_started(jax))
    if not _backend_started(jax):
        jax.config.update("jax_platforms", "cuda" if num_gpus > 0 else "cpu")
        if num_gpus > 0:
            _only_gpus(jax, local_devices)
    import keras
    if keras.backend.backend() != "jax":
        raise BackendError(
            f"Keras 3 in this process runs the {keras.backend.backend()!r} "
            "backend; runtime.backend jax needs a fresh process")
    return Loaded(keras=keras, jax=jax, platform=platform)


def _check_keras_backend(environ) -> None:
    """Keras 3 imported before us keeps its backend: say so, not train on
    another one."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend") and \
            keras.backend.backend() != "jax":
        raise BackendError(
            f"Keras 3 was already imported with the "
            f"{keras.backend.backend()!r} backend in this process; "
            "runtime.backend jax needs a fresh process (or KERAS_BACKEND=jax "
            "before anything imports keras)")
    chosen = environ.get("KERAS_BACKEND")
    if chosen and chosen != "jax" and keras is not None:
        raise BackendError(f"KERAS_BACKEND is {chosen!r} in this process; "
                           "runtime.backend jax needs 'jax'")


def _set_cpu_device_count(environ, count: int) -> None:
    """XLA_FLAGS asks the CPU platform for `count` devices (before JAX's
    first use; a flag already there wins, and is checked later)."""
    flags = environ.get("XLA_FLAGS", "")
    if CPU_DEVICES_FLAG not in flags:
        environ["XLA_FLAGS"] = (flags + f" {CPU_DEVICES_FLAG}={count}").strip()


def _only_gpus(jax, count: int) -> None:
    """Opens only the first `count` GPUs: JAX reserves memory on each one
    it opens. A JAX without the option opens all (said once)."""
    try:
        jax.config.update("jax_cuda_visible_devices",
                          ",".join(str(i) for i in range(count)))
    except (AttributeError, KeyError, ValueError) as e:
        from absl import logging
        logging.info("official_bench: JAX opens every visible GPU "
                     "(jax_cuda_visible_devices: %s)", e)


def _backend_started(jax) -> bool:
    """Whether JAX already initialised its backends in this process (the
    platform can no longer change)."""
    try:
        from jax._src import xla_bridge
        return bool(getattr(xla_bridge, "_backends", None))
    except ImportError:  # a JAX without that module: assume not started
        return False


class _NoTensorFlow:
    """An import finder that answers 'not installed' for TensorFlow."""

    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def set_seed(keras, seed: int) -> None:
    """keras.utils.set_random_seed without loading TensorFlow: Keras 3 also
    seeds TensorFlow when it can import it, which on this path would load
    a second framework (and its CUDA libraries) for nothing."""
    if "tensorflow" in sys.modules:
        keras.utils.set_random_seed(seed)
        return
    blocker = _NoTensorFlow()
    sys.meta_path.insert(0, blocker)
    try:
        keras.utils.set_random_seed(seed)
    finally:
        sys.meta_path.remove(blocker)


def xla_flags_in_effect(environ: Optional[Dict[str, str]] = None
                        ) -> List[str]:
    """The XLA_FLAGS JAX started with in this process (result.json)."""
    environ = os.environ if environ is None else environ
    return xla_options.split(environ.get(xla_options.VARIABLE))


def versions(loaded: Loaded) -> Dict[str, Optional[str]]:
    """keras, jax and jaxlib versions for result.json."""
    jaxlib = sys.modules.get("jaxlib")
    return {"keras": loaded.keras.__version__,
            "jax": loaded.jax.__version__,
            "jaxlib": getattr(jaxlib, "__version__", None)}
