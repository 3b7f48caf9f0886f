"""Forward multiply-adds per image, counted from a built Keras model's shapes.

The count is the convention of torchvision's and the papers' ResNet
figures (ResNet-50 v1.5 at 224x224: 4.09 G): convolutions and dense
layers only, from their shapes; batch norm, activations, pooling and adds
are left out (together under 0.5% of ResNet-50's). Training FLOPs follow
contracts/flops.py (3 x 2 x forward multiply-adds). TensorFlow-free: the
caller passes the Keras module the model was built with (tf-keras or
Keras 3), so both backends count the same layers the same way.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

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


def layer_macs(layer, input_shape, output_shape, keras) -> Optional[int]:
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
    layer shared between branches does its work once per call. tf-keras
    answers get_input_shape_at; Keras 3's nodes hold their tensors."""
    nodes = getattr(layer, "_inbound_nodes", []) or []
    out = []
    for k, node in enumerate(nodes):
        try:
            if hasattr(layer, "get_input_shape_at"):
                out.append((layer.get_input_shape_at(k),
                            layer.get_output_shape_at(k)))
            else:
                out.append((node.input_tensors[0].shape,
                            node.output_tensors[0].shape))
        except (AttributeError, IndexError, RuntimeError, ValueError):
            continue
    return out


def _has_layer_graph(model, keras) -> bool:
    """A functional or Sequential model (tf-keras marks the first with
    _is_graph_network; Keras 3's are Functional)."""
    if isinstance(model, keras.Sequential) or \
            getattr(model, "_is_graph_network", False):
        return True
    functional = getattr(getattr(keras, "src", None), "models", None)
    functional = getattr(functional, "Functional", None)
    return functional is not None and isinstance(model, functional)


def count_forward(model, keras) -> ForwardCount:
    """Forward multiply-adds per image of a functional or Sequential model
    of `keras`, nested models included; ValueError for a model without a
    layer graph (subclassed models: a compiler's count only)."""
    if not _has_layer_graph(model, keras):
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
                macs = layer_macs(layer, in_shape, out_shape, keras)
                if macs is None:
                    uncounted.append(layer.name)
                elif macs:
                    kind = type(layer).__name__
                    by_kind[kind] = by_kind.get(kind, 0) + times * macs
    walk(model, 1)
    return ForwardCount(sum(by_kind.values()), by_kind, uncounted)
