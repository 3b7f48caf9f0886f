"""Forward multiply-adds per image, counted from a built Keras model.

The count is the convention of torchvision's and the papers' ResNet
figures (ResNet-50 v1.5 at 224x224: 4.09 G): convolutions and dense
layers only, from their shapes; batch norm, activations, pooling and adds
are left out (together under 0.5% of ResNet-50's). Training FLOPs follow
contracts/flops.py (3 x 2 x forward multiply-adds).

TensorFlow's own count is the check: the profiler's float_operation
statistics of the forward pass traced at batch 1 (registered per op:
Conv2D, MatMul, BiasAdd, adds...). Tracing ResNet-50 takes about half a
second on this machine, once, before training; it never runs a step.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

from absl import logging

from official_bench.runtime.keras_setup import keras, tf

COUNTED_BY = "keras layer shapes: convolutions and dense layers"


@dataclasses.dataclass(frozen=True)
class ForwardCount:
    """Forward multiply-adds per image, by layer kind."""
    macs: int
    by_kind: Dict[str, int]
    # Layers with a kernel this count does not know (custom layers): their
    # work is missing from `macs`, and the result says so.
    uncounted: List[str]

    @property
    def gmacs(self) -> float:
        return self.macs / 1e9


def _elements(shape) -> int:
    """Elements of one image's tensor: the batch dimension left out."""
    n = 1
    for d in list(shape)[1:]:
        n *= int(d)
    return n


def _kernel_size(layer) -> int:
    n = 1
    for d in layer.kernel.shape:
        n *= int(d)
    return n


def layer_macs(layer, input_shape, output_shape) -> Optional[int]:
    """One call's multiply-adds per image; None for a layer with a kernel
    of a kind not known here, 0 for layers without weights to multiply.

    Every output element of a convolution is a dot product over its
    kernel's window (kh x kw x input channels / groups); a depthwise one
    over kh x kw; a transposed one spreads each input element over
    kh x kw x filters.
    """
    L = keras.layers
    if isinstance(layer, L.Conv2DTranspose) or \
            isinstance(layer, getattr(L, "Conv3DTranspose", ())) or \
            isinstance(layer, getattr(L, "Conv1DTranspose", ())):
        return _elements(input_shape) * _kernel_size(layer) // \
            int(layer.kernel.shape[-1])
    if isinstance(layer, (L.SeparableConv1D, L.SeparableConv2D)):
        depthwise = layer.depthwise_kernel.shape
        window = 1
        for d in depthwise[:-2]:
            window *= int(d)
        channels = int(depthwise[-2]) * int(depthwise[-1])
        positions = _elements(output_shape) // layer.filters
        return positions * channels * (window + layer.filters)
    if isinstance(layer, (L.DepthwiseConv2D,
                          getattr(L, "DepthwiseConv1D", L.DepthwiseConv2D))):
        window = 1
        for d in layer.depthwise_kernel.shape[:-2]:
            window *= int(d)
        return _elements(output_shape) * window
    if isinstance(layer, (L.Conv1D, L.Conv2D, L.Conv3D, L.Dense)):
        out_channels = int(layer.kernel.shape[-1])
        return _elements(output_shape) * (_kernel_size(layer) //
                                          out_channels)
    if getattr(layer, "kernel", None) is not None:
        return None
    return 0


def _calls(layer):
    """(input shape, output shape) of each call in the model's graph: a
    layer shared between branches does its work once per call."""
    nodes = getattr(layer, "_inbound_nodes", []) or []
    out = []
    for k in range(len(nodes)):
        try:
            out.append((layer.get_input_shape_at(k),
                        layer.get_output_shape_at(k)))
        except (AttributeError, RuntimeError, ValueError):
            continue
    return out


def count_forward(model) -> ForwardCount:
    """Forward multiply-adds per image of a functional or Sequential model,
    nested models included; ValueError for a model without a layer graph
    (subclassed models: count them with tf_cost_analysis)."""
    if not getattr(model, "_is_graph_network", False) and \
            not isinstance(model, keras.Sequential):
        raise ValueError(f"{model.name} has no layer graph to read shapes "
                         "from (a subclassed model)")
    by_kind: Dict[str, int] = {}
    uncounted: List[str] = []

    def walk(m, times: int):
        for layer in m.layers:
            if isinstance(layer, keras.Model):
                # Its layers keep the nodes of its own graph; each call of
                # the nested model in the outer graph runs them all again.
                walk(layer, times * max(1, len(layer._inbound_nodes or [])))
                continue
            for in_shape, out_shape in _calls(layer):
                macs = layer_macs(layer, in_shape, out_shape)
                if macs is None:
                    uncounted.append(layer.name)
                elif macs:
                    kind = type(layer).__name__
                    by_kind[kind] = by_kind.get(kind, 0) + times * macs
    walk(model, 1)
    return ForwardCount(sum(by_kind.values()), by_kind, uncounted)


def tf_cost_analysis(model) -> Optional[float]:
    """TensorFlow's FLOPs of one image's forward pass (profiler
    float_operation on the traced graph), in GFLOP; None when the model
    cannot be traced at batch 1 or the profiler is unavailable."""
    try:
        from tensorflow.python.profiler import model_analyzer
        from tensorflow.python.profiler import option_builder
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
