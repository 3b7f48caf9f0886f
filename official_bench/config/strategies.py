"""What each `runtime.distribution_strategy` can do, written once.

The config checks, the trainer, the input wiring, the placement check, the
doctor and the benchmarks ask these questions instead of comparing strategy
names, so a new strategy is one row here (config/schema.STRATEGIES is this
table's keys) and the reason for each difference is stated
where it is decided. TensorFlow-free: it only describes.
"""

from __future__ import annotations

import dataclasses
from typing import Dict

from official_bench.config.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class StrategyTraits:
    """One strategy's answers to the questions the run asks of it."""
    name: str
    # Runs under tf.distribute's default strategy: it has no worker_devices
    # and its distribute_datasets_from_function hands Keras the plain
    # dataset, whose elements stay on the host (data/device_stage.py).
    default_strategy: bool
    # Each process builds its pipeline from its own rank and size instead
    # of asking the strategy to distribute it (Horovod).
    input_per_process: bool
    # Keras gets a DatasetCreator that the coordinator sends to the remote
    # workers (ParameterServerStrategy builds their datasets there).
    input_via_dataset_creator: bool
    # The training input's wait is measured (measure/input_wait.py); Horovod's
    # and the parameter server's pipelines are built without the meter.
    measures_input_wait: bool
    # Gradients are all-reduced by Horovod inside the optimizer, not by
    # the strategy (which is the default, single-replica one).
    horovod_allreduce: bool
    # Placement: one process per GPU (Horovod) instead of one replica per
    # GPU of the worker.
    one_process_per_gpu: bool
    # Without GPUs, runtime.cpu_devices asks for that many CPU replicas.
    cpu_replicas_from_config: bool
    # Without GPUs the strategy uses one CPU replica per worker whatever
    # cpu_devices says (the placement error tells the user to start more
    # workers instead).
    one_cpu_replica_per_worker: bool
    # The replicas live in remote worker tasks; the devices are read from
    # the cluster's device list, not from the strategy.
    remote_replicas: bool
    # Saving is collective: every worker runs the save (non-chiefs to a
    # scratch directory), or a peer blocks. False: only the chief saves.
    saves_on_every_worker: bool
    # Only the chief runs the trainer; the worker and ps tasks of the
    # cluster serve its coordinator (runtime/ps_server.py) and are told
    # when the run finished.
    tasks_serve_coordinator: bool
    # Keras' default ("auto") reduction of a step's logs would sum metric
    # results that the strategy already made global, across workers
    # (tf_keras reduce_per_replica with a multi-worker collective strategy).
    step_logs_already_global: bool
    # The train step's all-reduces are tf.distribute collective ops in its
    # traced graph (official_bench/allreduce/collectives.py counts them);
    # Horovod's run inside its optimizer's own ops, the parameter server
    # has none.
    collectives_in_step_graph: bool
    # Trains on a cluster of peer worker tasks, one process each, told the
    # cluster by runtime.worker_hosts and task_index; they all-reduce with
    # tf.distribute's cross-worker collectives (runtime.all_reduce_alg picks
    # the implementation: auto, ring or nccl) and each writes its own result.
    peer_workers: bool
    # runtime.all_reduce_alg (nccl, hierarchical_copy) and num_packs pick
    # the cross-device ops between the replicas on the worker's GPUs; its
    # CPU replicas reduce on one device, where neither applies (runtime/
    # distribute._mirrored_cross_device_ops; config/rules.reduction).
    gpu_cross_device_ops: bool
    # One replica on each device the process configures (runtime/devices
    # .configure_devices: the num_gpus GPUs, else cpu_devices CPUs), so its
    # input feeds that many (data/input_bench.py); one_device, off and
    # horovod feed one, parameter_server's replicas are remote.
    replica_per_local_device: bool
    # Keras' jit_compile (runtime.enable_xla) can compile the train step:
    # not for parameter_server, whose variables live on the ps tasks, out
    # of reach of a step XLA compiled for the worker's device
    # (config/rules.xla_refusal says why to the user).
    jit_compiles_step: bool

    @property
    def keeps_all_reduce_alg(self) -> bool:
        """runtime.all_reduce_alg may be set: mirrored's GPU cross-device
        ops and the peer workers' collectives read it; Horovod keeps the
        one LAUNCHER=horovod inherits from the multi-node YAMLs."""
        return self.gpu_cross_device_ops or self.peer_workers or \
            self.horovod_allreduce


def _traits(name: str, **overrides) -> StrategyTraits:
    """A tf.distribute strategy that distributes its own input (the usual
    case); `overrides` state how `name` differs."""
    base = dict(default_strategy=False, input_per_process=False,
                input_via_dataset_creator=False, measures_input_wait=True,
                horovod_allreduce=False, one_process_per_gpu=False,
                cpu_replicas_from_config=False,
                one_cpu_replica_per_worker=False, remote_replicas=False,
                saves_on_every_worker=True, tasks_serve_coordinator=False,
                step_logs_already_global=False,
                collectives_in_step_graph=True, peer_workers=False,
                gpu_cross_device_ops=False, replica_per_local_device=False,
                jit_compiles_step=True)
    unknown = set(overrides) - set(base)
    if unknown:
        raise TypeError(f"unknown strategy traits {sorted(unknown)}")
    base.update(overrides)
    return StrategyTraits(name=name, **base)


TRAITS: Dict[str, StrategyTraits] = {t.name: t for t in (
    _traits("off", default_strategy=True),
    _traits("one_device"),
    _traits("mirrored", cpu_replicas_from_config=True,
            gpu_cross_device_ops=True, replica_per_local_device=True),
    _traits("multi_worker_mirrored", cpu_replicas_from_config=True,
            one_cpu_replica_per_worker=True, step_logs_already_global=True,
            peer_workers=True, replica_per_local_device=True),
    _traits("horovod", default_strategy=True, input_per_process=True,
            measures_input_wait=False, horovod_allreduce=True,
            one_process_per_gpu=True, saves_on_every_worker=False,
            collectives_in_step_graph=False),
    _traits("parameter_server", input_via_dataset_creator=True,
            measures_input_wait=False, remote_replicas=True,
            tasks_serve_coordinator=True, collectives_in_step_graph=False,
            jit_compiles_step=False),
)}


def traits(name: str) -> StrategyTraits:
    """The traits of `name`; a ConfigError names the valid strategies."""
    try:
        return TRAITS[name]
    except KeyError:
        raise ConfigError(
            f"runtime.distribution_strategy {name!r} is not one of "
            f"{', '.join(TRAITS)}") from None
