"""Prefetch to the device where the strategy does not stage batches itself.

mirrored, multi_worker_mirrored and one_device iterate their input through
a MultiDeviceIterator that already copies the next element onto each
replica's device while the step runs (tensorflow/python/distribute/
input_lib.py: `_should_use_multi_device_iterator` is true for the default
InputOptions, and OneDeviceStrategy goes through the same
`get_distributed_datasets_from_function`). `off` and `horovod` run under
the default strategy, whose `distribute_datasets_from_function` hands
Keras the plain dataset: its elements stay on the host and the step's
first op copies them, with nothing overlapping that copy. For those two
(`default_strategy` in config/strategies.py; `Distribution.stage_device`
names the device) the pipeline ends in
`tf.data.experimental.prefetch_to_device`: a
copy_to_device stage plus a prefetch buffer on the device, so the copy of
batch n+1 overlaps step n. It must be the last transformation (TensorFlow's
documentation of prefetch_to_device), so it comes after the input-wait
meter.

On a CPU replica the stage copies nothing (the element already is in
host memory) and costs nothing measurable here (a 32x224x224x3 float32
batch: 2.0 vs 2.2 ms per element with and without it, within the noise of
this shared machine), so it is kept there too: CPU runs exercise the same
pipeline as GPU runs.
"""

from __future__ import annotations

from absl import logging

from official_bench.runtime.keras_setup import tf

BUFFER = 1  # batches held on the device, as the MultiDeviceIterator does


def prefetch_to(dataset: tf.data.Dataset, device: str) -> tf.data.Dataset:
    """`dataset` with its elements copied to and buffered on `device`.

    Guard (not testable without a GPU): tf-keras asks a plain dataset for
    its cardinality every epoch (DataHandler.should_recreate_iterator), and
    DatasetCardinality has a CPU kernel only, while the staged dataset's
    handle lives on `device`; TensorFlow issue 34112 shows variant copies
    of datasets failing across devices. So the staged dataset is asked
    once here; if that fails, the run goes on unstaged with a warning
    naming the error, instead of failing inside fit.
    """
    staged = dataset.apply(tf.data.experimental.prefetch_to_device(
        device, buffer_size=BUFFER))
    try:
        staged.cardinality().numpy()
    except (tf.errors.OpError, RuntimeError, ValueError) as e:
        logging.warning(
            "official_bench: prefetch to %s is not usable here (%s: %s); "
            "the input stays on the host and each step copies its batch",
            device, type(e).__name__, str(e).splitlines()[0][:200])
        return dataset
    return staged
