"""Why JAX sees fewer GPUs than nvidia-smi, and what to do about it.

host/gpu_diagnosis.py answers this for TensorFlow from its build info; JAX
has none: its GPU backend is a plugin (jax-cuda12-plugin, jax-cuda13-plugin,
which `pip install "jax[cuda13]"` brings), so the causes are the machine (no
driver, no GPU: worded by host/gpu_diagnosis.py), CUDA_VISIBLE_DEVICES
hiding every GPU, a CPU-only jaxlib (no plugin), a plugin the driver is too
old for or that does not match jaxlib, or a plugin that failed for another
reason (its error text is the verdict). Decided from the jax probe's facts
(doctor/jaxprobe.py) and nvidia-smi's, so faked facts test every branch.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from official_bench.host import gpu_diagnosis as gd, gpus as host_gpus

Diagnosis = gd.Diagnosis
# The CUDA releases JAX publishes plugins for (jax[cuda12], jax[cuda13]).
JAX_CUDA_MAJORS = (12, 13)


def _version(text: Optional[str]) -> Optional[tuple]:
    """'580.159.04' -> (580, 159, 4); None when it has no number."""
    return tuple(int(x) for x in re.findall(r"\d+", str(text or ""))[:3]) \
        or None


def _dotted(version: tuple) -> str:
    return ".".join(str(x) for x in version)


def cuda_major_for_driver(driver: Optional[str]) -> Optional[int]:
    """The newest CUDA major release with a JAX plugin that the driver
    runs (CUDA's minor version compatibility table in
    host/gpu_diagnosis.py); None when it runs none of them."""
    have = _version(driver)
    fits = [major for major in JAX_CUDA_MAJORS
            if have and have >= gd.MIN_DRIVER_FOR_CUDA_MAJOR[major]]
    return max(fits) if fits else None


def plugin_majors(plugins: Dict[str, str]) -> List[int]:
    """CUDA majors of the installed plugins ('jax-cuda13-plugin' -> 13)."""
    return sorted({int(m.group(1)) for name in plugins
                   for m in [re.search(r"cuda(\d+)", name)] if m})


def _pip(major: int, jax_version: Optional[str]) -> str:
    pin = f"=={jax_version}" if jax_version else ""
    return f"pip install 'jax[cuda{major}]{pin}'"


def _plugin_problem(facts: Dict, driver: Optional[str]
                    ) -> Tuple[str, str]:
    """(verdict, fix) when JAX has no GPU backend on a machine with GPUs."""
    plugins = facts.get("cuda_plugins") or {}
    jax_v, jaxlib_v = facts.get("jax"), facts.get("jaxlib")
    runs = cuda_major_for_driver(driver)
    if not plugins and "cuda" not in str(jaxlib_v):
        if runs is None:
            return (f"jaxlib {jaxlib_v} is CPU-only (no JAX CUDA plugin) "
                    f"and NVIDIA driver {driver} is too old for JAX's CUDA "
                    "builds", "upgrade the NVIDIA driver to 580 or newer, "
                    f"then {_pip(13, jax_v)}")
        return (f"jaxlib {jaxlib_v} is CPU-only: no JAX CUDA plugin "
                "(jax-cuda12-plugin, jax-cuda13-plugin) is installed",
                f"{_pip(runs, jax_v)} (driver {driver} runs CUDA {runs})")
    names = ", ".join(f"{n} {v}" for n, v in plugins.items())
    error = (facts.get("gpu_error") or "no GPU backend").strip()
    majors = plugin_majors(plugins)
    if majors and runs is not None and min(majors) > runs:
        need = _dotted(gd.MIN_DRIVER_FOR_CUDA_MAJOR[min(majors)])
        return (f"NVIDIA driver {driver} is too old for {names}: CUDA "
                f"{min(majors)}.x needs driver >= {need} ({error})",
                f"upgrade the NVIDIA driver to {need} or newer, or "
                f"{_pip(runs, jax_v)}")
    stale = {n: v for n, v in plugins.items()
             if jaxlib_v and n.endswith("plugin") and v != jaxlib_v}
    major = runs if runs in majors or not majors else majors[-1]
    if stale:
        return (f"{names} does not match jaxlib {jaxlib_v} ({error})",
                _pip(major, jax_v) + " (the plugin's version must be "
                "jaxlib's)")
    return (f"JAX's CUDA plugin ({names}) did not initialise: {error}",
            f"{_pip(major, jax_v)} again, so the CUDA libraries it loads "
            "(nvidia-* wheels) come with it; the error above names the "
            "one missing")


def diagnose(facts: Optional[Dict], smi: gd.SmiFacts,
             cuda_visible: Optional[str] = None) -> Diagnosis:
    """Whether JAX can use this machine's GPUs, and the fix if not.

    facts: the jax probe's JSON (None when JAX did not import); smi:
    gpu_diagnosis.probe_nvidia_smi(); cuda_visible: CUDA_VISIBLE_DEVICES
    (None when unset).
    """
    gpus = (facts or {}).get("gpus") or []
    n_smi = len(smi.gpus) if smi.ok else 0
    if gpus:
        verdict = f"JAX sees {len(gpus)} GPU(s)"
        if n_smi > len(gpus) and cuda_visible is None:
            return Diagnosis(
                f"{verdict} but nvidia-smi lists {n_smi}",
                "JAX left GPUs out: its warnings in `python -c 'import jax; "
                "print(jax.devices())'` name them (a GPU its CUDA build "
                "has no kernels for, or one in exclusive use elsewhere)")
        return Diagnosis(verdict, None)
    if not smi.ok or not n_smi:
        # No GPU in the machine (or no driver): the host's wording, which
        # names no framework; the build info says "a CUDA build" so that
        # only the machine's problems (and CUDA_VISIBLE_DEVICES) are left.
        return gd.diagnose({"is_cuda_build": True}, [], smi, cuda_visible)
    problems = []
    if host_gpus.hides_all(cuda_visible, n_smi):
        problems.append((f"CUDA_VISIBLE_DEVICES={cuda_visible!r} hides "
                         "every GPU", "unset CUDA_VISIBLE_DEVICES or list GPU "
                                      "indices in it (e.g. 0,1)"))
    if facts is None:
        problems.append(("JAX did not start", "pip install -e '.[jax]' with "
                         "JAX's CUDA build (docs/backends.md)"))
    elif not problems:
        problems.append(_plugin_problem(facts, smi.driver_version))
    verdict = "; ".join(p[0] for p in problems)
    fixes = [p[1] for p in problems]
    return Diagnosis(
        f"nvidia-smi lists {n_smi} GPU(s) but JAX sees none: {verdict}",
        fixes[0] if len(fixes) == 1 else
        " ".join(f"({i}) {f};" for i, f in enumerate(fixes, 1)).rstrip(";"))
