"""models/jax_axes.py: the varying-axes spelling of this JAX and of the
older one (vma, pvary), which the GPU machine's JAX may have instead."""

from types import SimpleNamespace

import pytest


def fake_jax(aval, lax):
    calls = []

    def struct(shape, dtype, **kw):
        calls.append(kw)
        return (shape, dtype, kw)

    return SimpleNamespace(typeof=lambda v: aval[v], lax=lax,
                           ShapeDtypeStruct=struct), calls


def test_older_spelling_vma_and_pvary():
    from official_bench.models import jax_axes
    lax = SimpleNamespace(pvary=lambda v, axes: ("pvary", v, axes))
    avals = {"x": SimpleNamespace(vma=frozenset({"batch", "model"})),
             "g": SimpleNamespace(vma=frozenset({"model"}))}
    jax, calls = fake_jax(avals, lax)
    assert jax_axes.varying_axes(jax, "x") == {"batch", "model"}
    assert jax_axes.vary_like(jax, "x", "g") == ("pvary", "g", ("batch",))
    assert jax_axes.vary_like(jax, "g", "x") == "x"  # nothing missing
    jax_axes.shape_like(jax, (2, 3), "float32", "x")
    assert calls == [{"vma": frozenset({"batch", "model"})}]


def test_newer_spelling_manual_axis_type_and_pcast():
    from official_bench.models import jax_axes
    lax = SimpleNamespace(
        pcast=lambda v, axes, to: ("pcast", v, axes, to),
        pvary=lambda v, axes: pytest.fail("pvary used where pcast exists"))
    kind = SimpleNamespace(varying=frozenset({"batch"}))
    avals = {"x": SimpleNamespace(manual_axis_type=kind),
             "g": SimpleNamespace(
                 manual_axis_type=SimpleNamespace(varying=frozenset()))}
    jax, calls = fake_jax(avals, lax)
    assert jax_axes.vary_like(jax, "x", "g") == \
        ("pcast", "g", ("batch",), "varying")
    jax_axes.shape_like(jax, (1,), "float32", "x")
    assert calls == [{"manual_axis_type": kind}]


def test_this_jax_outside_shard_map():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from official_bench.models import jax_axes
    x = jnp.ones(3)
    assert jax_axes.varying_axes(jax, x) == frozenset()
    assert jax_axes.vary_like(jax, x, x) is x
    assert jax_axes.shape_like(jax, (2,), jnp.float32, x).shape == (2,)
