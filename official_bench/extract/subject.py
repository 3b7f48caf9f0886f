"""What a case measured, in words for the plot's and the HTML page's titles.

A log tree's names say only ``rn50`` and ``{N}n{G}g``; a reader of a PNG or
an HTML page must not take a 64x64 CPU try for a GPU benchmark. The result
JSON next to each log holds what is needed: the resolved config (model,
depth, image size, data builder, ``runtime.num_gpus``) and the environment
(the replica devices, the GPU names, the CPU's name, TensorFlow's build).

* The device is the GPU model when the run's replica devices are GPUs, else
  the CPU's name (``environment.cpu_model``, recorded by the trainer).
* A run that used no GPU is marked :data:`SMOKE_TEXT`: this suite measures
  ResNet-50 training on GPUs (DLPerf's benchmark); on a CPU it checks that
  the whole flow works (``configs/.../cpu_smoke.yaml``, which the run
  scripts pick on a machine without GPUs).
* ``environment.cuda_version`` is the CUDA TensorFlow was built with
  (``tf.sysconfig.get_build_info()``), not the machine's: it is labelled
  "TensorFlow built with CUDA X", and a run without a GPU says so first.

:func:`describe` makes the JSON-ready ``measured`` object of a case entry;
:func:`headline` and :func:`details` turn the entries of a result into
the title and the caption lines. Without a result JSON nothing is known
beyond the log names, and the texts say so.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional

KEY = "measured"  # the case entry's key
SMOKE_TEXT = "CPU smoke run, not a ResNet-50 benchmark result"
BY_LOG_NAMES = "ResNet-50 v1.5 (by the log names)"
UNKNOWN = (BY_LOG_NAMES + "; model, image size and device not recorded "
           "(no result JSON)")
_RESNET_DEFAULT_DEPTH = {"resnet": 50, "resnet_cifar": 20}


def _get(tree: Optional[Dict[str, Any]], *keys: str) -> Any:
    """``tree[k1][k2]...`` or None where a level is missing."""
    for key in keys:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(key)
    return tree


def model_name(config: Optional[Dict[str, Any]]) -> Optional[str]:
    """"ResNet-50 v1.5" from the config's model name and depth; None
    without a config."""
    name = _get(config, "model", "name")
    if name is None:
        return None
    depth = _get(config, "model", "model_params", "depth") or \
        _RESNET_DEFAULT_DEPTH.get(name)
    if name == "resnet":
        return f"ResNet-{depth} v1.5"
    if name == "resnet_cifar":
        width = _get(config, "model", "model_params", "width") or 1
        return f"ResNet-{depth} (CIFAR)" + (f", width {width}"
                                            if width != 1 else "")
    return str(name)


def device_kind(config: Optional[Dict[str, Any]],
                env: Dict[str, Any]) -> Optional[str]:
    """"gpu" or "cpu": the replica devices the strategy ran on, else the
    config's runtime.num_gpus, else "gpu" when TensorFlow saw GPUs; None
    when nothing was recorded."""
    devices = [str(d).upper() for d in env.get("devices") or []]
    if devices:
        return "gpu" if any("GPU" in d for d in devices) else "cpu"
    num_gpus = _get(config, "runtime", "num_gpus")
    if isinstance(num_gpus, int) and not isinstance(num_gpus, bool):
        return "gpu" if num_gpus > 0 else "cpu"
    return "gpu" if env.get("gpu_names") else None


def device_name(kind: Optional[str], env: Dict[str, Any]) -> Optional[str]:
    """The GPU model(s) for a GPU run, the CPU's name for a CPU run."""
    if kind == "gpu":
        names = sorted(set(env.get("gpu_names") or []))
        return ", ".join(names) or None
    if kind == "cpu":
        return env.get("cpu_model") or None
    return None


