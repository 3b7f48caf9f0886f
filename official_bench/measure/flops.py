"""The TensorFlow backend's FLOP count: layer shapes, checked by TensorFlow.

The count from the model's layer shapes is measure/layer_flops.py's
(TensorFlow-free, shared with the JAX backend); here it is made with
tf-keras, and TensorFlow's own count is the check: the profiler's
float_operation statistics of the forward pass traced at batch 1 (registered
per op: Conv2D, MatMul, BiasAdd, adds...). Tracing ResNet-50 takes about half a
second on this machine, once, before training; it never runs a step.
"""

from __future__ import annotations

from typing import Optional

from absl import logging

from official_bench.measure import layer_flops
from official_bench.measure.layer_flops import ForwardCount
from official_bench.measure.mfu import ModelFlops
from official_bench.runtime.keras_setup import keras, tf


def count_forward(model) -> ForwardCount:
    """Forward multiply-adds per image of a tf-keras model
    (layer_flops.count_forward)."""
    return layer_flops.count_forward(model, keras)


def layer_macs(layer, input_shape, output_shape) -> Optional[int]:
    """One call's multiply-adds per image of a tf-keras layer."""
    return layer_flops.layer_macs(layer, input_shape, output_shape, keras)


def model_flops(model, tf_check: bool = True):
    """measure/mfu.ModelFlops of a tf-keras model, checked against
    TensorFlow's profiler count (`tf_check`)."""
    return ModelFlops.of(model, keras,
                         cross_check=tf_cost_analysis if tf_check else None)


def tf_cost_analysis(model) -> Optional[float]:
    """TensorFlow's FLOPs of one image's forward pass (profiler
    float_operation on the traced graph), in GFLOP; None when the model
    cannot be traced at batch 1 or the profiler is unavailable."""
    try:
        from tensorflow.python.profiler import model_analyzer, option_builder
        from tensorflow.python.util import deprecation
    except ImportError:
        return None
    if len(model.inputs or []) != 1:
        return None
    shape = (1,) + tuple(model.inputs[0].shape[1:])
    if None in shape:
        return None
    spec = tf.TensorSpec(shape, model.inputs[0].dtype)
    try:
        graph = tf.function(lambda x: model(x, training=False)) \
            .get_concrete_function(spec).graph
        builder = option_builder.ProfileOptionBuilder
        options = builder(builder.float_operation()).with_empty_output() \
            .build()
        with deprecation.silence():
            profile = model_analyzer.profile(graph=graph, options=options)
    except Exception as e:  # a check: never worth failing a run for
        logging.info("official_bench: TensorFlow's FLOP count unavailable "
                     "(%s: %s)", type(e).__name__, e)
        return None
    return profile.total_float_ops / 1e9 if profile.total_float_ops else None
