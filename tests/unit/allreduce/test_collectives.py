"""Counting a step's collectives from its traced graph
(official_bench/allreduce/collectives.py): small ones (latency) and large ones
(gradient packs), also inside a loop's body (steps_per_execution > 1 puts
the whole step in a While body). Traced only: no collective is executed,
so no cluster is needed. The real Keras step is counted on two workers in
tests/system/test_allreduce_bench.py::test_two_workers_on_loopback."""

from official_bench.allreduce import collectives
from official_bench.runtime.keras_setup import tf


def _reduce(x, key):
    return tf.raw_ops.CollectiveReduceV2(
        input=x, group_size=2, group_key=1, instance_key=key,
        ordering_token=[], merge_op="Add", final_op="Id")


def test_small_and_large_inside_a_loop():
    @tf.function
    def step(n):
        def body(i, x):
            grads = _reduce(tf.ones([4096]), 1)  # a gradient pack
            loss = _reduce(tf.reduce_sum(x)[None], 2)  # a metric read
            return i + 1, x + grads[:1] + loss
        _, x = tf.while_loop(lambda i, x: i < n, body,
                             (tf.constant(0), tf.zeros([1])))
        return _reduce(x, 3)  # a log sum after the loop

    graph = step.get_concrete_function(tf.TensorSpec([], tf.int32)).graph
    counts = collectives.count_ops(graph)
    assert (counts.small, counts.large) == (2, 1)
    assert counts.by_type == {"CollectiveReduceV2": 3}


def test_no_collectives():
    @tf.function
    def step(x):
        return x * 2

    graph = step.get_concrete_function(tf.TensorSpec([3])).graph
    assert collectives.count_ops(graph).as_dict() == {
        "small": 0, "large": 0, "by_type": {}}
