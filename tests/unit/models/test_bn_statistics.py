"""models/bn_statistics.py: model_params.bn_statistics. On Keras 3 (JAX,
in one child Python): a one_pass batch norm gives two_pass' training
output, gradients and moving statistics (float32, and from float16
activations); its statistics are one pass (no reduction reads another's
result, where two_pass' variance reads its mean's); the moving-mean shift
is what keeps an offset channel's variance exact; a ResNet built with it
through the factory has the one_pass layer everywhere and the same
parameters and layer-shape FLOPs. tf-keras cannot build one_pass (the
config's side: config/test_speed_options.py)."""

import numpy as np
import pytest

from official_bench import config as C
from official_bench.models.bn_statistics import batch_norm_layer
from support.helpers import keras3_child

BN = dict(momentum=0.9, epsilon=1e-5, name="bn")


def _bn_model(keras, statistics, shape, dtype="float32"):
    inputs = keras.Input(shape, dtype=dtype)
    layer = batch_norm_layer(keras, statistics, dtype=dtype, **BN)
    return keras.Model(inputs, layer(inputs))


def _train_call(jax, model, x):
    """Output, gradients of a weighted sum of squares and the new moving
    statistics of one training-mode call."""
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]
    weights = np.arange(1, x.shape[-1] + 1, dtype="float32")

    def loss(tv):
        y, new = model.stateless_call(tv, ntv, x, training=True)
        y32 = y.astype("float32")
        return (y32 * y32 * weights).sum(), (y32, new)
    (_, (y, new)), grads = jax.jit(
        jax.value_and_grad(loss, has_aux=True))(tv)
    return [np.asarray(a, "float64") for a in [y, *grads, *new]]


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
    from official_bench.measure.layer_flops import count_forward
    from official_bench.models import factory
    cfg = C.load_config(params_override=(
        "runtime.backend=jax,runtime.num_gpus=0,model.name=resnet_cifar,"
        "model.model_params.depth=8,train_dataset.image_size=8,"
        "train_dataset.num_classes=10,"
        f"model.model_params.bn_statistics={statistics}"))
    model = factory.build_model(cfg, 0, keras=keras, backend="jax")
    kinds = {type(layer).__name__ for layer in model.layers
             if isinstance(layer, keras.layers.BatchNormalization)}
    return {"bn_classes": sorted(kinds),
            "trainable": int(sum(np.prod(w.shape)
                                 for w in model.trainable_weights)),
            "macs": count_forward(model, keras).macs}


def compare_in_keras3():
    """In the child: every measurement the tests below read."""
    import json

    import jax
    import keras

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((16, 6, 6, 8)) * 2 + 1).astype("float32")
    out = {"diff": {}, "chained": {}}
    for dtype in ("float32", "float16"):
        xs = x.astype(dtype)
        models = [_bn_model(keras, s, x.shape[1:], dtype)
                  for s in ("two_pass", "one_pass")]
        ref, got = (_train_call(jax, m, xs) for m in models)
        out["diff"][dtype] = [float(np.abs(a - b).max() / np.abs(a).max())
                              for a, b in zip(ref, got)]
        out["chained"][dtype] = [_statistics_chained(jax, m, xs)
                                 for m in models]
    out["variance_error"] = {
        "offset_unshifted": _variance_error(jax, keras, 300.0, 0.0),
        "offset_shifted": _variance_error(jax, keras, 300.0, 299.0)}
    out["resnet"] = [_resnet_counts(keras, s)
                     for s in ("two_pass", "one_pass")]
    print(json.dumps(out))


@pytest.fixture(scope="module")
def compared():
    return keras3_child(__file__, "compare_in_keras3")


@pytest.mark.parametrize("dtype,tolerance", [("float32", 2e-5),
                                             ("float16", 2e-3)])
def test_one_pass_trains_as_two_pass(compared, dtype, tolerance):
    # output, d/dgamma, d/dbeta, moving mean, moving variance
    diffs = compared["diff"][dtype]
    assert len(diffs) == 5
    assert max(diffs) <= tolerance, diffs


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_one_pass_reads_the_activation_once(compared, dtype):
    two_pass, one_pass = compared["chained"][dtype]
    assert two_pass is True  # the variance reduces x - mean
    assert one_pass is False


def test_the_moving_mean_shift_keeps_an_offset_channel_exact(compared):
    error = compared["variance_error"]
    # mean 300, std 1: E[x^2] - E[x]^2 in float32 loses the variance
    # without the shift, and keeps it to float32's rounding with it.
    assert error["offset_unshifted"] > 1e-2
    assert error["offset_shifted"] < 1e-4


def test_a_one_pass_resnet_keeps_its_weights_and_flops(compared):
    from official_bench.runtime.keras_setup import keras
    plain, one_pass = compared["resnet"]
    assert plain["bn_classes"] == ["BatchNormalization"]
    assert one_pass["bn_classes"] == ["OnePassBatchNormalization"]
    tf_keras = _resnet_counts(keras, "two_pass")  # the TensorFlow build
    for key in ("trainable", "macs"):
        assert one_pass[key] == plain[key] == tf_keras[key] > 0, key


def test_tf_keras_cannot_build_one_pass_and_names_the_choices():
    from official_bench.runtime.keras_setup import keras
    with pytest.raises(ValueError, match="one_pass needs Keras 3"):
        batch_norm_layer(keras, "one_pass", **BN)
    with pytest.raises(ValueError, match="unknown bn_statistics 'fast'; "
                                         "valid: two_pass, one_pass"):
        batch_norm_layer(keras, "fast", **BN)
    assert type(batch_norm_layer(keras, "two_pass", **BN)).__name__ == \
        "BatchNormalization"
