"""Which devices a JAX run trains on, across how many processes.

One process per node drives every device it uses, as one DataParallel
mesh (keras.distribution) over all processes' devices: `one_device` and
`off` one device, `mirrored` runtime.num_gpus GPUs (or runtime.cpu_devices
host devices), `multi_worker_mirrored` the same on every node, the nodes
meeting through jax.distributed at worker 0's host:port (from TF_CONFIG or
runtime.worker_hosts + task_index, the same cluster the TensorFlow backend
reads). The coordinator has no authentication (docs/security.md).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, List

from absl import logging

from official_bench.config import RuntimeConfig
from official_bench.config.strategies import TRAITS
from official_bench.contracts import throughput
from official_bench.jax_backend import keras3
from official_bench.runtime.cluster import (
    Cluster,
    ClusterError,
    resolve_cluster,
)
from official_bench.runtime.watchdog import StartupWatchdog

# jax.distributed's wait for every process when peer_timeout_seconds is 0.
FOREVER_SECONDS = 10 ** 7
# jax.distributed's own deadline lies this far past the watchdog's: when it
# passes, JAX aborts the process (SIGABRT) without a line of ours.
JAX_DEADLINE_GRACE_SECONDS = 60
# jax.distributed.initialize's cluster_detection_method that turns off its
# reading of Slurm/Open MPI/Kubernetes variables.
NO_CLUSTER_DETECTION = "deactivate"
# The option that starts XLA's preemption notifier in jax.distributed.
PREEMPTION_SERVICE = "jax_enable_preemption_service"


@dataclasses.dataclass
class JaxRuntime:
    """The modules, this process's place and the mesh it trains on."""
    keras: Any
    jax: Any
    platform: str
    cluster: Cluster
    process_index: int
    process_count: int
    local_devices: List[Any]
    devices: List[Any]  # every process's, in mesh order
    distribution: Any  # keras.distribution.DataParallel

    @property
    def is_chief(self) -> bool:
        return self.process_index == 0

    @property
    def tag(self) -> str:
        return f"worker{self.process_index}"

    @property
    def mesh(self):
        return self.distribution.device_mesh.backend_mesh

    def device_names(self) -> List[str]:
        return [f"{d.platform}:{d.id}" for d in self.local_devices]


def local_device_count(rt: RuntimeConfig) -> int:
    """Devices of one process: num_gpus GPUs, else the CPU's (cpu_devices
    for mirrored, as the TensorFlow backend's logical CPU devices)."""
    traits = TRAITS[rt.distribution_strategy]
    if rt.num_gpus > 0:
        return 1 if rt.distribution_strategy in ("one_device", "off") \
            else rt.num_gpus
    if traits.cpu_replicas_from_config and \
            not traits.one_cpu_replica_per_worker:
        return rt.cpu_devices
    return 1


def start(rt: RuntimeConfig) -> JaxRuntime:
    """Cluster, Keras 3 on JAX, jax.distributed, the mesh: a process ready
    to build its model."""
    cluster = resolve_cluster(rt)
    if cluster.extra_jobs:
        raise ClusterError(
            f"runtime.backend jax takes workers only; the cluster also has "
            f"{', '.join(sorted(cluster.extra_jobs))} (TF_CONFIG or "
            "runtime.chief_host/ps_hosts)")
    count = local_device_count(rt)
    loaded = keras3.load(rt.num_gpus, count, xla_flags=rt.xla_flags)
    jax = loaded.jax
    if cluster.num_workers > 1:
        _join(jax, cluster, rt.peer_timeout_seconds, loaded.platform)
    local = _local_devices(jax, loaded.platform, count, rt.num_gpus)
    devices = []
    for p in range(jax.process_count()):
        devices += sorted(jax.local_devices(process_index=p),
                          key=lambda d: d.id)[:count]
    keras = loaded.keras
    distribution = keras.distribution.DataParallel(
        devices=devices, auto_shard_dataset=False)
    keras.distribution.set_distribution(distribution)
    return JaxRuntime(keras=keras, jax=jax, platform=loaded.platform,
                      cluster=cluster, process_index=jax.process_index(),
                      process_count=jax.process_count(), local_devices=local,
                      devices=devices, distribution=distribution)


