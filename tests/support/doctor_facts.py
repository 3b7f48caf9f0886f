"""Faked machine facts for the doctor's and the GPU diagnosis' tests:
TensorFlow builds, what the jax probe reports, nvidia-smi's answers, and
the doctor's plan for n GPUs on either backend. Only decisions made from
these are tested with them; no measurement is faked."""

from official_bench.doctor import check_plan as plan
from official_bench.host import gpu_diagnosis as gd

CUDA_BUILD = {"is_cuda_build": True, "cuda_version": "12.5.1",
              "cudnn_version": "9",
              "cuda_compute_capabilities": ["sm_60", "sm_70", "sm_80",
                                            "sm_89", "compute_90"]}


CPU_BUILD = {"is_cuda_build": False, "is_rocm_build": False}


def smi(*gpus, driver="550.54.15", cap="8.0"):
    return gd.SmiFacts(found=True, ok=True, gpus=tuple(
        gd.SmiGpu(i, name, driver, cap) for i, name in enumerate(gpus)))


NO_SMI = gd.SmiFacts(found=False)


AMPERE, VOLTA = (8, 0), (7, 0)


NO_GPU = "no GPU visible to TensorFlow: no NVIDIA driver"
NO_GPU_JAX = "no GPU visible to JAX: no NVIDIA driver"


def planned(n, caps=AMPERE, horovod_skip=None, quick=False,
            backend="tensorflow"):
    ids = [str(i) for i in range(n)]
    why = NO_GPU_JAX if backend == "jax" else NO_GPU
    return {c.name: c for c in plan.plan(
        ids, [caps] * n, None if n else why, horovod_skip, quick, backend)}


def jax_facts(n_gpus=0, kind="NVIDIA H200", cap=(9, 0), plugins=None,
              gpu_error=None, jaxlib="0.11.2", keras="3.15.1"):
    """The jax probe's JSON (doctor/jaxprobe.collect) for a machine where
    JAX sees `n_gpus` GPUs (none: its CPU, and `gpu_error`)."""
    gpus = [{"name": f"gpu:{i}", "device_name": kind,
             "compute_capability": list(cap)} for i in range(n_gpus)]
    devices = ([{"id": i, "platform": "gpu", "device_kind": kind}
                for i in range(n_gpus)] or
               [{"id": 0, "platform": "cpu", "device_kind": "cpu"}])
    if plugins is None:
        plugins = {"jax-cuda13-plugin": jaxlib,
                   "jax-cuda13-pjrt": jaxlib} if n_gpus else {}
    return {"jax": "0.11.2", "jaxlib": jaxlib, "cuda_plugins": plugins,
            "default_backend": "gpu" if n_gpus else "cpu",
            "devices": devices, "gpus": gpus,
            "gpu_error": None if n_gpus else (
                gpu_error or "Unknown backend: 'gpu' requested, but no "
                "platforms that are instances of gpu are present"),
            "environment": {}, "keras": keras,
            "keras_backend": "jax" if keras else None,
            "keras_error": None if keras else
            "ModuleNotFoundError: No module named 'keras'"}


SMI_UTIL = "0, 97, 15020\n1, 3, 310\n"
