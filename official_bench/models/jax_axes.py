"""Which shard_map mesh axes a JAX value varies over, and making a
replicated value vary as another does: one home for spellings that changed
between JAX versions (the aval's `manual_axis_type` in JAX 0.10, `vma`
before it; `lax.pcast(..., to="varying")`, `lax.pvary` before it), for the
model's custom gradients (bn_backward, pallas_moments) and the trainer's
step. Takes the `jax` module: importing this imports no JAX.
"""

from __future__ import annotations

from typing import Any, Iterable


def varying_axes(jax, value) -> frozenset:
    """The shard_map axes `value` varies over (empty outside shard_map)."""
    aval = jax.typeof(value)
    kind = getattr(aval, "manual_axis_type", None)
    if kind is not None:
        return frozenset(kind.varying)
    return frozenset(getattr(aval, "vma", ()))


def vary(jax, tree: Any, axes: Iterable[str]) -> Any:
    """`tree` (replicated over `axes`) as values that vary over them: the
    gradient of such a value comes back per replica, not summed."""
    axes = tuple(sorted(axes))
    if not axes:
        return tree
    if hasattr(jax.lax, "pcast"):
        return jax.lax.pcast(tree, axes, to="varying")
    return jax.lax.pvary(tree, axes)  # JAX before pcast


def vary_like(jax, like, value) -> Any:
    """`value` made to vary over the axes `like` varies over that it does
    not: a custom_vjp's replicated input (a batch norm's gamma, a shift)
    then gets its gradient summed over the replicas, as JAX requires."""
    return vary(jax, value, varying_axes(jax, like) - varying_axes(jax, value))


def shape_like(jax, shape, dtype, like) -> Any:
    """A ShapeDtypeStruct of `shape` and `dtype` that varies as `like`
    does (a Pallas kernel's outputs under shard_map must say so)."""
    aval = jax.typeof(like)
    kind = getattr(aval, "manual_axis_type", None)
    if kind is not None:
        return jax.ShapeDtypeStruct(shape, dtype, manual_axis_type=kind)
    vma = getattr(aval, "vma", None)
    if vma is not None:
        return jax.ShapeDtypeStruct(shape, dtype, vma=vma)
    return jax.ShapeDtypeStruct(shape, dtype)
