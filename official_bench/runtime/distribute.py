"""`runtime.distribution_strategy` -> how a run is distributed.

tf.distribute strategies (off, one_device, mirrored, multi_worker_mirrored,
parameter_server) and Horovod differ in a few places the trainer touches:
how each process's input reaches model.fit, how the optimizer reduces
gradients, which extra callbacks it needs, who saves, and whether the
cluster must be told that the run finished. `Distribution` puts those
behind one object, answering from the strategy's traits (runtime/
strategies.py), so the trainer reads the same for every backend. It takes
the input as a function of the InputContext (the data layer builds it):
the runtime imports nothing from data/.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, List, Optional

from absl import logging

from official_bench.config import ConfigError, RuntimeConfig, strategies
from official_bench.config.rules import xla_refusal
from official_bench.config.strategies import StrategyTraits
from official_bench.contracts.throughput import timeout_message
from official_bench.runtime import (
    device_prefetch,
    devices as devices_lib,
    horovod_backend,
    placement,
    ps_server,
)
from official_bench.runtime.cluster import (
    Cluster,
    ClusterError,
    accelerators,
    can_connect,
    check_own_port,
)
from official_bench.runtime.keras_setup import keras, tf
from official_bench.runtime.watchdog import StartupWatchdog

# fn(InputContext) -> one input pipeline's tf.data.Dataset
DatasetFn = Callable[[Any], Any]


@dataclasses.dataclass
class Distribution:
    """The strategy plus what differs per backend."""
    traits: StrategyTraits  # of runtime.distribution_strategy
    strategy: Any
    num_replicas: int  # replicas whose batches make one global step
    is_chief: bool  # writes model_dir files
    logs_throughput: bool
    num_workers: int = 1
    hvd: Any = None  # the horovod.tensorflow.keras module, for horovod
    fp16_allreduce: bool = False
    tag: str = "worker0"  # names this process's files when not chief
    private_threads: Optional[int] = None  # dataset_num_private_threads
    placement: Optional[placement.Placement] = None  # the strategy's devices
    cluster: Optional[Cluster] = None  # told when the run finished

    @property
    def kind(self) -> str:
        """The runtime.distribution_strategy value, for logs and records."""
        return self.traits.name

    @property
    def rank(self) -> int:
        """This process's index among the processes that each build their
        own input (Horovod's rank); 0 where the strategy numbers the
        replicas itself."""
        return self.hvd.rank() if self.hvd is not None else 0

    @property
    def stage_device(self) -> Optional[str]:
        """The device to prefetch the input onto last (this process's one
        replica device), or None where the strategy's iterator stages the
        batches itself (data/device_stage.py)."""
        devices = self.placement.devices if self.placement else []
        if not self.traits.default_strategy or not devices:
            return None
        return devices[0]

    @property
    def saves_checkpoints(self) -> bool:
        """Whether this process takes part in checkpoints and exports: the
        chief, and every worker where saving is collective."""
        return self.is_chief or self.traits.saves_on_every_worker

    def distribute_input(self, dataset_fn: DatasetFn):
        """`dataset_fn(ctx)` (one input pipeline's dataset for its
        tf.distribute.InputContext) -> what model.fit iterates here.

        Horovod: this process's pipeline, numbered by its rank. Parameter
        server: a DatasetCreator the coordinator runs on each worker.
        Otherwise the strategy calls `dataset_fn` once per input pipeline.
        """
        if self.traits.input_per_process:
            return dataset_fn(tf.distribute.InputContext(
                num_input_pipelines=self.num_workers,
                input_pipeline_id=self.rank,
                num_replicas_in_sync=self.num_replicas))
        if self.traits.input_via_dataset_creator:
            return keras.utils.experimental.DatasetCreator(dataset_fn)
        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def wrap_optimizer(self, optimizer):
        """Horovod's DistributedOptimizer does the all-reduce itself."""
        if self.traits.horovod_allreduce:
            return horovod_backend.distributed_optimizer(
                self.hvd, optimizer, self.fp16_allreduce)
        return optimizer

    def prepare_fit(self, model) -> None:
        """Horovod: XLA train step if asked, rank 0's state broadcast once."""
        if self.traits.horovod_allreduce:
            horovod_backend.prepare_fit(self.hvd, model)

    def callbacks(self) -> List:
        """Horovod's metric averaging; none for tf.distribute."""
        if self.traits.horovod_allreduce:
            return horovod_backend.callbacks(self.hvd)
        return []

    def report_finished(self) -> None:
        """After a finished run: tasks that serve the coordinator are told
        so, and exit 0 when it goes (runtime/ps_server.py)."""
        if self.traits.tasks_serve_coordinator and self.cluster is not None:
            ps_server.report_finished(self.cluster)


def cluster_resolver(cluster: Cluster, num_gpus: int):
    """TensorFlow's resolver for `cluster`, built from data, so nothing is
    written to os.environ.

    It must carry the GPU count: MultiWorkerMirroredStrategy takes its
    local devices from `num_accelerators()` for any resolver other than
    TFConfigClusterResolver, and a SimpleClusterResolver without one
    reports none, so every worker would train on CPU:0.
    """
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster.jobs()), task_type=cluster.task_type,
        task_id=cluster.task_index, rpc_layer="grpc",
        num_accelerators=accelerators(num_gpus))


