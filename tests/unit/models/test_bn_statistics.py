"""models/bn_statistics.py: model_params.bn_statistics. On Keras 3 (JAX,
in one child Python): one_pass and pallas batch norms give two_pass'
training output, gradients and moving statistics (float32, float16
activations, and the mixed_float16 policy the trainer uses); one_pass'
statistics are one pass (no reduction reads another's result, where
two_pass' variance reads its mean's), pallas' are one kernel per batch
norm that reads the activation in its own dtype; the moving-mean shift is
what keeps an offset channel's variance exact; a ResNet built with either
through the factory has that layer everywhere and the same parameters and
layer-shape FLOPs. tf-keras cannot build them (the config's side:
config/test_speed_options.py); the kernel itself:
test_pallas_moments.py."""

import numpy as np
import pytest

from official_bench.models.bn_statistics import batch_norm_layer
from support import model_counts
from support.helpers import keras3_child

BN = dict(momentum=0.9, epsilon=1e-5, name="bn")
STATISTICS = ("one_pass", "pallas")  # each against Keras' two_pass


def _bn_model(keras, statistics, shape, dtype="float32"):
    """`dtype`: the layer's dtype or policy (mixed_float16: float16 in,
    float32 variables)."""
    inputs = keras.Input(shape, dtype=dtype.replace("mixed_", ""))
    layer = batch_norm_layer(keras, statistics, dtype=dtype, **BN)
    return keras.Model(inputs, layer(inputs))


def _train_call(jax, model, x):
    """Output, gradients (gamma, beta, the input) of a weighted sum and the
    new moving statistics of one training-mode call."""
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]
    weights = np.arange(1, x.shape[-1] + 1, dtype="float32")
    # A fixed random upstream gradient: d/dx is then far from 0 (for one
    # that is a function of y alone, a batch norm's d/dx nearly cancels).
    noise = np.random.default_rng(2).standard_normal(x.shape).astype(
        "float32")

    def loss(tv, x):  # the linear terms keep d/dbeta and d/dx away from 0
        y, new = model.stateless_call(tv, ntv, x, training=True)
        y32 = y.astype("float32")
        return ((y32 * y32 + y32) * weights + y32 * noise).sum(), (y32, new)
    (_, (y, new)), (grads, dx) = jax.jit(
        jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(tv, x)
    return [np.asarray(a, "float64") for a in [y, *grads, dx, *new]]


def _chained(jaxpr, taints):
    """(output taints, whether a reduction reads a value derived from
    another reduction's result), through nested jaxprs."""
    taint = dict(zip(jaxpr.invars, taints))
    chained = False
    for eqn in jaxpr.eqns:
        ins = [False if hasattr(v, "val") else taint.get(v, False)
               for v in eqn.invars]  # a Literal has .val
        sub = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
        if sub is not None:
            outs, inner = _chained(getattr(sub, "jaxpr", sub), ins)
            chained |= inner
        else:
            reduces = eqn.primitive.name.startswith("reduce_")
            chained |= reduces and any(ins)
            outs = [reduces or any(ins)] * len(eqn.outvars)
        taint.update(zip(eqn.outvars, outs))
    return [taint.get(v, False) for v in jaxpr.outvars], chained


def _statistics_chained(jax, model, x):
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]
    closed = jax.make_jaxpr(
        lambda v: model.stateless_call(tv, ntv, v, training=True))(x)
    return _chained(closed.jaxpr, [False] * len(closed.jaxpr.invars))[1]


def _kernel_inputs(jax, model, x):
    """The dtypes of the activation each compiled (GPU) Pallas kernel of a
    training call reads (one entry per kernel; the CPU's interpreted twin
    not counted)."""
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]
    closed = jax.make_jaxpr(
        lambda v: model.stateless_call(tv, ntv, v, training=True))(x)
    return [str(eqn.invars[0].aval.dtype) for eqn in _eqns(closed.jaxpr)
            if eqn.primitive.name == "pallas_call"
            and not eqn.params["interpret"]]


def _eqns(jaxpr):
    """Every equation of `jaxpr` and of the jaxprs nested in it (a
    pallas_call's kernel body not included)."""
    for eqn in jaxpr.eqns:
        yield eqn
        if eqn.primitive.name == "pallas_call":
            continue
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _eqns(inner)


def _variance_error(jax, keras, offset, shift):
    """|one_pass variance - float64 variance| / variance of a channel at
    `offset` (std 1), the moving mean set to `shift`."""
    x = (np.random.default_rng(1).standard_normal((64, 4, 4, 8))
         + offset).astype("float32")
    model = _bn_model(keras, "one_pass", x.shape[1:])
    layer = model.get_layer("bn")
    layer.moving_mean.assign(np.full(8, shift, "float32"))
    layer.momentum = 0.0  # the new moving variance is the batch's
    ntv = [v.value for v in model.non_trainable_variables]
    tv = [v.value for v in model.trainable_variables]
    _, new = model.stateless_call(tv, ntv, x, training=True)
    variance = np.asarray(new[1], "float64")
    exact = x.astype("float64").var(axis=(0, 1, 2))
    return float(np.abs(variance - exact).max() / exact.min())


