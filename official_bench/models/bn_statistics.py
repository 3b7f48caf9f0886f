"""How a training-mode batch norm computes its batch statistics
(model_params.bn_statistics).

`two_pass` is Keras' own: the mean, then the variance about it (a second
reduction that needs the first's result, so the activation is read twice).
`one_pass` (Keras 3 only) reads it once: the mean and the mean square of
the activation less a per-channel shift (the moving mean, held constant),
two sibling reductions over one input that XLA can fuse into one kernel;
variance = E[(x-s)^2] - E[x-s]^2, clamped at 0. The shift keeps the
subtraction well conditioned once the moving mean has learnt the channel's
offset; the gradient is the same for any constant shift. The layer keeps
BatchNormalization's variables, config and inference path.
"""

from __future__ import annotations

from official_bench.config.schema import BN_STATISTICS as CHOICES
from official_bench.models.layer_classes import layer_class, require_keras3


def batch_norm_layer(keras, statistics: str = "two_pass", **bn_kwargs):
    """A BatchNormalization of `keras` whose training statistics are
    computed as `statistics` says; the other arguments are its own."""
    if statistics not in CHOICES:
        raise ValueError(f"unknown bn_statistics {statistics!r}; valid: "
                         f"{', '.join(CHOICES)}")
    if statistics == "two_pass":
        return keras.layers.BatchNormalization(**bn_kwargs)
    require_keras3(keras, "model_params.bn_statistics one_pass")
    return layer_class(keras, _define)(**bn_kwargs)


def _define(keras) -> type:
    ops = keras.ops

    class OnePassBatchNormalization(keras.layers.BatchNormalization):
        """BatchNormalization with one-pass statistics (module doc)."""

        def _moments(self, inputs, mask):
            if mask is not None or self.synchronized:
                return super()._moments(inputs, mask)
            shape = [1] * len(inputs.shape)
            shape[self.axis] = inputs.shape[self.axis]
            shift = ops.stop_gradient(
                ops.cast(self.moving_mean, inputs.dtype))
            centred = inputs - ops.reshape(shift, shape)
            mean = ops.mean(centred, axis=self._reduction_axes)
            square = ops.mean(ops.square(centred), axis=self._reduction_axes)
            variance = ops.maximum(square - ops.square(mean), 0.0)
            return mean + shift, variance

    return OnePassBatchNormalization