def _join(jax, cluster: Cluster, timeout: float, platform: str) -> None:
    """Meets the other processes at worker 0's address; a peer missing
    after `timeout` seconds is one timeout line (contracts/throughput) and
    SIGKILL from the start-up watchdog (exit 137, as on TensorFlow):
    jax.distributed itself would abort the process without a word. A
    SIGINT or SIGTERM while it waits ends it at once, naming the wait (the
    watchdog too). Only worker 0 listens; the others wait for it."""
    if platform == "cpu":
        # Cross-process collectives on CPUs go through Gloo.
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    _no_preemption_service(jax)
    coordinator = cluster.workers[0]
    me = cluster.describe()
    logging.info("%s", throughput.jax_join_message(
        me, cluster.num_workers, coordinator))
    start_time = time.monotonic()
    peers = cluster.peers() if cluster.task_index == 0 else \
        {"worker 0": coordinator}
    jax_deadline = (int(timeout) + JAX_DEADLINE_GRACE_SECONDS
                    if timeout > 0 else FOREVER_SECONDS)
    try:
        with StartupWatchdog(me, peers, timeout,
                             f" for jax.distributed at {coordinator}"):
            jax.distributed.initialize(
                coordinator_address=coordinator,
                num_processes=cluster.num_workers,
                process_id=cluster.task_index,
                initialization_timeout=jax_deadline,
                # Ours is the whole cluster: JAX's own detection would read
                # a Slurm step's (or mpirun's) variables and open only the
                # GPU numbered SLURM_LOCALID (OMPI_COMM_WORLD_LOCAL_RANK).
                cluster_detection_method=NO_CLUSTER_DETECTION)
    except Exception as e:  # JAX raises its own runtime error types
        waited = time.monotonic() - start_time
        others = [f"{name} at {addr}" for name, addr in
                  cluster.peers().items()]
        raise ClusterError(throughput.timeout_message(
            me, waited, others or [coordinator],
            f" for jax.distributed at {coordinator} "
            f"({type(e).__name__}: {str(e).splitlines()[0][:200]})")) from e


def _no_preemption_service(jax) -> None:
    """Turns off JAX's preemption service: its notifier (XLA's) takes
    SIGTERM over in C as jax.distributed starts and the run trains on to
    exit 0; ours stop it (runtime/stop_signals.py). An option this JAX
    does not have (renamed or dropped) leaves it on; the start-up watchdog
    puts Python's handlers back after the join either way."""
    try:
        jax.config.update(PREEMPTION_SERVICE, False)
    except (AttributeError, KeyError, ValueError) as e:
        logging.info("official_bench: this JAX has no %s (%s); Python's "
                     "signal handlers are put back after the join",
                     PREEMPTION_SERVICE, e)


def _local_devices(jax, platform: str, count: int, num_gpus: int):
    """This process's first `count` devices; a missing GPU is one error."""
    try:
        found = jax.local_devices()
    except Exception as e:  # RuntimeError, or an assertion inside JAX
        why = (str(e).splitlines() or [""])[0][:200] or type(e).__name__
        raise keras3.BackendError(
            f"runtime.num_gpus is {num_gpus} but JAX could not start its GPU "
            f"backend ({why}); install JAX's CUDA build (docs/backends.md) "
            "or set runtime.num_gpus=0") from e
    if len(found) < count:
        what = "GPU(s)" if platform == "gpu" else "CPU device(s)"
        raise keras3.BackendError(
            f"the run needs {count} {what} in this process but JAX sees "
            f"{len(found)}: {', '.join(str(d) for d in found)}")
    return sorted(found, key=lambda d: d.id)[:count]


def peak_memory_reader(local_devices):
    """Reads XLA's peak bytes in use per local GPU (MiB) for the sampler;
    None on CPUs (no allocator statistics)."""
    if not local_devices or local_devices[0].platform == "cpu":
        return None

    def read():
        out = {}
        for d in local_devices:
            stats = d.memory_stats() or {}
            if "peak_bytes_in_use" in stats:
                out[f"{d.platform}:{d.id}"] = (stats["peak_bytes_in_use"]
                                               / 2**20)
        return out
    return read