def serve_if_not_coordinator(rt: RuntimeConfig, cluster: Cluster) -> bool:
    """Serves until the chief's run is over when this process only serves
    another process's coordinator (a parameter_server worker or ps task);
    True then, and the caller has nothing to train. False otherwise."""
    traits = strategies.traits(rt.distribution_strategy)
    if not traits.tasks_serve_coordinator or \
            not ps_server.is_serving_task(cluster):
        return False
    ps_server.serve(rt, cluster)
    return True


def _mirrored_cross_device_ops(rt: RuntimeConfig, devices: List[str]):
    """nccl / hierarchical_copy with num_packs; CPU replicas reduce on one
    (config validation refuses num_packs and all_reduce_alg without GPUs)."""
    on_gpu = devices[0].startswith("/gpu")
    alg = rt.all_reduce_alg or ("nccl" if on_gpu else None)
    if alg is None:
        return tf.distribute.ReductionToOneDevice()
    if alg == "nccl":
        return tf.distribute.NcclAllReduce(num_packs=rt.num_packs)
    return tf.distribute.HierarchicalCopyAllReduce(num_packs=rt.num_packs)


def _collective_implementation(rt: RuntimeConfig):
    impl = tf.distribute.experimental.CommunicationImplementation
    return {None: impl.AUTO, "auto": impl.AUTO, "ring": impl.RING,
            "nccl": impl.NCCL}[rt.all_reduce_alg]


def _communication_options(rt: RuntimeConfig):
    """Collective options; a per-collective timeout only when asked for.

    TensorFlow documents the timeout as a debugging aid: each collective
    starts a thread that sleeps for the whole timeout, so at a few steps per
    second the threads pile up (two loopback workers reached 15,000 threads
    and aborted at step 800 with 300 s). A peer lost mid-run still ends the
    survivor through gRPC's own error without it.
    """
    timeout = rt.collective_timeout_seconds
    if timeout:
        logging.warning(
            "runtime.collective_timeout_seconds=%g: TensorFlow keeps a thread "
            "alive for %g s per collective op, so long or fast runs pile up "
            "threads and can abort ('Resource temporarily unavailable'); use "
            "it only to debug a hang", timeout, timeout)
    return tf.distribute.experimental.CommunicationOptions(
        implementation=_collective_implementation(rt),
        timeout_seconds=timeout or None)


def _multi_worker(rt: RuntimeConfig, cluster: Cluster):
    options = _communication_options(rt)
    if cluster.num_workers == 1:
        return tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=options)
    check_own_port(cluster)
    logging.info("Joining %d workers as %s (%s); waiting up to %.0f s for "
                 "peers", cluster.num_workers, cluster.describe(),
                 cluster.address, rt.peer_timeout_seconds)
    with StartupWatchdog(cluster.describe(), cluster.peers(),
                         rt.peer_timeout_seconds):
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=cluster_resolver(cluster, rt.num_gpus),
            communication_options=options)
        # The first collective is where a missing peer would block.
        strategy.reduce(tf.distribute.ReduceOp.SUM,
                        strategy.run(lambda: tf.constant(1.0)), axis=None)
    return strategy


def wait_for_peers(cluster: Cluster, timeout: float) -> None:
    """Polls every peer's port; the parameter-server chief can, its peers
    start their servers independently. Raises naming the missing ones."""
    deadline = time.monotonic() + timeout
    missing = cluster.peers()
    while True:
        missing = {n: a for n, a in missing.items() if not can_connect(a)}
        if not missing or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    if missing:
        raise ClusterError(timeout_message(
            cluster.describe(), timeout,
            [f"{n} at {a}" for n, a in missing.items()], " for the cluster"))