def cuda_build_text(kind: Optional[str], env: Dict[str, Any]) -> Optional[str]:
    """TensorFlow's CUDA build, labelled as a build version (never as the
    machine's CUDA); None when the environment does not say."""
    version = env.get("cuda_version")
    if env.get("is_cuda_build") is False:
        text = "TensorFlow built without CUDA"
    elif version:
        text = f"TensorFlow built with CUDA {version}"
        if env.get("cudnn_version"):
            text += f", cuDNN {env['cudnn_version']}"
    else:
        return None
    return ("no GPU used; " + text) if kind == "cpu" else text


def framework_text(env: Dict[str, Any]) -> Optional[str]:
    """"Keras 3.15.1 on JAX 0.10.2" for a JAX-backend run; None for the
    TensorFlow backend (its CUDA build says enough)."""
    if env.get("backend") != "jax":
        return None
    return f"Keras {env.get('keras')} on JAX {env.get('jax')}"


def describe(config: Optional[Dict[str, Any]],
             env: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The ``measured`` object of a case from its first counted run's result
    JSON (config and environment); None when the run had no result JSON."""
    if config is None and env is None:
        return None
    env = env or {}
    kind = device_kind(config, env)
    return {"model": model_name(config),
            "image_size": _get(config, "train_dataset", "image_size"),
            "data": _get(config, "train_dataset", "builder"),
            "device_kind": kind, "device": device_name(kind, env),
            "smoke_run": kind == "cpu",
            "tensorflow_cuda_build": cuda_build_text(kind, env),
            **({"framework": framework_text(env)}
               if framework_text(env) else {})}


def _workload(m: Dict[str, Any]) -> str:
    """"ResNet-50 v1.5, 64x64 images (synthetic data)"."""
    text = m.get("model") or BY_LOG_NAMES
    if m.get("image_size"):
        text += f", {m['image_size']}x{m['image_size']} images"
    if m.get("data"):
        text += f" ({m['data']} data)"
    return text


def _device(m: Dict[str, Any]) -> str:
    """"CPU: AMD EPYC" / "GPU: NVIDIA A100-SXM4-40GB" / what is missing."""
    kind, name = m.get("device_kind"), m.get("device")
    if kind is None:
        return "device not recorded"
    return f"{kind.upper()}: {name or 'model not recorded'}"


def _measured(entries: Iterable[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The distinct ``measured`` objects of the entries, in order; an empty
    dict stands for entries without one."""
    found: List[Dict[str, Any]] = []
    for e in entries:
        m = e.get(KEY) or {}
        if m not in found:
            found.append(m)
    return found


def _entries(result: Dict[str, Dict[str, Dict[str, Any]]]
             ) -> List[Dict[str, Any]]:
    return [e for section in result.values() for e in section.values()]


def recorded(result: Dict[str, Dict[str, Dict[str, Any]]]) -> bool:
    """True when any case had a result JSON saying what it measured."""
    return any(e.get(KEY) for e in _entries(result))


def headline(result: Dict[str, Dict[str, Dict[str, Any]]]) -> str:
    """One line for a title: workload and device, per distinct kind of case
    (cases without a result JSON are named as such, once)."""
    found = _measured(_entries(result))
    known = [f"{_workload(m)}, {_device(m)}" for m in found if m]
    if not known:
        return UNKNOWN
    if {} in found:
        known.append("not recorded for the cases without a result JSON")
    return "; ".join(known)


def is_smoke(result: Dict[str, Dict[str, Dict[str, Any]]]) -> bool:
    """True when any case ran without a GPU (module doc)."""
    return any(m.get("smoke_run") for m in _measured(_entries(result)))


def details(result: Dict[str, Dict[str, Dict[str, Any]]]) -> List[str]:
    """Caption lines under the title: the smoke-run mark first, then
    TensorFlow's CUDA build (each distinct text once)."""
    lines = [SMOKE_TEXT] if is_smoke(result) else []
    for m in _measured(_entries(result)):
        for text in (m.get("framework"), m.get("tensorflow_cuda_build")):
            if text and text not in lines:
                lines.append(text)
    return lines
