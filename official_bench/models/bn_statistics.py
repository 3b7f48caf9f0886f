"""How a training-mode batch norm computes its batch statistics
(model_params.bn_statistics).

`two_pass` is Keras' own: the mean, then the variance about it (a second
reduction that needs the first's result, so the activation is read twice).
`one_pass` (Keras 3 only) reads it once: the mean and the mean square of
the activation less a per-channel shift (the moving mean, held constant),
two sibling reductions over one input that XLA can fuse into one kernel;
variance = E[(x-s)^2] - E[x-s]^2, clamped at 0. The shift keeps the
subtraction well conditioned once the moving mean has learnt the channel's
offset; the gradient is the same for any constant shift. `pallas`
(Keras 3 on JAX) is one_pass with both sums from one Pallas kernel
(models/pallas_moments.py) that reads the activation in its own dtype.
Each layer keeps BatchNormalization's variables, config and inference
path. Any of them may take the written-out backward of
models/bn_backward.py (model_params.bn_backward).
"""

from __future__ import annotations

from official_bench.config.schema import (
    BN_BACKWARDS as BACKWARDS,
    BN_STATISTICS as CHOICES,
)
from official_bench.models.bn_backward import vjp_batch_norm_class
from official_bench.models.layer_classes import layer_class, require_keras3


def batch_norm_layer(keras, statistics: str = "two_pass",
                     backward: str = "autodiff", relu: bool = False,
                     **bn_kwargs):
    """A BatchNormalization of `keras` whose training statistics are
    computed as `statistics` says and whose gradient as `backward` does
    (models/bn_backward.py); `relu`: a ReLU follows, taken inside where
    `backward` is vjp_relu (fused_relu() says whether); the other
    arguments are its own."""
    if statistics not in CHOICES:
        raise ValueError(f"unknown bn_statistics {statistics!r}; valid: "
                         f"{', '.join(CHOICES)}")
    if backward not in BACKWARDS:
        raise ValueError(f"unknown bn_backward {backward!r}; valid: "
                         f"{', '.join(BACKWARDS)}")
    cls = _statistics_class(keras, statistics)
    if backward == "autodiff":
        return cls(**bn_kwargs)
    return vjp_batch_norm_class(keras, cls)(
        fused_relu=fused_relu(backward, relu), **bn_kwargs)


def fused_relu(backward: str, relu: bool) -> bool:
    """Whether a batch norm that a ReLU follows (`relu`) takes it in."""
    return relu and backward == "vjp_relu"


def _statistics_class(keras, statistics: str) -> type:
    if statistics == "two_pass":
        return keras.layers.BatchNormalization
    require_keras3(keras, f"model_params.bn_statistics {statistics}")
    if statistics == "one_pass":
        return layer_class(keras, _define_one_pass)
    if keras.backend.backend() != "jax":
        raise ValueError("model_params.bn_statistics pallas needs Keras 3 "
                         f"on JAX, not {keras.backend.backend()}")
    return layer_class(keras, _define_pallas)


def _define_one_pass(keras) -> type:
    ops = keras.ops

    class OnePassBatchNormalization(keras.layers.BatchNormalization):
        """BatchNormalization with one-pass statistics (module doc)."""

        def _moments(self, inputs, mask):
            if mask is not None or self.synchronized:
                return super()._moments(inputs, mask)
            shift = ops.stop_gradient(
                ops.cast(self.moving_mean, inputs.dtype))
            mean, square = self._centred_moments(inputs, shift)
            variance = ops.maximum(square - ops.square(mean), 0.0)
            return mean + shift, variance

        def _centred_moments(self, inputs, shift):
            """The means of inputs - shift and of its square."""
            shape = [1] * len(inputs.shape)
            shape[self.axis] = inputs.shape[self.axis]
            centred = inputs - ops.reshape(shift, shape)
            return (ops.mean(centred, axis=self._reduction_axes),
                    ops.mean(ops.square(centred), axis=self._reduction_axes))

    return OnePassBatchNormalization


def _define_pallas(keras) -> type:
    from official_bench.models.pallas_moments import centred_sums
    ops = keras.ops
    base = layer_class(keras, _define_one_pass)

    class PallasBatchNormalization(base):
        """One-pass statistics from models/pallas_moments.py's kernel."""

        def call(self, inputs, training=None, mask=None):
            # Keras' call casts the input to float32 before _moments; the
            # kernel reads it in the dtype it came in (the cast back is
            # exact, and XLA removes the pair).
            self._input_dtype = keras.backend.standardize_dtype(
                inputs.dtype)
            return super().call(inputs, training=training, mask=mask)

        def _centred_moments(self, inputs, shift):
            axis = self.axis % len(inputs.shape)
            if axis != len(inputs.shape) - 1:  # channels_first
                return super()._centred_moments(inputs, shift)
            channels = inputs.shape[-1]
            rows = ops.reshape(inputs, (-1, channels))
            total, square = centred_sums(
                rows, ops.cast(shift, "float32"),
                read_dtype=getattr(self, "_input_dtype", None))
            count = rows.shape[0]
            return (ops.cast(total / count, inputs.dtype),
                    ops.cast(square / count, inputs.dtype))

    return PallasBatchNormalization
