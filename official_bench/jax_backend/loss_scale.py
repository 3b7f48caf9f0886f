"""fp16's loss-scaled update without a conditional
(runtime.loss_scale_update: select; JAX backend).

Keras 3's LossScaleOptimizer.stateless_apply picks between applying the
step and skipping it with lax.cond; XLA copies buffers around a
conditional and fuses nothing across it. `select` always applies the inner
optimizer to the unscaled gradients, then keeps the new or the old value of
each variable by the finite flag (jnp.where), and updates the loss scale
and its growth counter as Keras' two branches do.
"""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple

from official_bench.config.schema import LOSS_SCALE_UPDATES as UPDATES


def check(how: str) -> None:
    """ValueError naming `how` and the choices unless it is one."""
    if how not in UPDATES:
        raise ValueError(f"unknown loss_scale_update {how!r}; valid: "
                         f"{', '.join(UPDATES)}")


def stateless_apply(jax, optimizer, how: str, opt_vars: Sequence[Any],
                    grads: Sequence[Any], trainable: Sequence[Any]
                    ) -> Tuple[list, list]:
    """(new trainable, new optimizer variables) of one step: Keras' own
    stateless_apply unless `how` is select and `optimizer` scales the
    loss (bf16/fp32 have no loss scale: select changes nothing there)."""
    check(how)
    if how == "cond" or getattr(optimizer, "inner_optimizer", None) is None:
        return optimizer.stateless_apply(opt_vars, grads, trainable)
    return _selected(jax.numpy, optimizer, list(opt_vars), list(grads),
                     list(trainable))


def _index(optimizer, variables) -> List[int]:
    """Where each of `variables` sits in `optimizer.variables`."""
    where = {id(v): i for i, v in enumerate(optimizer.variables)}
    return [where[id(v)] for v in variables]


def _selected(jnp, optimizer, opt_vars: list, grads: list, trainable: list
              ) -> Tuple[list, list]:
    finite = optimizer.check_finite(grads)
    counter_at, scale_at = _index(
        optimizer, (optimizer.step_counter, optimizer.dynamic_scale))
    inner = optimizer.inner_optimizer
    inner_at = _index(optimizer, inner.variables)
    counter, scale = opt_vars[counter_at], opt_vars[scale_at]
    # Unscaled by the scale the loss was scaled with, as Keras does.
    unscaled = [g if g is None or getattr(v, "overwrite_with_gradient",
                                          False) else g / scale
                for g, v in zip(grads, optimizer._trainable_variables)]
    new_trainable, new_inner = inner.stateless_apply(
        [opt_vars[i] for i in inner_at], unscaled, trainable)
    trainable_out = [jnp.where(finite, new, old)
                     for new, old in zip(new_trainable, trainable)]
    out = list(opt_vars)
    for i, new in zip(inner_at, new_inner):
        out[i] = jnp.where(finite, new, opt_vars[i])
    # Finite: double the scale and restart the count every
    # dynamic_growth_steps steps, else count; non-finite: halve, restart.
    grow = counter == optimizer.dynamic_growth_steps - 1
    zero = jnp.zeros_like(counter)
    out[counter_at] = jnp.where(finite, jnp.where(grow, zero, counter + 1),
                                zero)
    out[scale_at] = jnp.where(finite, jnp.where(grow, scale * 2.0, scale),
                              scale * 0.5)
    return trainable_out, out
