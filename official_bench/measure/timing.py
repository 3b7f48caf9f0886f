"""Throughput measurement: the TimeHistory log line and per-run statistics.

The log line is a contract (DLPerf's tools parse it), defined in
official_bench.contracts.throughput:

    TimeHistory: {seconds:.2f} seconds, {examples_per_second:.2f} examples/second between steps {a} and {b}

examples/second counts the GLOBAL batch (all workers and replicas). Each
interval ends when step b's results are ready: we read the step's loss,
which waits for the device, so asynchronous dispatch cannot make an
interval look shorter than it was. Time spent in evaluation between epochs
is left out of the interval it falls in.
"""  # noqa: E501

from __future__ import annotations

# The line and Interval are a contract shared with the extractor (and
# DLPerf): contracts/throughput.py; the statistics are measure/stats.py's,
# the interval clock measure/intervals.py's (both TensorFlow-free, shared
# with the JAX backend).
from official_bench.measure.intervals import IntervalClock
from official_bench.runtime.keras_setup import keras


class TimeHistory(IntervalClock, keras.callbacks.Callback):
    """The interval clock (measure/intervals.py) as a tf-keras callback:
    logs the TimeHistory line every `log_steps` steps and shows progress.

    Keeps tensors in `logs` (no per-step device sync); it syncs only when it
    logs, by reading the loss of the step that closes an interval.
    """

    def __init__(self, *args, **kwargs):
        keras.callbacks.Callback.__init__(self)
        IntervalClock.__init__(self, *args, **kwargs)
        self._supports_tf_logs = True

    def _sync(self, logs) -> bool:
        """Waits for the step by reading its loss back to the host.

        Under a parameter-server strategy steps run on remote workers: wait
        for every scheduled step through the model's ClusterCoordinator.
        """
        coordinator = getattr(self.model, "_cluster_coordinator", None)
        if coordinator is not None:
            coordinator.join()
            if hasattr(logs, "fetch"):  # a RemoteValue of the logs dict
                logs = logs.fetch()
        return IntervalClock._sync(self, logs)