def _resnet_counts(keras, statistics):
    return model_counts.counts(keras, (
        "model.name=resnet_cifar,model.model_params.depth=8,"
        "train_dataset.image_size=8,train_dataset.num_classes=10,"
        f"model.model_params.bn_statistics={statistics}"))


def compare_in_keras3():
    """In the child: every measurement the tests below read."""
    import json

    import jax
    import keras

    rng = np.random.default_rng(0)
    # 16 channels: the narrowest the Pallas kernel tiles (pallas_moments)
    x = (rng.standard_normal((16, 6, 6, 16)) * 2 + 1).astype("float32")
    out = {"diff": {}, "chained": {}, "kernel_inputs": {}}
    for dtype in ("float32", "float16", "mixed_float16"):
        xs = x.astype(dtype.replace("mixed_", ""))
        models = {s: _bn_model(keras, s, x.shape[1:], dtype)
                  for s in ("two_pass", *STATISTICS)}
        ref = _train_call(jax, models["two_pass"], xs)
        for name in STATISTICS:
            got = _train_call(jax, models[name], xs)
            out["diff"][f"{name}-{dtype}"] = [
                float(np.abs(a - b).max() / np.abs(a).max())
                for a, b in zip(ref, got)]
        out["chained"][dtype] = [_statistics_chained(jax, models[s], xs)
                                 for s in ("two_pass", "one_pass")]
        out["kernel_inputs"][dtype] = _kernel_inputs(
            jax, models["pallas"], xs)
    out["variance_error"] = {
        "offset_unshifted": _variance_error(jax, keras, 300.0, 0.0),
        "offset_shifted": _variance_error(jax, keras, 300.0, 299.0)}
    out["resnet"] = {s: _resnet_counts(keras, s)
                     for s in ("two_pass", *STATISTICS)}
    print(json.dumps(out))


@pytest.fixture(scope="module")
def compared():
    return keras3_child(__file__, "compare_in_keras3")


@pytest.mark.parametrize("statistics", STATISTICS)
@pytest.mark.parametrize("dtype,tolerance", [("float32", 2e-5),
                                             ("float16", 2e-3),
                                             ("mixed_float16", 2e-3)])
def test_it_trains_as_two_pass(compared, statistics, dtype, tolerance):
    # output, d/dgamma, d/dbeta, d/dx, moving mean, moving variance
    diffs = compared["diff"][f"{statistics}-{dtype}"]
    assert len(diffs) == 6
    assert max(diffs) <= tolerance, diffs


@pytest.mark.parametrize("dtype", ["float32", "float16", "mixed_float16"])
def test_one_pass_reads_the_activation_once(compared, dtype):
    two_pass, one_pass = compared["chained"][dtype]
    assert two_pass is True  # the variance reduces x - mean
    assert one_pass is False


@pytest.mark.parametrize("dtype,read", [("float32", "float32"),
                                        ("float16", "float16"),
                                        ("mixed_float16", "float16")])
def test_pallas_is_one_kernel_reading_the_activation_as_it_came(
        compared, dtype, read):
    # mixed_float16: Keras casts the input to float32 before _moments;
    # the kernel must still read float16 (half the bytes).
    assert compared["kernel_inputs"][dtype] == [read]


def test_the_moving_mean_shift_keeps_an_offset_channel_exact(compared):
    error = compared["variance_error"]
    # mean 300, std 1: E[x^2] - E[x]^2 in float32 loses the variance
    # without the shift, and keeps it to float32's rounding with it.
    assert error["offset_unshifted"] > 1e-2
    assert error["offset_shifted"] < 1e-4


@pytest.mark.parametrize("statistics,layer", [
    ("one_pass", "OnePassBatchNormalization"),
    ("pallas", "PallasBatchNormalization")])
def test_the_resnet_keeps_its_weights_and_flops(compared, statistics, layer):
    from official_bench.runtime.keras_setup import keras
    plain = compared["resnet"]["two_pass"]
    built = compared["resnet"][statistics]
    assert plain["bn_classes"] == ["BatchNormalization"]
    assert built["bn_classes"] == [layer]
    tf_keras = _resnet_counts(keras, "two_pass")  # the TensorFlow build
    for key in ("trainable", "macs"):
        assert built[key] == plain[key] == tf_keras[key] > 0, key


def test_tf_keras_cannot_build_them_and_names_the_choices():
    from official_bench.runtime.keras_setup import keras
    for statistics in STATISTICS:
        with pytest.raises(ValueError, match=f"{statistics} needs Keras 3"):
            batch_norm_layer(keras, statistics, **BN)
    with pytest.raises(ValueError, match="unknown bn_statistics 'fast'; "
                                         "valid: two_pass, one_pass, "
                                         "pallas$"):
        batch_norm_layer(keras, "fast", **BN)
    assert type(batch_norm_layer(keras, "two_pass", **BN)).__name__ == \
        "BatchNormalization"
