"""Steps 1-4 of a run: runtime, strategy, batch plan, model and compile.

The trainer calls these before the data and the fit; the all-reduce
benchmark and benchmarks/ call the same functions, so they measure the very
set-up, model and train step a run would use.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any, Dict, List, Optional

from absl import logging

from official_bench import config as config_lib
from official_bench.config import ConfigError, ExperimentConfig
from official_bench.contracts.log_tree import result_file_name
from official_bench.contracts.result_json import write_run_record
from official_bench.data import factory as data_factory
from official_bench.data.fit_input import fit_input
from official_bench.host.atomic import write_text_atomic
from official_bench.host.write_errors import writing
from official_bench.measure import environment
from official_bench.models import build_model
from official_bench.runtime import cluster as cluster_lib
from official_bench.runtime import cpu_kernels
from official_bench.runtime import devices as devices_lib
from official_bench.runtime import distribute, precision
from official_bench.runtime import malloc
from official_bench.runtime.keras_setup import keras
from official_bench.training import objectives
from official_bench.training.optimizers import build_optimizer
from official_bench.training.schedules import build_schedule


@dataclasses.dataclass
class BatchPlan:
    """Batch and step arithmetic, derived once from config and strategy."""
    num_replicas: int
    global_batch: int
    steps_per_epoch: int
    total_steps: int
    eval_global_batch: int
    eval_steps: int
    eval_epochs: List[int]
    steps_per_loop: int = 1


def batch_plan(cfg: ExperimentConfig, num_replicas: int) -> BatchPlan:
    train_ds, val_ds = cfg.train_dataset, cfg.validation_dataset
    global_batch = data_factory.global_batch_size(train_ds, num_replicas)
    steps = cfg.train.steps or train_ds.num_examples // global_batch
    if steps < 1:
        raise ConfigError(
            f"train_dataset.num_examples {train_ds.num_examples} is smaller "
            f"than one global batch of {global_batch}; set train.steps")
    eval_batch = data_factory.global_batch_size(val_ds, num_replicas)
    eval_steps = cfg.evaluation.steps or max(1, val_ds.num_examples //
                                             eval_batch)
    every = cfg.evaluation.epochs_between_evals
    epochs = cfg.train.epochs
    eval_epochs = sorted({e for e in range(every, epochs + 1, every)} |
                         {epochs})
    per_loop = steps if cfg.train.set_epoch_loop else cfg.train.steps_per_loop
    log_steps = cfg.train.time_history.log_steps
    if cfg.train.set_epoch_loop and log_steps % per_loop:
        raise ConfigError(
            f"train.time_history.log_steps {log_steps} is not a multiple of "
            f"the {per_loop} steps of one loop (train.set_epoch_loop: one "
            "loop per epoch); TimeHistory can only time whole loops")
    return BatchPlan(num_replicas, global_batch, steps, steps * epochs,
                 eval_batch, eval_steps, eval_epochs, per_loop)


def _task_files(model_dir: Optional[str], dist: distribute.Distribution):
    """Chief writes result.json; other processes a file named for them."""
    if not model_dir:
        return None, None
    result = os.path.join(model_dir, result_file_name(dist.tag, dist.is_chief))
    if dist.is_chief:
        return os.path.join(model_dir, "params.yaml"), result
    return None, result


def prepare_runtime(rt: config_lib.RuntimeConfig):
    """Devices, threads and cluster, before any strategy exists (shared
    with the all-reduce benchmark so both measure the same set-up)."""
    keras.backend.clear_session()
    replica_devices = devices_lib.configure_devices(rt)
    devices_lib.configure_threads(rt)
    return replica_devices, cluster_lib.resolve_cluster(rt)


@dataclasses.dataclass
class Prepared:
    """Everything the mode functions share after set-up."""
    cfg: ExperimentConfig
    cluster: cluster_lib.Cluster
    dist: distribute.Distribution
    plan: BatchPlan
    model: Any
    dtype: str
    replica_devices: List[str]
    result_path: Optional[str]
    malloc: Dict[str, Any]

    def environment(self) -> Dict[str, Any]:
        return dict(environment.collect(
            self.cfg.runtime.distribution_strategy, self.dist.num_workers,
            self.plan.num_replicas, self.dtype,
            self.dist.placement.devices if self.dist.placement else [],
            horovod=self.dist.hvd, configured_devices=self.replica_devices),
            malloc=self.malloc,
            **cpu_kernels.record(self.cfg.runtime.cpu_kernels))

    def validation_data(self):
        return fit_input(self.dist, self.cfg.validation_dataset,
                         self.plan.eval_global_batch, False,
                         (self.cfg.runtime.seed or 0) + 1).data

    def write(self, stats, history, evaluation, extra=None
              ) -> Optional[Dict[str, Any]]:
        """Write result.json; returns its content (for the run history),
        None when this process writes no result."""
        if not self.result_path:
            return None
        record = dict({
            "config": self.cfg.as_dict(),
            "stats": stats.as_dict() if stats else None,
            "environment": self.environment(), "history": history,
            "evaluation": evaluation,
            "model": model_summary(self.model),
            "task": {"type": self.cluster.task_type,
                     "index": self.cluster.task_index, "tag": self.dist.tag,
                     "is_chief": self.dist.is_chief}}, **(extra or {}))
        with writing(self.result_path, "the run's result"):
            write_run_record(self.result_path, record)
        logging.info("official_bench: result written to %s", self.result_path)
        return record


def model_summary(model) -> Dict[str, Any]:
    """Name, size and a digest of the trainable weights.

    `parameters` counts every weight, BN's moving statistics too (ResNet-50
    at 1000 classes: 25,610,152); `trainable_parameters` only what the
    optimizer updates (25,557,032, the figure torchvision and papers give).
    Every replica must agree on the digest. BN moving statistics are left
    out: under Horovod each rank keeps its own, as in every Horovod program.
    """
    digest = hashlib.sha256()
    for w in model.trainable_weights:
        digest.update(w.numpy().tobytes())
    trainable = sum(int(w.shape.num_elements()) for w in
                    model.trainable_weights)
    return {"name": model.name, "parameters": int(model.count_params()),
            "trainable_parameters": trainable,
            "trainable_weights_sha256": digest.hexdigest()}


def setup_run(cfg: ExperimentConfig, cluster: cluster_lib.Cluster,
              replica_devices: List[str], dtype: str,
              policy: str) -> Prepared:
    """Strategy, plan, model and compile: everything before the data.

    The all-reduce benchmark and benchmarks/ call it too: they need the very
    model and train step a run would use.
    """
    rt = cfg.runtime

    # 2. Strategy.
    dist = distribute.build_distribution(rt, cluster, replica_devices)
    thresholds = malloc.restore_malloc_thresholds(
        rt.restore_malloc_thresholds)
    plan = batch_plan(cfg, dist.num_replicas)
    # The r2.3 key, derived: a new (frozen) config, recorded and returned.
    cfg = config_lib.replace_keys(cfg, {
        f"{name}.num_devices": plan.num_replicas
        for name in ("train_dataset", "validation_dataset")})
    params_path, result_path = _task_files(cfg.model_dir, dist)
    if not (params_path and cfg.mode in ("train", "train_and_eval")):
        params_path = None
    if params_path:
        with writing(params_path, "the run's configuration"):
            write_text_atomic(params_path, cfg.to_yaml())
    # One line on the console; the whole config where it is kept (the
    # log holds it only where no params.yaml is written).
    logging.info("official_bench config (mode %s, %s, %s, %d worker(s), %d "
                 "replica(s), global batch %d, %d steps, %d per loop): %s",
                 cfg.mode, rt.distribution_strategy, policy, dist.num_workers,
                 plan.num_replicas, plan.global_batch, plan.total_steps,
                 plan.steps_per_loop, params_path or "\n" + cfg.to_yaml())

    # 3. Model and 4. compile, under the strategy.
    with dist.strategy.scope():
        model = build_model(cfg, num_gpus=rt.num_gpus)
        schedule = build_schedule(cfg.model.learning_rate, plan.global_batch,
                                  plan.total_steps)
        optimizer = precision.wrap_optimizer(
            dist.wrap_optimizer(build_optimizer(cfg.model.optimizer,
                                                schedule)),
            dtype, rt.loss_scale)
        model.compile(optimizer=optimizer, loss=objectives.build_loss(cfg),
                      metrics=objectives.build_metrics(cfg),
                      jit_compile=rt.enable_xla, run_eagerly=rt.run_eagerly,
                      steps_per_execution=plan.steps_per_loop)
        if dist.traits.step_logs_already_global:
            # tf_keras' "auto" sums each step's logs across workers, but
            # metric results are already global: values x workers, and three
            # more collectives per step. "first" is what TF 2.3's Keras did.
            model.distribute_reduction_method = "first"
    return Prepared(cfg, cluster, dist, plan, model, dtype, replica_devices,
                result_path, thresholds)
