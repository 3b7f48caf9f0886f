"""Steps 1-4 of a run: runtime, strategy, batch plan, model and compile.

The trainer calls these before the data and the fit; the all-reduce
benchmark and benchmarks/ call the same functions, so they measure the very
set-up, model and train step a run would use.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from absl import logging

from official_bench import config as config_lib
from official_bench.config import ExperimentConfig
from official_bench.data.fit_input import fit_input
from official_bench.data.records import file_check, set_counts
from official_bench.host.atomic import write_text_atomic
from official_bench.host.write_errors import writing
from official_bench.measure import environment
from official_bench.models import build_model
from official_bench.models.device_normalize import model_input
from official_bench.runtime import (
    cluster as cluster_lib,
    cpu_kernels,
    devices as devices_lib,
    distribute,
    malloc,
    precision,
)
from official_bench.runtime.keras_setup import keras
from official_bench.training import objectives, run_record
from official_bench.training.batch_plan import BatchPlan, batch_plan
from official_bench.training.optimizers import build_optimizer
from official_bench.training.run_record import model_summary
from official_bench.training.schedules import build_schedule


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
    # Where the config goes (None: not written by this process or mode).
    params_path: Optional[str] = None
    # A remote validation set's framing check, answered after the
    # evaluation (validation_data; local files are answered before it).
    validation_check: Optional[Any] = None

    def write_params(self) -> None:
        """model_dir/params.yaml: by setup_run, or for a run that resumes
        by tf_trainer._resume once its checkpoint is accepted (a refused
        resume must not replace the config the checkpoint was trained
        with, which its error tells the user to resume with)."""
        if self.params_path:
            with writing(self.params_path, "the run's configuration"):
                write_text_atomic(self.params_path, self.cfg.to_yaml())

    def environment(self) -> Dict[str, Any]:
        return dict(environment.collect(
            self.cfg.runtime.distribution_strategy, self.dist.num_workers,
            self.plan.num_replicas, self.dtype,
            self.dist.placement.devices if self.dist.placement else [],
            horovod=self.dist.hvd, configured_devices=self.replica_devices),
            malloc=self.malloc,
            **cpu_kernels.record(self.cfg.runtime.cpu_kernels, self.dtype,
                                 self.cfg.runtime.num_gpus))

    def validation_data(self):
        # An evaluation the records cannot fill is refused, as on JAX, not
        # cut short (Keras stops at the end of the data and reports it).
        ds = self.cfg.validation_dataset
        set_counts.check_eval_pass(ds, self.plan.eval_global_batch,
                                   self.plan.eval_steps)
        data = fit_input(self.dist, ds, self.plan.eval_global_batch, False,
                         (self.cfg.runtime.seed or 0) + 1)
        # A truncated or corrupt validation file stops the run now, before
        # the training it would end after (or is counted, skipped), as on
        # JAX (host_feed.check_eval_pass): an evaluation that stops short
        # of the damage would not see it at all. Remote files (a read per
        # record) are answered after the evaluation (finish_validation).
        check = data.file_check
        if check is not None and not any("://" in f for f in check.files):
            file_check.finish(check, ds)
        else:
            self.validation_check = check
        return data.data

    def finish_validation(self) -> None:
        """After the evaluation: a remote validation set's framing check
        answered (validation_data answered a local one before it)."""
        file_check.finish(self.validation_check,
                          self.cfg.validation_dataset)

    def task(self) -> Dict[str, Any]:
        """result.json's `task`: which process of the cluster wrote it."""
        return {"type": self.cluster.task_type,
                "index": self.cluster.task_index, "tag": self.dist.tag,
                "is_chief": self.dist.is_chief}

    def write(self, stats, history, evaluation, extra=None
              ) -> Optional[Dict[str, Any]]:
        """Write result.json; returns its content, None when this process
        writes no result."""
        if not self.result_path:
            return None
        return run_record.write_result(
            self.result_path, self.cfg, stats=stats,
            environment=self.environment(), history=history,
            evaluation=evaluation, model=model_summary(self.model),
            task=self.task(), extra=extra)


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
    params_path, result_path = run_record.task_files(
        cfg.model_dir, dist.tag, dist.is_chief)
    if not (params_path and cfg.mode in ("train", "train_and_eval")):
        params_path = None
    # One line on the console; the whole config where it is kept (the
    # log holds it only where no params.yaml is written).
    logging.info("official_bench config (mode %s, %s, %s, %d worker(s), %d "
                 "replica(s), global batch %d, %d steps, %d per loop): %s",
                 cfg.mode, rt.distribution_strategy, policy, dist.num_workers,
                 plan.num_replicas, plan.global_batch, plan.total_steps,
                 plan.steps_per_loop, params_path or "\n" + cfg.to_yaml())

    # 3. Model and 4. compile, under the strategy.
    with dist.strategy.scope():
        input_dtype, input_layer = model_input(cfg.train_dataset)
        model = build_model(cfg, num_gpus=rt.num_gpus, keras=keras,
                            input_dtype=input_dtype, input_layer=input_layer)
        schedule = build_schedule(cfg.model.learning_rate, plan.global_batch,
                                  plan.total_steps)
        optimizer = precision.wrap_optimizer(
            dist.wrap_optimizer(build_optimizer(cfg.model.optimizer,
                                                schedule, keras)),
            dtype, rt.loss_scale)
        model.compile(optimizer=optimizer,
                      loss=objectives.build_loss(cfg, keras),
                      metrics=objectives.build_metrics(cfg, keras),
                      jit_compile=rt.enable_xla, run_eagerly=rt.run_eagerly,
                      steps_per_execution=plan.steps_per_loop)
        if dist.traits.step_logs_already_global:
            # tf_keras' "auto" sums each step's logs across workers, but
            # metric results are already global: values x workers, and three
            # more collectives per step. "first" is what TF 2.3's Keras did.
            model.distribute_reduction_method = "first"
    prepared = Prepared(cfg, cluster, dist, plan, model, dtype,
                        replica_devices, result_path, thresholds, params_path)
    if not cfg.train.resume_checkpoint:
        prepared.write_params()
    return prepared
