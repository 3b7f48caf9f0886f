"""What JAX and Keras 3 see, asked in a subprocess (tfprobe.py's twin).

The doctor imports neither: a broken install becomes a FAIL with its
message, and the doctor never opens a GPU its runs then need. The child
asks as the trainer does (official_bench/jax_backend/keras3.py): Keras 3
on the jax backend, and JAX free to open every platform it has, since the
trainer sets JAX's platform and visible GPUs itself and so overrides
JAX_PLATFORMS and JAX_CUDA_VISIBLE_DEVICES (their values are reported).
GPU memory is not preallocated: the probe only lists devices.

    python -m official_bench.doctor.jaxprobe   # prints one JSON line

`parse` turns the child's output into (facts, error); `summary` words the
facts for the jax row.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Callable, Dict, List, Optional, Tuple

from official_bench.contracts import exit_status
from official_bench.doctor import tfprobe

MARK = "official_bench.doctor.jaxprobe:"
# Environment the trainer overrides; the probe reports, then drops them.
OVERRIDDEN = ("JAX_PLATFORMS", "JAX_CUDA_VISIBLE_DEVICES")
# Distributions that give JAX its CUDA backend (jax[cuda12], jax[cuda13]).
PLUGIN_NAME = re.compile(r"^jax[-_]cuda\d+[-_](plugin|pjrt)$", re.I)


def _plugins() -> Dict[str, str]:
    """Installed JAX CUDA plugin distributions: name -> version."""
    from importlib import metadata
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name") or ""
        if PLUGIN_NAME.match(name):
            found[name.lower().replace("_", "-")] = dist.version
    return dict(sorted(found.items()))


def _gpu_error(jax) -> Optional[str]:
    """Why JAX has no GPU backend: the CUDA plugin's initialisation error,
    or JAX's own answer when asked for one; None when it has one."""
    try:
        jax.devices("gpu")
        return None
    except RuntimeError as e:
        asked = str(e)
    try:
        from jax._src import xla_bridge
        errors = dict(getattr(xla_bridge, "_backend_errors", {}) or {})
    except ImportError:  # a JAX without that module
        errors = {}
    return errors.get("cuda") or asked


def collect() -> Dict:
    """JAX's, jaxlib's and Keras' versions and JAX's devices (in the
    child)."""
    seen_env = {k: os.environ.pop(k) for k in OVERRIDDEN if k in os.environ}
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jaxlib
    devices = jax.devices()
    facts: Dict = {
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", None),
        "cuda_plugins": _plugins(),
        "default_backend": jax.default_backend(),
        "devices": [{"id": d.id, "platform": d.platform,
                     "device_kind": d.device_kind} for d in devices],
        "gpu_error": None,
        "environment": seen_env,
    }
    gpus = []
    if jax.default_backend() == "gpu":
        gpu_devices = devices
    else:
        facts["gpu_error"] = _gpu_error(jax)
        gpu_devices = [] if facts["gpu_error"] else jax.devices("gpu")
    for d in gpu_devices:
        gpus.append({"name": f"{d.platform}:{d.id}",
                     "device_name": d.device_kind,
                     "compute_capability": _capability(
                         getattr(d, "compute_capability", None))})
    facts["gpus"] = gpus
    try:
        import keras
        facts["keras"] = keras.__version__
        facts["keras_backend"] = keras.backend.backend()
        facts["keras_error"] = None
    except Exception as e:  # a missing or broken Keras
        facts["keras"] = facts["keras_backend"] = None
        facts["keras_error"] = f"{type(e).__name__}: {e}"
    return facts


def _capability(text) -> Optional[List[int]]:
    """'9.0' -> [9, 0]; None when JAX does not say."""
    try:
        major, minor = str(text).split(".")[:2]
        return [int(major), int(minor)]
    except ValueError:
        return None


def parse(stdout: str, stderr: str, returncode: int
          ) -> Tuple[Optional[Dict], Optional[str]]:
    """(facts, None) from the child's marked line, else (None, the last
    line of its error output)."""
    return tfprobe.parse_child(stdout, stderr, returncode, MARK, "JAX")


def probe(python: str, cwd: str, env: Dict[str, str], timeout: float,
          progress: Optional[Callable[[str], None]] = None
          ) -> Tuple[Optional[Dict], Optional[str]]:
    """(facts, None) or (None, why the probe failed)."""
    return tfprobe.run_child(__name__, MARK, "JAX", python, cwd, env,
                             timeout, progress)


def usable(facts: Optional[Dict]) -> bool:
    """JAX and Keras 3 both import: the jax backend can train here."""
    return bool(facts) and not facts.get("keras_error") and \
        str(facts.get("keras") or "").split(".")[0] == "3"


def summary(facts: Dict) -> str:
    """'JAX 0.11.2 (jaxlib 0.11.2, jax-cuda13-plugin 0.11.2), Keras 3.15.1;
    default backend gpu, 8 device(s)'."""
    plugins = ", ".join(f"{n} {v}" for n, v in
                        (facts.get("cuda_plugins") or {}).items())
    libs = f"jaxlib {facts.get('jaxlib')}" + (
        f", {plugins}" if plugins else ", no CUDA plugin")
    keras = facts.get("keras") or "not importable"
    return (f"JAX {facts.get('jax')} ({libs}), Keras {keras}; default "
            f"backend {facts.get('default_backend')}, "
            f"{len(facts.get('devices') or [])} device(s)")


def main() -> int:
    print(MARK + json.dumps(collect()), flush=True)
    return exit_status.OK


if __name__ == "__main__":
    sys.exit(main())
