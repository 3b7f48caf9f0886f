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

fraction = sum of waits / host time between the first counted and the
last hand-out, after leaving out the first `skip` elements (warm-up: the
first element waits for pipeline start-up and tracing).
"""

from __future__ import annotations

import threading
from typing import Dict, List, Optional

import numpy as np

from official_bench.runtime.keras_setup import tf

INPUT_BOUND_FRACTION = 0.10


class InputWaitMeter:
    """(request, hand-out) host timestamps of every element, thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._stamps: List[tuple] = []

    def reset(self) -> None:
        with self._lock:
            self._stamps = []

    def record(self, requested, handed_out):
        with self._lock:
            self._stamps.append((float(requested), float(handed_out)))
        return np.int64(len(self._stamps))

    def summary(self, skip: int) -> Optional[Dict]:
        """Wait statistics past the first `skip` elements, or None when
        fewer than two elements are left to measure."""
        with self._lock:
            stamps = self._stamps[skip:]
        if len(stamps) < 2:
            return None
        waits = [out - req for req, out in stamps]
        span = stamps[-1][1] - stamps[0][1]
        total = sum(waits[1:])  # waits inside the span
        return {
            "wait_seconds": total,
            "span_seconds": span,
            "fraction": total / span if span > 0 else 0.0,
            "mean_wait_ms": 1000 * total / (len(stamps) - 1),
            "elements": len(stamps),
            "skipped_elements": skip,
            "measure": "host time the training pipeline's consumer was "
                       "blocked in get_next / host time (upper bound on "
                       "the steps' input wait; see measure/input_wait.py)",
        }


TRAIN_METER = InputWaitMeter()  # this process's training pipeline


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


def note(summary: Optional[Dict]) -> str:
    """The summary line's input-wait part."""
    if not summary:
        return ""
    return (f", input wait {100 * summary['fraction']:.1f}% "
            f"({summary['mean_wait_ms']:.1f} ms per element)")


def is_input_bound(summary: Optional[Dict]) -> bool:
    return bool(summary) and summary["fraction"] > INPUT_BOUND_FRACTION
