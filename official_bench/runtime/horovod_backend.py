"""Horovod: one process per GPU, gradients averaged by Horovod's all-reduce.

Launch with `horovodrun -np N -H host1:G,host2:G python -m
official_bench.classifier_trainer ...`. Horovod 0.28.1 (its last release)
builds against TensorFlow 2.18 but not 2.21: scripts/install_horovod.sh
builds it. We use `horovod.tensorflow.keras`, which follows `tf.keras`;
keras_setup makes that tf-keras (Horovod's plain `horovod.keras` would import
Keras 3 and fail).

Three things differ from Horovod's Keras examples (checked against Horovod
0.28.1's source; the CPU parts are tested with horovodrun --gloo):
- GPU pinning accepts a launcher that gives each rank exactly one visible
  GPU (CUDA_VISIBLE_DEVICES per rank, MIG): that GPU is index 0, whatever
  the local rank (`gpu_for_local_rank`).
- Rank 0's variables are broadcast once before `fit`
  (`broadcast_initial_state`), not by BroadcastGlobalVariablesCallback:
  that callback has a per-batch hook and does not declare
  `_supports_tf_logs`, so tf-keras would turn every batch's logs into
  Python floats, a device-to-host sync per step for the whole run.
- With `runtime.enable_xla`, XLA compiles the forward and backward pass only;
  the all-reduce and the optimizer update run outside it
  (`install_xla_gradient_step`): HorovodAllreduce has an XLA kernel only on
  a CUDA build, for GPU devices, with HOROVOD_ENABLE_XLA_OPS=1 set before
  Horovod's import (horovod/tensorflow/xla_mpi_ops.cc).
"""

from __future__ import annotations

import hashlib
import os
from typing import List, Sequence

from absl import logging

from official_bench.config import ConfigError, RuntimeConfig
from official_bench.runtime.keras_setup import keras, tf

INSTALL_HINT = (
    "runtime.distribution_strategy 'horovod' needs Horovod, which is not "
    "importable here. Horovod 0.28.1 builds against TensorFlow 2.18 (not "
    "2.21): run `make horovod` (scripts/install_horovod.sh builds it with "
    "Gloo, and NCCL where CUDA is present, into its own venv with "
    "tensorflow 2.18.1 + tf-keras 2.18.0) and use that venv's python and "
    "horovodrun; see docs/horovod.md.")


def _set_knob_env(rt: RuntimeConfig) -> None:
    """Horovod reads its tuning knobs from the environment at hvd.init()."""
    hv = rt.horovod
    if hv.fusion_threshold_mb is not None:
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(
            int(hv.fusion_threshold_mb * 1024 * 1024))
    if hv.cycle_time_ms is not None:
        os.environ["HOROVOD_CYCLE_TIME"] = str(hv.cycle_time_ms)
    if hv.hierarchical_allreduce:
        os.environ["HOROVOD_HIERARCHICAL_ALLREDUCE"] = "1"


# ------------------------------------------------------------- GPU pinning

def gpu_for_local_rank(local_rank: int, local_size: int,
                       visible: Sequence[str]) -> int:
    """Index into `visible` (this process's GPUs) of the GPU this rank uses.

    A launcher that gives each rank its own GPU (CUDA_VISIBLE_DEVICES set per
    rank, MIG) leaves exactly one visible, while the local rank may be 3: use
    that one. Otherwise the ranks of a host share its GPUs, one each, by
    local rank.
    """
    if len(visible) == 1:
        return 0
    if 0 <= local_rank < len(visible):
        return local_rank
    raise ConfigError(
        f"Horovod local rank {local_rank} (local size {local_size}) has no "
        f"GPU: {len(visible)} visible to this process "
        f"[{', '.join(visible)}]; start at most {len(visible)} processes "
        f"per host (-H host:{len(visible)}), or give each process exactly "
        "one GPU (CUDA_VISIBLE_DEVICES per rank)")


