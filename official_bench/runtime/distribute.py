"""`runtime.distribution_strategy` -> a tf.distribute strategy."""

from __future__ import annotations

from typing import List

from absl import logging

from official_bench.config import ConfigError, RuntimeConfig
from official_bench.runtime.cluster import Cluster, check_own_port
from official_bench.runtime.watchdog import StartupWatchdog
from official_bench.runtime.keras_setup import tf

NOT_YET = {
    "horovod": "the Horovod backend is not available yet (see the open "
               "issue 'Horovod backend and the parameter-server strategy')",
    "parameter_server": "the parameter-server strategy is not available yet "
                        "(see the open issue 'Horovod backend and the "
                        "parameter-server strategy')",
}


def _mirrored_cross_device_ops(rt: RuntimeConfig, devices: List[str]):
    """nccl / hierarchical_copy with num_packs; CPU replicas reduce on one."""
    on_gpu = devices[0].startswith("/gpu")
    alg = rt.all_reduce_alg or ("nccl" if on_gpu else None)
    if alg is None:
        if rt.num_packs != 1:
            raise ConfigError(
                f"runtime.num_packs={rt.num_packs} applies to the nccl and "
                "hierarchical_copy all-reduce on GPUs; CPU replicas reduce "
                "on one device")
        return tf.distribute.ReductionToOneDevice()
    if not on_gpu:
        raise ConfigError(f"runtime.all_reduce_alg {alg!r} needs GPUs "
                          "(runtime.num_gpus > 0)")
    if alg == "nccl":
        return tf.distribute.NcclAllReduce(num_packs=rt.num_packs)
    return tf.distribute.HierarchicalCopyAllReduce(num_packs=rt.num_packs)


def _collective_implementation(rt: RuntimeConfig):
    impl = tf.distribute.experimental.CommunicationImplementation
    return {None: impl.AUTO, "auto": impl.AUTO, "ring": impl.RING,
            "nccl": impl.NCCL}[rt.all_reduce_alg]


def build_strategy(rt: RuntimeConfig, cluster: Cluster,
                   devices: List[str]) -> tf.distribute.Strategy:
    """Builds the strategy; multi-worker start-up is bounded by a deadline."""
    name = rt.distribution_strategy
    if name in NOT_YET:
        raise ConfigError(f"runtime.distribution_strategy {name!r}: "
                          f"{NOT_YET[name]}")
    if cluster.num_workers > 1 and name != "multi_worker_mirrored":
        raise ConfigError(
            f"{cluster.num_workers} workers are configured ({cluster.source})"
            f" but runtime.distribution_strategy is {name!r}; use "
            "multi_worker_mirrored")
    if name == "off":
        return tf.distribute.get_strategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(devices[0])
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(
            devices=devices,
            cross_device_ops=_mirrored_cross_device_ops(rt, devices))
    if name == "multi_worker_mirrored":
        if rt.num_packs != 1:
            raise ConfigError("runtime.num_packs applies to mirrored only; "
                              "multi_worker_mirrored packs by itself")
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=_collective_implementation(rt),
            timeout_seconds=rt.collective_timeout_seconds)
        if cluster.num_workers == 1:
            return tf.distribute.MultiWorkerMirroredStrategy(
                communication_options=options)
        check_own_port(cluster)
        logging.info("Joining %d workers as %s %d (%s); waiting up to %.0f s "
                     "for peers", cluster.num_workers, cluster.task_type,
                     cluster.task_index, cluster.address,
                     rt.peer_timeout_seconds)
        with StartupWatchdog(cluster.describe(), cluster.peers(),
                             rt.peer_timeout_seconds):
            strategy = tf.distribute.MultiWorkerMirroredStrategy(
                cluster_resolver=cluster.cluster_resolver(),
                communication_options=options)
            # The first collective is where a missing peer would block.
            strategy.reduce(tf.distribute.ReduceOp.SUM,
                            strategy.run(lambda: tf.constant(1.0)), axis=None)
        return strategy
    raise ConfigError(f"unknown strategy {name!r}")
