"""A training-mode batch norm whose gradient is written out
(model_params.bn_backward: vjp; Keras 3 on JAX only).

The normalisation y = gamma * (x - mean) * rstd + beta, rstd =
rsqrt(var + eps), is a jax.custom_vjp given the batch statistics (computed
as model_params.bn_statistics says, in float32 from 16-bit activations as
Keras does, outside the gradient) with the textbook minimal backward:
dbeta = sum(dy), dgamma = sum(dy * xhat), dx = gamma * rstd / N *
(N * dy - dbeta - xhat * dgamma), which is the whole gradient of x,
through the statistics included. It saves (x, mean, rstd, gamma), not
xhat, with x in the activation's own dtype (16-bit under a mixed policy;
the float32 copy is made again in the backward), so the backward reads x
and dy twice, at 2 bytes an element: once for the two sums, once for dx.
The casts to and from float32 sit inside the custom_vjp, where autodiff
has them outside; the arithmetic is the same. Autodiff's own backward is
the same function: the A/B asks only whether XLA fuses this one better.
Each layer keeps BatchNormalization's variables, config, moving-average
updates and inference path.

`vjp_relu` also takes in the ReLU that follows a batch norm (fused_relu,
as MLPerf's fused BN+ReLU): the forward gives relu(y) and the backward
recomputes ReLU's mask from the saved x, so the gradient never reads the
ReLU's output; the mask is taken from y in the output dtype, as the
ReLU layer it replaces sees it, with JAX's relu gradient (0 at 0).
"""

from __future__ import annotations

import functools

from official_bench.models import jax_axes
from official_bench.models.layer_classes import layer_class, require_keras3


def vjp_batch_norm_class(keras, base: type) -> type:
    """`base` (a BatchNormalization class of Keras 3 on JAX) with the
    written-out backward in training, and a `fused_relu` argument (the
    ReLU after it, in every mode); one class per base."""
    require_keras3(keras, "model_params.bn_backward vjp")
    if keras.backend.backend() != "jax":
        raise ValueError("model_params.bn_backward vjp needs Keras 3 on "
                         f"JAX, not {keras.backend.backend()}")
    return layer_class(keras, _definer(base))


@functools.lru_cache(maxsize=None)
def _definer(base: type):
    """The define function of layer_class for `base` (one per base, so
    layer_class makes each class once)."""
    return lambda keras: _define(keras, base)


def _define(keras, base: type) -> type:
    ops = keras.ops
    normalize = _normalize()

    class VjpBatchNormalization(base):
        """BatchNormalization with a written-out backward (module doc);
        `fused_relu`: the ReLU after it, inside."""

        def __init__(self, *args, fused_relu: bool = False, **kwargs):
            super().__init__(*args, **kwargs)
            self.fused_relu = fused_relu

        def get_config(self):
            return {**super().get_config(), "fused_relu": self.fused_relu}

        def call(self, inputs, training=None, mask=None):
            if not (training and self.trainable) or mask is not None or \
                    self.renorm or self.synchronized or not self.scale or \
                    not self.center:
                out = super().call(inputs, training=training, mask=mask)
                return ops.relu(out) if self.fused_relu else out
            # The pallas base reads the activation in this dtype.
            self._input_dtype = keras.backend.standardize_dtype(
                inputs.dtype)
            x = ops.cast(inputs, keras.backend.result_type(
                inputs.dtype, "float32"))
            mean, variance = self._moments(ops.stop_gradient(x), None)
            mean, variance = (ops.stop_gradient(mean),
                              ops.stop_gradient(variance))
            for moving, batch in ((self.moving_mean, mean),
                                  (self.moving_variance, variance)):
                moving.assign(ops.cast(moving, x.dtype) * self.momentum
                              + batch * (1.0 - self.momentum))
            return normalize(inputs, mean, variance,
                             ops.cast(self.gamma, x.dtype),
                             ops.cast(self.beta, x.dtype),
                             self.axis % len(x.shape), self.epsilon,
                             keras.backend.standardize_dtype(
                                 self.compute_dtype), self.fused_relu)

    return VjpBatchNormalization


@functools.lru_cache(maxsize=None)
def _normalize():
    """normalize(x, mean, variance, gamma, beta, axis, epsilon,
    out_dtype, relu): the custom_vjp (made at first use: this module
    imports no JAX)."""
    import jax
    import jax.numpy as jnp

    def channel(v, x, axis):
        shape = [1] * x.ndim
        shape[axis] = x.shape[axis]
        return jnp.reshape(v, shape)

    def normalized(x, mean, rstd, gamma, beta, axis, out_dtype):
        """y in out_dtype, Keras' arithmetic: x * scale + offset."""
        scale = gamma * rstd
        y = x.astype(mean.dtype) * channel(scale, x, axis) + channel(
            beta - mean * scale, x, axis)
        return y.astype(out_dtype)

    # x in its own dtype, the statistics (and the arithmetic) in float32
    # or wider; y comes out in out_dtype, dx in x's dtype.
    @functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6, 7, 8))
    def normalize(x, mean, variance, gamma, beta, axis, epsilon, out_dtype,
                  relu):
        return forward(x, mean, variance, gamma, beta, axis, epsilon,
                       out_dtype, relu)[0]

    def forward(x, mean, variance, gamma, beta, axis, epsilon, out_dtype,
                relu):
        rstd = jax.lax.rsqrt(variance + epsilon)
        y = normalized(x, mean, rstd, gamma, beta, axis, out_dtype)
        if relu:
            y = jax.nn.relu(y)
        return y, (x, mean, rstd, gamma, beta)

    def backward(axis, epsilon, out_dtype, relu, saved, dy):
        x, mean, rstd, gamma, beta = saved
        if relu:  # ReLU's mask, from y as the forward made it
            dy = jnp.where(normalized(x, mean, rstd, gamma, beta, axis,
                                      out_dtype) > 0, dy, 0)
        wide, dy = x.astype(mean.dtype), dy.astype(mean.dtype)
        axes = tuple(a for a in range(x.ndim) if a != axis)
        count = x.size // x.shape[axis]
        xhat = (wide - channel(mean, x, axis)) * channel(rstd, x, axis)
        dbeta = jnp.sum(dy, axis=axes)
        dgamma = jnp.sum(dy * xhat, axis=axes)
        dx = channel(gamma * rstd / count, x, axis) * (
            count * dy - channel(dbeta, x, axis)
            - xhat * channel(dgamma, x, axis))
        return (dx.astype(x.dtype), jnp.zeros_like(mean),
                jnp.zeros_like(rstd), dgamma, dbeta)

    normalize.defvjp(forward, backward)

    def varying(x, mean, variance, gamma, beta, axis, epsilon, out_dtype,
                relu):
        # The replicated gamma and beta vary as x does under shard_map, so
        # their gradients are summed over the replicas.
        mean, variance, gamma, beta = (
            jax_axes.vary_like(jax, x, v) for v in (mean, variance, gamma,
                                                    beta))
        return normalize(x, mean, variance, gamma, beta, axis, epsilon,
                         out_dtype, relu)

    return varying