def _pin_gpu(hvd, num_gpus: int) -> None:
    """Makes this rank's GPU the only visible one, and checks it took
    (config validation refuses runtime.num_gpus > 1 with horovod)."""
    gpus = tf.config.list_physical_devices("GPU")
    index = gpu_for_local_rank(hvd.local_rank(), hvd.local_size(),
                               [g.name for g in gpus])
    try:
        tf.config.set_visible_devices(gpus[index], "GPU")
        tf.config.experimental.set_memory_growth(gpus[index], True)
    except RuntimeError as e:
        logging.warning("TensorFlow already initialised; cannot pin GPU "
                        "%s for local rank %d: %s", gpus[index].name,
                        hvd.local_rank(), e)
    check_pinned_gpu([d.name for d in tf.config.get_visible_devices("GPU")],
                     gpus[index].name, hvd.local_rank())
    if len(gpus) == 1 and hvd.local_size() > 1:
        logging.info("Horovod local rank %d of %d uses the one GPU visible "
                     "to it (%s)", hvd.local_rank(), hvd.local_size(),
                     gpus[0].name)


def check_pinned_gpu(visible: Sequence[str], chosen: str,
                     local_rank: int) -> None:
    """After pinning, a Horovod GPU process must see exactly the GPU chosen
    for it. Once TensorFlow has initialised its devices pinning changes
    nothing (we only warn): the process would then see all GPUs (work on
    every one, ranks colliding on GPU 0) or the one an earlier call chose,
    the same for every rank."""
    if list(visible) != [chosen]:
        raise ConfigError(
            f"Horovod local rank {local_rank} should see only {chosen} after "
            f"pinning, but sees {len(visible)} GPU(s): "
            f"[{', '.join(visible)}]; TensorFlow was initialised before "
            "Horovod could pin its GPU: start a fresh process")


def init(rt: RuntimeConfig, num_gpus: int):
    """hvd.init() and pin this process's GPU (see gpu_for_local_rank)."""
    try:
        import horovod.tensorflow.keras as hvd
    except ImportError as e:
        raise ConfigError(f"{INSTALL_HINT} (import error: {e})") from e
    _set_knob_env(rt)
    hvd.init()
    if num_gpus > 0:
        _pin_gpu(hvd, num_gpus)
    logging.info("Horovod rank %d of %d (local rank %d)", hvd.rank(),
                 hvd.size(), hvd.local_rank())
    return hvd


def collectives():
    """horovod.tensorflow, for collectives called directly (allreduce,
    allgather, broadcast_variables): those of horovod.tensorflow.keras go
    through Keras 1's backend session (K.get_session), which tf_keras 2 no
    longer has, and fail inside a tf.function."""
    import horovod.tensorflow as hvd_tf
    return hvd_tf


def distributed_optimizer(hvd, optimizer, fp16_allreduce: bool):
    """Averages gradients across ranks; fp16 compression when asked."""
    compression = hvd.Compression.fp16 if fp16_allreduce else \
        hvd.Compression.none
    return hvd.DistributedOptimizer(optimizer, compression=compression)


# ------------------------------------------------- initial state, once

def build_optimizer_slots(optimizer, var_list) -> None:
    """Creates the optimizer's slot variables for `var_list` (idempotent).

    After `compile` they may not exist yet: the new tf-keras optimizer
    builds them on its first apply (`build(var_list)` does it now), the
    legacy one in `_create_all_weights(var_list)`; a LossScaleOptimizer of
    either kind passes the call to its inner optimizer.
    """
    if isinstance(optimizer, keras.optimizers.legacy.Optimizer):
        # pylint: disable-next=protected-access
        optimizer._create_all_weights(var_list)
    elif isinstance(optimizer, keras.optimizers.Optimizer):
        optimizer.build(var_list)
    else:
        raise TypeError(
            f"cannot build the slots of {type(optimizer).__name__}: expected "
            "a tf_keras.optimizers.Optimizer or "
            "tf_keras.optimizers.legacy.Optimizer")


def optimizer_variables(optimizer) -> List:
    """The optimizer's variables: `variables` is a property on the new
    tf-keras optimizer (and on Horovod's wrapper of it), a method on the
    legacy one."""
    value = optimizer.variables
    return list(value() if callable(value) else value)


def weights_digest(variables) -> str:
    """sha256 of the variables' values, to compare ranks in the logs."""
    digest = hashlib.sha256()
    for v in variables:
        digest.update(v.numpy().tobytes())
    return digest.hexdigest()


