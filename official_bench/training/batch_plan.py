"""Batch and step arithmetic of a run, derived once from config and replicas.

TensorFlow-free: both backends plan their run with it, so a config gives
the same global batch, steps and evaluation epochs on either.
"""

from __future__ import annotations

import dataclasses
from typing import List

from official_bench.config import ConfigError, ExperimentConfig
from official_bench.config.batching import global_batch_size


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
    global_batch = global_batch_size(train_ds, num_replicas)
    steps = cfg.train.steps or train_ds.num_examples // global_batch
    if steps < 1:
        raise ConfigError(
            f"train_dataset.num_examples {train_ds.num_examples} is smaller "
            f"than one global batch of {global_batch}; set train.steps")
    eval_batch = global_batch_size(val_ds, num_replicas)
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
    return BatchPlan(num_replicas=num_replicas, global_batch=global_batch,
                     steps_per_epoch=steps, total_steps=steps * epochs,
                     eval_global_batch=eval_batch, eval_steps=eval_steps,
                     eval_epochs=eval_epochs, steps_per_loop=per_loop)
