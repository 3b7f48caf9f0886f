"""`runtime.distribution_strategy` -> how a run is distributed.

tf.distribute strategies (off, one_device, mirrored, multi_worker_mirrored,
parameter_server) and Horovod differ in three places the trainer touches:
how each process gets its input, how the optimizer reduces gradients, and
which extra callbacks it needs. `Distribution` puts those three behind one
object so the trainer reads the same for every backend.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, List, Optional

from absl import logging

from official_bench.config import ConfigError, DatasetConfig, RuntimeConfig
from official_bench.contracts.throughput import timeout_message
from official_bench.data import device_stage
from official_bench.data import factory as data_factory
from official_bench.data import input_wait
from official_bench.data.resident_batch import ResidentBatch
from official_bench.runtime import devices as devices_lib
from official_bench.runtime import horovod_backend, placement
from official_bench.runtime.cluster import (Cluster, ClusterError,
                                            can_connect, check_own_port)
from official_bench.runtime.keras_setup import keras, tf
from official_bench.runtime.watchdog import StartupWatchdog


@dataclasses.dataclass
class Distribution:
    """The strategy plus what differs per backend."""
    kind: str  # the runtime.distribution_strategy value
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
    # synthetic_location: device: the batch prepare_fit hands the model.
    resident: Optional[ResidentBatch] = None

    def dataset(self, ds: DatasetConfig, global_batch: int,
                is_training: bool, seed: int):
        """This process's input, shaped for its backend's model.fit.

        off and horovod end in a prefetch to the device (data/
        device_stage.py). A resident synthetic batch (synthetic_location:
        device) is kept for `prepare_fit`, which gives it to the model.
        """
        stage = device_stage.stage_device(
            self.kind, self.placement.devices if self.placement else [])
        if is_training and ds.builder == "synthetic" and \
                ds.synthetic_location == "device":
            rank = self.hvd.rank() if self.hvd is not None else 0
            self.resident = ResidentBatch(
                self.strategy, ds, global_batch // self.num_replicas,
                seed, stream_offset=rank)
            return self.resident.dataset(
                None if self.kind == "horovod" else input_wait.TRAIN_METER)
        if self.kind == "horovod":
            ctx = tf.distribute.InputContext(
                num_input_pipelines=self.hvd.size(),
                input_pipeline_id=self.hvd.rank(),
                num_replicas_in_sync=self.hvd.size())
            dataset = data_factory.per_replica_dataset(
                ds, ctx, global_batch, is_training, seed,
                self.private_threads)
            return device_stage.prefetch_to(dataset, stage) if stage \
                else dataset
        if self.kind == "parameter_server":
            return keras.utils.experimental.DatasetCreator(
                lambda ctx: data_factory.per_replica_dataset(
                    ds, ctx, global_batch, is_training, seed,
                    self.private_threads))
        return data_factory.distributed_dataset(
            self.strategy, ds, global_batch, is_training, seed,
            self.private_threads, stage)

    def wrap_optimizer(self, optimizer):
        if self.kind == "horovod":
            return horovod_backend.distributed_optimizer(
                self.hvd, optimizer, self.fp16_allreduce)
        return optimizer

    def prepare_fit(self, model) -> None:
        """Horovod: XLA train step if asked, rank 0's state broadcast once;
        then a resident batch wraps whichever train step the model has."""
        if self.kind == "horovod":
            horovod_backend.prepare_fit(self.hvd, model)
        if self.resident is not None:
            self.resident.attach(model)

    def callbacks(self) -> List:
        if self.kind == "horovod":
            return horovod_backend.callbacks(self.hvd)
        return []


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
            cluster_resolver=cluster.cluster_resolver(rt.num_gpus),
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
        cluster.cluster_resolver(rt.num_gpus))


def build_distribution(rt: RuntimeConfig, cluster: Cluster,
                       devices: List[str]) -> Distribution:
    """Builds the strategy, checks where it put the replicas, and records
    the per-process input threads."""
    dist = _build_distribution(rt, cluster, devices)
    dist.placement = placement.read_placement(dist.kind, dist.strategy, tf)
    placement.check(dist.kind, rt.num_gpus, rt.cpu_devices, dist.placement)
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
    """Builds the strategy; multi-worker start-up is bounded by a deadline."""
    name = rt.distribution_strategy
    if name == "horovod":
        hvd = horovod_backend.init(rt, num_gpus=rt.num_gpus)
        return Distribution(name, tf.distribute.get_strategy(), hvd.size(),
                            is_chief=hvd.rank() == 0,
                            logs_throughput=hvd.rank() == 0,
                            num_workers=hvd.size(), hvd=hvd,
                            fp16_allreduce=rt.horovod.fp16_allreduce,
                            tag=f"rank{hvd.rank()}")
    if name == "parameter_server":
        strategy = _parameter_server(rt, cluster)
        return Distribution(name, strategy, strategy.num_replicas_in_sync,
                            True, True, len(cluster.jobs()["worker"]))
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
    elif name == "multi_worker_mirrored":
        strategy = _multi_worker(rt, cluster)
    else:
        raise ConfigError(f"unknown strategy {name!r}")
    return Distribution(name, strategy, strategy.num_replicas_in_sync,
                        cluster.is_chief, True, cluster.num_workers,
                        tag=f"{cluster.task_type}{cluster.task_index}")
