"""`synthetic_location: device`: each replica's batch lives on its device.

With `host` (data/synthetic.py) the synthetic batch is a tf.data element
that the strategy's iterator copies to every replica's device each step.
With `device` the batch is made once, on each replica's own device, and
every step reads it there: no host-to-device copy per step (docs/data.md).

Why this way (TensorFlow 2.21 / tf-keras 2.21 source):
- A tf.data element cannot stay on a device between steps:
  `distribute_datasets_from_function` stages every element onto the replica
  devices through a MultiDeviceIterator, one copy per element, and
  `experimental_distribute_values_from_function` does not place values on
  the replica devices (MirroredStrategy calls `value_fn` with no device
  scope), so its tensors would be copied at each use.
- So the batch is a pair of non-trainable `tf.Variable`s created under the
  strategy's scope with `synchronization=ON_READ`: one component per replica
  on its device (as Keras metrics have), and reading it inside the replica
  function returns that replica's own (under the default strategy and
  one_device: one ordinary variable). Each replica fills its component once
  from its own random stream (global replica id), so replicas differ.
- Keras `fit` needs an iterable: it gets a dataset of one int32 scalar per
  step, and `train_step` is wrapped to drop it and pass the resident
  (images, labels) to the step it had (Keras's own, or Horovod's XLA step);
  that closure holds the variables, so they are in no checkpoint, SavedModel
  or weight digest. parameter_server is rejected (config.py).
"""

from __future__ import annotations

from typing import Optional

from official_bench.config import DatasetConfig
from official_bench.data.synthetic import synthetic_batch
from official_bench.measure import input_wait, wait_meter
from official_bench.runtime.device_prefetch import without_autotune
from official_bench.runtime.keras_setup import tf

TOKEN_DTYPE = tf.int32


def token_dataset() -> tf.data.Dataset:
    """What Keras iterates with a resident batch: one int32 0 per step."""
    return without_autotune(tf.data.Dataset.from_tensors(
        tf.constant(0, TOKEN_DTYPE)).repeat())


def _resident_variable(strategy, shape, dtype, name: str) -> tf.Variable:
    """A per-replica (ON_READ) variable: one component on each replica's
    device, read as the local one inside a replica function."""
    with strategy.scope():
        return tf.Variable(
            lambda: tf.zeros(shape, dtype), trainable=False, name=name,
            synchronization=tf.VariableSynchronization.ON_READ,
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


class ResidentBatch:
    """One synthetic batch per replica, on its device, for every step."""

    def __init__(self, strategy, ds: DatasetConfig, batch_size: int,
                 seed: int = 0, stream_offset: int = 0):
        """`batch_size` per replica; replica r's random stream is
        stream_offset + r (Horovod passes its rank: each process is one
        replica of the default strategy)."""
        self.strategy = strategy
        self.batch_size = batch_size
        self.stream_offset = stream_offset
        images, labels = synthetic_batch(ds, 1, 0, seed)  # dtypes, shapes
        self.images = _resident_variable(
            strategy, (self.batch_size,) + tuple(images.shape[1:]),
            images.dtype, "resident_images")
        self.labels = _resident_variable(
            strategy, (self.batch_size,) + tuple(labels.shape[1:]),
            labels.dtype, "resident_labels")
        self._fill(ds, seed)

    def _fill(self, ds: DatasetConfig, seed: int) -> None:
        """Each replica writes its own batch on its own device, once."""
        batch = self.batch_size

        def fill_replica():
            ctx = tf.distribute.get_replica_context()
            images, labels = synthetic_batch(
                ds, batch, ctx.replica_id_in_sync_group + self.stream_offset,
                seed)
            self.images.assign(images)
            self.labels.assign(labels)

        tf.function(lambda: self.strategy.run(fill_replica))()

    def components(self):
        """(images, labels) component variables, one pair per local
        replica, in replica order (for checks and tests)."""
        local = self.strategy.experimental_local_results
        return list(zip(local(self.images), local(self.labels)))

    def dataset_fn(self, meter: Optional[wait_meter.InputWaitMeter] = None):
        """The token feed as a function of the InputContext, distributed
        like any training input (metered: its wait is the honest "no
        input" near zero). The caller resets the meter."""
        def per_replica(_ctx):
            ds = token_dataset()
            return input_wait.metered(ds, meter) if meter is not None else ds
        return per_replica

    def attach(self, model) -> None:
        """Wraps `model.train_step` to train on the resident batch.

        The token Keras hands in is dropped; inside the replica function
        the ON_READ variables read as this replica's components.
        """
        inner = model.train_step
        images, labels = self.images, self.labels

        def train_step(token):
            del token  # the 4-byte per-step feed; the batch is resident
            return inner((images.value(), labels.value()))
        model.train_step = train_step
