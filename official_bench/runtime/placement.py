"""Where the strategy really put this process's replicas, checked against
the config.

A strategy can silently train somewhere else than the config says: a
MultiWorkerMirroredStrategy whose cluster resolver reports no accelerators
puts each worker on CPU:0 even with 8 GPUs visible, and the run still
finishes with a plausible number. So after the strategy is built we read its
devices back, fail when they are not the configured ones, and record them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import List

from official_bench.config import ConfigError
from official_bench.config.strategies import StrategyTraits

_DEVICE_TYPE = re.compile(r"(?:device:)?(?P<type>[A-Za-z_]+):\d+$")


@dataclasses.dataclass(frozen=True)
class Placement:
    """This process's replica devices, as the strategy reports them."""
    devices: List[str]

    @property
    def replicas_per_worker(self) -> int:
        return len(self.devices)

    @property
    def device_types(self) -> List[str]:
        return [device_type(d) for d in self.devices]


def device_type(name: str) -> str:
    """'/job:worker/replica:0/task:1/device:GPU:3' or '/gpu:3' -> 'GPU'."""
    match = _DEVICE_TYPE.search(name.strip())
    if not match:
        raise ValueError(f"not a device name: {name!r}")
    return match.group("type").upper()


def expected_replicas(traits: StrategyTraits, num_gpus: int,
                      cpu_devices: int) -> int:
    """Replicas one worker (process) should run for the configured devices.

    Horovod runs one process per GPU; every tf.distribute strategy runs one
    replica per GPU of its worker. Without GPUs the config asks the two
    mirrored strategies for `runtime.cpu_devices` replicas; one_device, off,
    horovod and parameter_server use one CPU device.
    """
    if num_gpus > 0:
        return 1 if traits.one_process_per_gpu else num_gpus
    return cpu_devices if traits.cpu_replicas_from_config else 1


def check(traits: StrategyTraits, num_gpus: int, cpu_devices: int,
          placement: Placement) -> None:
    """Raises naming both device lists when the strategy disagrees with the
    config (wrong device type or wrong count per worker)."""
    want_type = "GPU" if num_gpus > 0 else "CPU"
    want_count = expected_replicas(traits, num_gpus, cpu_devices)
    types = placement.device_types
    if types and all(t == want_type for t in types) and \
            len(types) == want_count:
        return
    if num_gpus > 0:
        unit = "process" if traits.one_process_per_gpu else "worker"
        wanted = f"runtime.num_gpus={num_gpus}, so {want_count} GPU " \
                 f"replica(s) per {unit}"
    else:
        wanted = "runtime.num_gpus=0 and runtime.cpu_devices=" \
                 f"{cpu_devices}, so {want_count} CPU replica(s) per worker"
        if traits.one_cpu_replica_per_worker and cpu_devices > 1:
            wanted += f" ({traits.name} runs one CPU replica per " \
                      "worker; start more workers instead)"
    raise ConfigError(
        f"{traits.name} placed this worker's replicas on "
        f"{', '.join(placement.devices) or 'no device'} "
        f"({placement.replicas_per_worker} replica(s)), but {wanted}; the "
        "run would measure other devices than configured")


def read_placement(traits: StrategyTraits, strategy, tf) -> Placement:
    """The replica devices of this process, read back from the strategy."""
    if traits.default_strategy:
        # The default strategy has no worker_devices; ops go to the first
        # visible GPU, else the CPU.
        gpus = tf.config.list_logical_devices("GPU")
        return Placement([gpus[0].name if gpus else
                          tf.config.list_logical_devices("CPU")[0].name])
    if traits.remote_replicas:
        return Placement(_ps_worker_devices(tf))
    return Placement([str(d) for d in strategy.extended.worker_devices])


def _ps_worker_devices(tf) -> List[str]:
    """Compute devices of worker 0, as ParameterServerStrategy counts them
    (GPUs of the remote 'worker' tasks; none means one CPU replica)."""
    per_task = {}
    for d in tf.config.list_logical_devices():
        spec = tf.DeviceSpec.from_string(d.name)
        if spec.job == "worker" and spec.device_type in ("GPU", "CPU"):
            per_task.setdefault(spec.task, {}).setdefault(
                spec.device_type, []).append(d.name)
    first = per_task.get(min(per_task)) if per_task else {}
    return first.get("GPU") or first.get("CPU", [])[:1]
