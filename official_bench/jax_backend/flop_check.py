"""XLA's count of a model's forward FLOPs: the JAX backend's check of the
layer-shape count (measure/layer_flops.py), as TensorFlow's profiler is the
TensorFlow backend's.

The forward pass at batch 1 is lowered (traced to HLO, not compiled) and
XLA's HLO cost analysis counts its floating-point operations: convolutions
and matrix products at 2 per multiply-add, plus batch norm, activations and
adds (a few tenths of a percent of a ResNet's).
"""

from __future__ import annotations

from typing import Optional

from absl import logging


def forward_gflop(jax, model) -> Optional[float]:
    """GFLOP of one image's forward pass by XLA's cost analysis; None when
    the model cannot be lowered at batch 1 or XLA gives no count."""
    try:
        spec = model.inputs[0]
        shape = (1,) + tuple(spec.shape[1:])
        x = jax.ShapeDtypeStruct(shape, spec.dtype)
        trainable = [v.value for v in model.trainable_variables]
        non_trainable = [v.value for v in model.non_trainable_variables]

        def forward(t, n, images):
            return model.stateless_call(t, n, images, training=False)[0]
        cost = jax.jit(forward).lower(trainable, non_trainable, x) \
            .cost_analysis()
    except Exception as e:  # a check: never worth failing a run for
        logging.info("official_bench: XLA's FLOP count unavailable (%s: %s)",
                     type(e).__name__, e)
        return None
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    flops = (cost or {}).get("flops")
    return float(flops) / 1e9 if flops else None
