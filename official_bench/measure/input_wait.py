"""How long the training input pipeline kept its consumer waiting.

What is measured: the training dataset of this process (after its final
prefetch) is zipped behind a one-op dataset that stamps `tf.timestamp()`
when the consumer asks for an element; a map after the zip stamps the time
the element is handed out. tf.data's zip asks its inputs in order, so the
difference is exactly how long that request blocked on the pipeline. The
two stamps go to a host-side list through one tiny `tf.numpy_function` per
element: no device sync, no change to the step.

Who the consumer is: the strategy's iterator, which runs get_next inside the
train step (one_device, off) or in the device prefetcher that copies the
next element to each replica ahead of the step (mirrored,
multi_worker_mirrored). With that prefetcher an input-bound run shows the
prefetcher's wait, which can exceed the step's own wait by up to one step
time; a run that is not input-bound shows near zero either way. So the
fraction is an upper bound on the share of time the steps waited for input,
and an honest yes/no for "input-bound". Not measured under horovod and
parameter_server (their datasets do not pass through here:
`measures_input_wait` in config/strategies.py).

The meter, its statistics and the summary words are TensorFlow-free
(measure/wait_meter.py), shared with the JAX backend's feeds.
"""

from __future__ import annotations

from official_bench.measure.wait_meter import TRAIN_METER, InputWaitMeter
from official_bench.runtime.keras_setup import tf


def metered(dataset: tf.data.Dataset,
            meter: InputWaitMeter = TRAIN_METER) -> tf.data.Dataset:
    """`dataset` with each element's blocked time recorded in `meter`."""
    # A stateful function is never parallelised or prefetched by tf.data's
    # optimisations, so the stamp is taken when the request arrives.
    requests = tf.data.Dataset.from_tensors(0).repeat().map(
        lambda _: tf.timestamp())

    def stamp(requested, element):
        count = tf.numpy_function(meter.record,
                                  [requested, tf.timestamp()], tf.int64,
                                  stateful=True)
        with tf.control_dependencies([count]):
            return tf.nest.map_structure(tf.identity, element)

    return tf.data.Dataset.zip((requests, dataset)).map(stamp)