def broadcast_initial_state(hvd, model) -> None:
    """Rank 0's model and optimizer variables on every rank, before fit.

    Replaces BroadcastGlobalVariablesCallback (see the module docstring). It
    runs after any checkpoint restore, so rank 0's restored state wins. The
    digests logged before and after let a reader (and the tests) see that
    ranks started different and now start identical.
    """
    optimizer = model.optimizer
    with tf.init_scope():
        build_optimizer_slots(optimizer, model.trainable_variables)
    before = weights_digest(model.trainable_variables)
    opt_vars = optimizer_variables(optimizer)
    # horovod.tensorflow.keras does not export broadcast_variables; Horovod's
    # own callback uses the horovod.tensorflow one too.
    hvd_tf = collectives()
    hvd_tf.broadcast_variables(model.variables, root_rank=0)
    hvd_tf.broadcast_variables(opt_vars, root_rank=0)
    logging.info("Horovod rank %d: broadcast %d model and %d optimizer "
                 "variables from rank 0; trainable weights sha256 %s before, "
                 "%s after", hvd.rank(), len(model.variables), len(opt_vars),
                 before, weights_digest(model.trainable_variables))


# ------------------------------------------------------------------- XLA

def _distributed_optimizer_of(optimizer):
    """The Horovod DistributedOptimizer, also inside a LossScaleOptimizer."""
    inner = optimizer
    while not hasattr(inner, "_allreduce_grads"):
        nxt = getattr(inner, "inner_optimizer", None)
        if nxt is None or nxt is inner:
            raise TypeError(
                f"{type(optimizer).__name__} does not wrap Horovod's "
                "DistributedOptimizer; the XLA train step needs it to average "
                "gradients")
        inner = nxt
    if not hasattr(inner, "_allreduce"):
        raise TypeError(
            "this Horovod's DistributedOptimizer has no _allreduce(grads, "
            "vars) (checked against horovod 0.28.1); runtime.enable_xla with "
            "horovod needs it, or set runtime.enable_xla=false")
    return inner


def install_xla_gradient_step(model) -> None:
    """XLA for the forward and backward pass; all-reduce and update outside.

    Replaces the model's train step and turns off its whole-step
    `jit_compile` (which would put HorovodAllreduce inside XLA and fail: see
    the module docstring). Evaluation keeps a fully compiled step; it has no
    collective. The gradients are averaged by the DistributedOptimizer's own
    reduction, so compression and fusion are those of the non-XLA path, and
    before a LossScaleOptimizer checks them for inf/nan, so every rank makes
    the same skip decision.
    """
    optimizer = model.optimizer
    reducer = _distributed_optimizer_of(optimizer)
    scales = hasattr(optimizer, "get_scaled_loss")

    @tf.function(jit_compile=True, reduce_retracing=True)
    def forward_backward(x, y, sample_weight):
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(x, y, y_pred, sample_weight)
            scaled = optimizer.get_scaled_loss(loss) if scales else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        if scales:
            grads = optimizer.get_unscaled_gradients(grads)
        return y_pred, loss, grads

    def train_step(data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        y_pred, loss, grads = forward_backward(x, y, sample_weight)
        # pylint: disable=protected-access
        model._validate_target_and_loss(y, loss)
        variables = model.trainable_variables
        grads = reducer._allreduce(grads, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return model.compute_metrics(x, y, y_pred, sample_weight)

    compiled_test_step = tf.function(model.test_step, jit_compile=True,
                                     reduce_retracing=True)
    model.jit_compile = False
    model.train_step = train_step
    model.test_step = compiled_test_step
    logging.info("Horovod + XLA: the forward and backward pass are compiled "
                 "with XLA; the all-reduce and the optimizer update run "
                 "outside it")


def prepare_fit(hvd, model) -> None:
    """Everything a Horovod model needs between compile/restore and fit."""
    if model.jit_compile:
        install_xla_gradient_step(model)
    broadcast_initial_state(hvd, model)


# ------------------------------------------------------------- callbacks

class AverageMetrics(keras.callbacks.Callback):
    """Epoch metrics averaged over ranks, so every rank reports the same.

    Horovod's own MetricAverageCallback calls the standalone `keras` package
    (Keras 3 next to TF 2.18), which fails in a tf-keras process.
    """

    def __init__(self, hvd):
        super().__init__()
        self.hvd = hvd

    def on_epoch_end(self, epoch, logs=None):
        for key in sorted(logs or {}):
            value = tf.constant(float(logs[key]), tf.float32)
            logs[key] = float(self.hvd.allreduce(
                value, name=f"official_bench_metric_{key}",
                op=self.hvd.Average))


def callbacks(hvd):
    """Metrics averaged over ranks. No per-batch hook, so tf-keras keeps
    batch logs as tensors (the initial broadcast is in prepare_fit)."""
    return [AverageMetrics(hvd)]
