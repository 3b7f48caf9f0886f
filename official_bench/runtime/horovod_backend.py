"""Horovod: one process per GPU, gradients averaged by Horovod's all-reduce.

Launch with `horovodrun -np N -H host1:G,host2:G python -m
official_bench.classifier_trainer ...`. Horovod 0.28.1 (its last release)
builds against TensorFlow 2.18 but not 2.21: scripts/install_horovod.sh
builds it. We use `horovod.tensorflow.keras`, which follows `tf.keras`;
keras_setup makes that tf-keras (Horovod's plain `horovod.keras` would import
Keras 3 and fail).
"""

from __future__ import annotations

import os

from absl import logging

from official_bench.config import ConfigError, RuntimeConfig
from official_bench.runtime.keras_setup import keras, tf

INSTALL_HINT = (
    "runtime.distribution_strategy 'horovod' needs Horovod, which is not "
    "importable here. Horovod 0.28.1 builds against TensorFlow 2.18 (not "
    "2.21): run `make horovod` (scripts/install_horovod.sh builds it with "
    "Gloo, and NCCL where CUDA is present, into its own venv with "
    "tensorflow 2.18.1 + tf-keras 2.18.0) and use that venv's python and "
    "horovodrun; see README 'Horovod'.")


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


def init(rt: RuntimeConfig, num_gpus: int):
    """hvd.init() and pin this process's GPU by local rank."""
    try:
        import horovod.tensorflow.keras as hvd
    except ImportError as e:
        raise ConfigError(f"{INSTALL_HINT} (import error: {e})") from e
    _set_knob_env(rt)
    hvd.init()
    gpus = tf.config.list_physical_devices("GPU")
    if num_gpus > 0:
        if hvd.local_rank() >= len(gpus):
            raise ConfigError(
                f"Horovod local rank {hvd.local_rank()} has no GPU: "
                f"{len(gpus)} visible on this host; start at most "
                f"{len(gpus)} processes per host (-H host:{len(gpus)})")
        try:
            tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")
            tf.config.experimental.set_memory_growth(
                gpus[hvd.local_rank()], True)
        except RuntimeError:
            logging.warning("GPU already initialised; cannot pin local rank "
                            "%d", hvd.local_rank())
    logging.info("Horovod rank %d of %d (local rank %d)", hvd.rank(),
                 hvd.size(), hvd.local_rank())
    return hvd


def distributed_optimizer(hvd, optimizer, fp16_allreduce: bool):
    """Averages gradients across ranks; fp16 compression when asked."""
    compression = hvd.Compression.fp16 if fp16_allreduce else \
        hvd.Compression.none
    return hvd.DistributedOptimizer(optimizer, compression=compression)


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
    """Rank 0's initial weights everywhere; metrics averaged over ranks."""
    return [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            AverageMetrics(hvd)]
