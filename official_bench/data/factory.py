"""`dataset.builder` -> a per-replica tf.data.Dataset for an InputContext."""

from __future__ import annotations

from typing import Callable, Dict, Optional

from official_bench.config import DatasetConfig
from official_bench.data import device_stage
from official_bench.data.feeds.python_source import python_dataset
from official_bench.data.feeds.service_feed import service_dataset
from official_bench.data.feeds.zmq_feed import zmq_dataset
from official_bench.data.records.pipeline import records_dataset
from official_bench.data.records.tfds import tfds_dataset
from official_bench.data.synthetic import synthetic_dataset
from official_bench.measure import input_wait, wait_meter
from official_bench.runtime.keras_setup import tf


def _synthetic(ds: DatasetConfig, ctx: tf.distribute.InputContext,
               batch_size: int, is_training: bool, seed: int):
    return synthetic_dataset(ds, batch_size, ctx.input_pipeline_id, seed)


# builder name -> fn(ds_config, input_context, per_replica_batch,
#                    is_training, seed) -> batched tf.data.Dataset
BUILDERS: Dict[str, Callable] = {
    "synthetic": _synthetic,
    "records": records_dataset,  # data/records/pipeline.py
    "tfds": tfds_dataset,  # data/records/tfds.py
    "python": python_dataset,  # data/feeds/python_source.py
    "zmq": zmq_dataset,  # data/feeds/zmq_feed.py (pyzmq imported when used)
    "service": service_dataset,  # data/feeds/service_feed.py (tf.data service)
}


def per_replica_dataset(ds: DatasetConfig, ctx: tf.distribute.InputContext,
                        global_batch: int, is_training: bool,
                        seed: int = 0,
                        num_private_threads: Optional[int] = None,
                        meter: Optional[wait_meter.InputWaitMeter] = None
                        ) -> tf.data.Dataset:
    """One replica's batches; every builder is reached through here.

    `num_private_threads` (runtime.dataset_num_private_threads) gives the
    pipeline its own thread pool of that size instead of the shared one.
    `meter` records how long each request for an element blocked
    (measure/input_wait.py).
    """
    batch = ctx.get_per_replica_batch_size(global_batch)
    dataset = BUILDERS[ds.builder](ds, ctx, batch, is_training, seed)
    if num_private_threads:
        options = tf.data.Options()
        options.threading.private_threadpool_size = num_private_threads
        dataset = dataset.with_options(options)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    if meter is not None:
        dataset = input_wait.metered(dataset, meter)
    return dataset


def pipeline_fn(ds: DatasetConfig, global_batch: int, is_training: bool,
                seed: int = 0, num_private_threads: Optional[int] = None,
                meter: Optional[wait_meter.InputWaitMeter] = None,
                stage: Optional[str] = None
                ) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    """One input pipeline as a function of its InputContext, for the
    distribution to call (each worker and replica builds its own pipeline,
    no central split). `stage`: a device to prefetch onto last, after the
    meter (data/device_stage.py), for the strategies whose iterator does
    not stage batches itself.
    """
    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = per_replica_dataset(ds, ctx, global_batch, is_training,
                                      seed, num_private_threads, meter)
        return device_stage.prefetch_to(dataset, stage) if stage else dataset
    return dataset_fn
