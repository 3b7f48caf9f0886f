"""What a JAX result was measured on: versions, devices, host.

The same keys as the TensorFlow backend's record (measure/environment.py)
where they mean the same (devices, gpu_names, workers, replicas, host),
plus the backend, Keras 3's and JAX's versions, every device JAX used
and the XLA_FLAGS it started with (runtime.xla_flags among them).
"""

from __future__ import annotations

import platform
import socket
from typing import Any, Dict, Optional

from official_bench.jax_backend import keras3
from official_bench.jax_backend.devices import JaxRuntime
from official_bench.measure.host_env import (
    SUITE_KEY,
    cpu_count,
    cpu_model,
    suite,
)


def collect(run: JaxRuntime, loaded_versions: Dict[str, Optional[str]],
            strategy: str, num_replicas: int, dtype: str,
            configured: int) -> Dict[str, Any]:
    """A JSON-ready description of this process's environment."""
    local = run.local_devices
    return {
        "backend": "jax",
        SUITE_KEY: suite(),  # "0.1.0 (git e92555b)": the code that ran
        "python": platform.python_version(),
        **loaded_versions,
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": cpu_count(),
        "cpu_model": cpu_model(),
        "devices": run.device_names(),
        "replicas_per_worker": len(local),
        "configured_devices": [f"{run.platform}:{i}"
                               for i in range(configured)],
        "gpu_names": [d.device_kind for d in local
                      if d.platform != "cpu"],
        "jax_devices": [{"id": d.id, "process": d.process_index,
                         "platform": d.platform, "kind": d.device_kind}
                        for d in run.devices],
        "num_workers": run.process_count,
        "num_replicas": num_replicas,
        "strategy": strategy,
        "dtype": dtype,
        "horovod": None,
        "xla_flags": keras3.xla_flags_in_effect(),
    }


def versions(run: JaxRuntime) -> Dict[str, Optional[str]]:
    return keras3.versions(keras3.Loaded(run.keras, run.jax, run.platform))