def _parameter_server(rt: RuntimeConfig, cluster: Cluster):
    jobs = cluster.jobs()
    if not jobs.get("ps") or not jobs.get("worker"):
        raise ConfigError(
            "parameter_server needs ps and worker tasks: set runtime.ps_hosts "
            "and runtime.worker_hosts (plus chief_host), or a TF_CONFIG with "
            "'ps' and 'worker' jobs")
    if cluster.task_type != "chief":
        raise ConfigError(
            f"{cluster.describe()} cannot build the parameter_server "
            "strategy: only the chief does; worker and ps tasks run the same "
            "trainer command, which serves them (runtime/ps_server.py), and "
            "the task types are chief, worker, ps")
    wait_for_peers(cluster, rt.peer_timeout_seconds)
    return tf.distribute.experimental.ParameterServerStrategy(
        cluster_resolver(cluster, rt.num_gpus))


def _check_xla(rt: RuntimeConfig, traits: StrategyTraits,
               cluster: Cluster) -> None:
    """runtime.enable_xla where TensorFlow cannot run the compiled step for
    this cluster (a TF_CONFIG's workers too; config/rules.xla_refusal):
    one error line before the workers join, not a traceback (and an abort)
    at the first step. Horovod compiles only part of its step
    (runtime/horovod_backend.py)."""
    if not rt.enable_xla or traits.horovod_allreduce:
        return
    why = xla_refusal(traits, rt.num_gpus, rt.cpu_devices,
                      cluster.num_workers)
    if why:
        raise ConfigError(f"runtime.enable_xla is true, but {why}")


def build_distribution(rt: RuntimeConfig, cluster: Cluster,
                       devices: List[str]) -> Distribution:
    """Builds the strategy, checks where it put the replicas, and records
    the per-process input threads."""
    # Before any iterator: fit then returns as soon as it ends.
    device_prefetch.install()
    dist = _build_distribution(rt, cluster, devices)
    dist.placement = placement.read_placement(dist.traits, dist.strategy, tf)
    placement.check(dist.traits, rt.num_gpus, rt.cpu_devices, dist.placement)
    logging.info("official_bench: %s runs %d replica(s) in this process on "
                 "%s", dist.kind, dist.placement.replicas_per_worker,
                 ", ".join(dist.placement.devices))
    dist.private_threads = devices_lib.dataset_private_threads(
        rt, os.cpu_count())
    if dist.private_threads and not rt.dataset_num_private_threads:
        logging.info("official_bench: %d private input threads (derived for "
                     "gpu_private from %d cores)", dist.private_threads,
                     os.cpu_count())
    return dist


def _build_distribution(rt: RuntimeConfig, cluster: Cluster,
                        devices: List[str]) -> Distribution:
    """Builds the strategy; multi-worker start-up is bounded by a deadline.
    The one place a strategy name picks code: the constructor of each."""
    name = rt.distribution_strategy
    traits = strategies.traits(name)
    _check_xla(rt, traits, cluster)
    if name == "horovod":
        hvd = horovod_backend.init(rt, num_gpus=rt.num_gpus)
        return Distribution(traits, tf.distribute.get_strategy(), hvd.size(),
                            is_chief=hvd.rank() == 0,
                            logs_throughput=hvd.rank() == 0,
                            num_workers=hvd.size(), hvd=hvd,
                            fp16_allreduce=rt.horovod.fp16_allreduce,
                            tag=f"rank{hvd.rank()}")
    if name == "parameter_server":
        strategy = _parameter_server(rt, cluster)
        return Distribution(traits, strategy, strategy.num_replicas_in_sync,
                            True, True, len(cluster.jobs()["worker"]),
                            cluster=cluster)
    if cluster.num_workers > 1 and name != "multi_worker_mirrored":
        raise ConfigError(
            f"{cluster.num_workers} workers are configured ({cluster.source})"
            f" but runtime.distribution_strategy is {name!r}; use "
            "multi_worker_mirrored")
    if name == "off":
        strategy = tf.distribute.get_strategy()
    elif name == "one_device":
        strategy = tf.distribute.OneDeviceStrategy(devices[0])
    elif name == "mirrored":
        strategy = tf.distribute.MirroredStrategy(
            devices=devices,
            cross_device_ops=_mirrored_cross_device_ops(rt, devices))
    else:  # multi_worker_mirrored
        strategy = _multi_worker(rt, cluster)
    return Distribution(traits, strategy, strategy.num_replicas_in_sync,
                        cluster.is_chief, True, cluster.num_workers,
                        tag=f"{cluster.task_type}{cluster.task_index}",
                        cluster=cluster)
