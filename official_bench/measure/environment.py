"""What a result was measured on, on the TensorFlow backend: versions,
devices, build info, host (the host's facts are measure/host_env.py's,
shared with the JAX backend)."""

from __future__ import annotations

import platform
import socket
from typing import Dict, Optional

from official_bench.measure.host_env import (
    SUITE_KEY,
    cpu_count,
    cpu_model,
    suite,
)
from official_bench.runtime.keras_setup import keras, tf


def _gpu_names() -> list:
    names = []
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            details = tf.config.experimental.get_device_details(gpu)
        except Exception:  # pragma: no cover - driver dependent
            details = {}
        names.append(details.get("device_name", gpu.name))
    return names


def collect(strategy_name: Optional[str] = None, num_workers: int = 1,
            num_replicas: int = 1, dtype: Optional[str] = None,
            devices: Optional[list] = None, horovod=None,
            configured_devices: Optional[list] = None) -> Dict:
    """A JSON-ready description of this process's environment.

    `devices` are the strategy's own replica devices of this process (what
    really ran), `configured_devices` what the config asked for.
    """
    build = tf.sysconfig.get_build_info()
    return {
        "backend": "tensorflow",  # as the JAX backend's record says "jax"
        SUITE_KEY: suite(),  # "0.1.0 (git e92555b)": the code that ran
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "tf_keras": keras.__version__,
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": cpu_count(),
        "cpu_model": cpu_model(),
        "devices": devices or [],
        "replicas_per_worker": len(devices or []),
        "configured_devices": configured_devices or [],
        "gpu_names": _gpu_names(),
        "cuda_version": build.get("cuda_version"),
        "cudnn_version": build.get("cudnn_version"),
        "is_cuda_build": bool(build.get("is_cuda_build")),
        "num_workers": num_workers,
        "num_replicas": num_replicas,
        "strategy": strategy_name,
        "dtype": dtype,
        "horovod": _horovod(horovod),
    }


def _horovod(hvd) -> Optional[Dict]:
    if hvd is None:
        return None
    import horovod
    return {"version": horovod.__version__, "size": hvd.size(),
            "local_size": hvd.local_size(), "gloo": bool(hvd.gloo_enabled()),
            "mpi": bool(hvd.mpi_enabled()), "nccl": bool(hvd.nccl_built())}
