"""models/bn_backward.py: model_params.bn_backward. On Keras 3 (JAX, in
one child Python) a batch norm with the written-out backward trains as
Keras' own over two SGD steps (output, gradients of x, gamma and beta,
moving statistics; float32 channels_last and channels_first, float16
activations under the mixed_float16 policy; with each bn_statistics) and
keeps one activation-sized residual (x, float16 under mixed_float16) where
autodiff keeps more; a
ResNet built with it keeps its parameters and layer-shape FLOPs. tf-keras
and Keras 3 off JAX are refused in one line; the config takes the key on
jax only."""

import numpy as np
import pytest

from official_bench import config as C
from official_bench.models.bn_backward import vjp_batch_norm_class
from official_bench.models.bn_statistics import batch_norm_layer
from support import model_counts
from support.helpers import config_error_lines, keras3_child

BN = dict(momentum=0.9, epsilon=1e-5, name="bn")
# (statistics, dtype, data_format, backward): each against two_pass with
# autodiff (vjp_relu: a batch norm then a ReLU layer, against one layer)
CASES = (("two_pass", "float32", "channels_last", "vjp"),
         ("two_pass", "float32", "channels_first", "vjp"),
         ("two_pass", "mixed_float16", "channels_last", "vjp"),
         ("one_pass", "float32", "channels_last", "vjp"),
         ("pallas", "mixed_float16", "channels_last", "vjp"),
         ("two_pass", "float32", "channels_first", "vjp_relu"),
         ("one_pass", "mixed_float16", "channels_last", "vjp_relu"))
STEPS, LR = 2, 0.1


def _bn_model(keras, statistics, backward, shape, dtype, data_format,
              relu=False):
    """A batch norm, then a ReLU where `relu` (inside it under
    vjp_relu)."""
    inputs = keras.Input(shape, dtype=dtype.replace("mixed_", ""))
    layer = batch_norm_layer(
        keras, statistics, backward, relu, dtype=dtype,
        axis=1 if data_format == "channels_first" else -1, **BN)
    y = layer(inputs)
    if relu and backward != "vjp_relu":
        y = keras.layers.Activation("relu", dtype=dtype)(y)
    return keras.Model(inputs, y)


def _train(jax, model, x):
    """Output, gradients (gamma, beta, x) and new moving statistics of
    each of STEPS SGD steps on a mean loss (a fixed random upstream
    gradient keeps d/dx away from 0: that of y^2 alone cancels)."""
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]
    noise = np.random.default_rng(2).standard_normal(x.shape).astype(
        "float32")

    def loss(tv, ntv, x):
        y, new = model.stateless_call(tv, ntv, x, training=True)
        y32 = y.astype("float32")
        return (y32 * y32 + y32 * noise).mean(), (y32, new)
    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 2), has_aux=True))
    out = []
    for _ in range(STEPS):
        (_, (y, new)), (grads, dx) = step(tv, ntv, x)
        out += [np.asarray(a, "float64") for a in [y, *grads, dx, *new]]
        tv = [v - LR * g for v, g in zip(tv, grads)]
        ntv = new
    return out


def _activation_residuals(jax, model, x):
    """The dtypes of the arrays of x's size the training call keeps for its
    backward."""
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]
    _, backward = jax.vjp(
        lambda v: model.stateless_call(tv, ntv, v, training=True)[0], x)
    return [str(leaf.dtype) for leaf in jax.tree_util.tree_leaves(backward)
            if getattr(leaf, "size", 0) == x.size]


def _resnet(keras, backward, name="resnet", extra=""):
    return model_counts.counts(keras, (
        f"model.name={name},model.model_params.bn_backward={backward}"
        f"{extra}"))


def compare_in_keras3():
    """In the child: every measurement the tests below read."""
    import json

    import jax
    import keras

    rng = np.random.default_rng(0)
    # 16 channels: the narrowest the Pallas kernel tiles (pallas_moments)
    x = (rng.standard_normal((16, 5, 5, 16)) * 2 + 1).astype("float32")
    out = {"diff": {}, "residuals": {}}
    for statistics, dtype, data_format, backward in CASES:
        xs = x.astype(dtype.replace("mixed_", ""))
        if data_format == "channels_first":
            xs = xs.transpose(0, 3, 1, 2)
        relu = backward == "vjp_relu"
        ref, got = (_train(jax, _bn_model(keras, s, b, xs.shape[1:], dtype,
                                          data_format, relu), xs)
                    for s, b in (("two_pass", "autodiff"),
                                 (statistics, backward)))
        out["diff"]["/".join((statistics, dtype, data_format, backward))] = [
            float(np.abs(a - b).max() / np.abs(a).max())
            for a, b in zip(ref, got)]
        if relu:  # the ReLU's zeros where Keras' ReLU layer has them
            y_ref, y_got = ref[0], got[0]
            out["relu_zeros"] = out.get("relu_zeros", []) + [
                int((y_ref == 0).sum()), int((y_got == 0).sum()),
                int(((y_ref == 0) != (y_got == 0)).sum())]
            # and inference: the moving statistics' path applies it too
            ref_m, got_m = (_bn_model(keras, s, b, xs.shape[1:], dtype,
                                      data_format, True)
                            for s, b in (("two_pass", "autodiff"),
                                         (statistics, backward)))
            out.setdefault("inference", []).append(float(np.abs(
                np.asarray(ref_m(xs, training=False), "float64")
                - np.asarray(got_m(xs, training=False), "float64")).max()))
    for backward, relu in (("autodiff", False), ("vjp", False),
                           ("autodiff", True), ("vjp_relu", True)):
        for dtype in ("float32", "mixed_float16"):
            xs = x.astype(dtype.replace("mixed_", ""))
            model = _bn_model(keras, "two_pass", backward, x.shape[1:],
                              dtype, "channels_last", relu)
            name = f"{backward}{'+relu' if relu else ''}/{dtype}"
            out["residuals"][name] = _activation_residuals(jax, model, xs)
    small = (",model.model_params.depth=8,train_dataset.image_size=8,"
             "train_dataset.num_classes=10")
    out["resnet_cifar"] = {b: _resnet(keras, b, "resnet_cifar", small)
                           for b in ("autodiff", "vjp", "vjp_relu")}
    out["resnet50"] = {b: _resnet(keras, b, extra=(
        ",train_dataset.image_size=32,train_dataset.num_classes=1000"))
        for b in ("vjp", "vjp_relu")}
    print(json.dumps(out))


@pytest.fixture(scope="module")
def compared():
    return keras3_child(__file__, "compare_in_keras3")


@pytest.mark.parametrize("case", ["/".join(c) for c in CASES])
def test_it_trains_as_keras_own(compared, case):
    # per step: output, d/dgamma, d/dbeta, d/dx, moving mean and variance;
    # float16 activations: their rounding (2^-11) bounds the difference
    diffs = compared["diff"][case]
    assert len(diffs) == 6 * STEPS
    tolerance = 2e-3 if "float16" in case else 2e-5
    assert max(diffs) <= tolerance, diffs


def test_it_keeps_x_alone_for_the_backward(compared):
    residuals = compared["residuals"]
    assert residuals["vjp/float32"] == ["float32"], residuals
    assert len(residuals["autodiff/float32"]) > 1, residuals
    # under a mixed policy, x is kept in its 16 bits, not as a float32 copy
    assert residuals["vjp/mixed_float16"] == ["float16"], residuals
    # with the ReLU inside: still x alone (its mask is recomputed), where
    # a batch norm and a ReLU layer keep more
    for dtype, kept in (("float32", "float32"), ("mixed_float16",
                                                  "float16")):
        assert residuals[f"vjp_relu+relu/{dtype}"] == [kept], residuals
        assert len(residuals[f"autodiff+relu/{dtype}"]) > 1, residuals


def test_the_fused_relu_zeroes_what_keras_relu_layer_zeroes(compared):
    # per vjp_relu case: Keras' zeros, ours, and where they differ
    zeros = compared["relu_zeros"]
    assert len(zeros) == 2 * 3
    for ref, got, differ in zip(zeros[::3], zeros[1::3], zeros[2::3]):
        assert ref == got > 0 and differ == 0, zeros
    assert compared["inference"] == [0.0, 0.0]  # in inference too


def test_the_resnets_keep_their_weights_and_flops(compared):
    plain = compared["resnet_cifar"]["autodiff"]
    assert plain["bn_classes"] == ["BatchNormalization"]
    for backward in ("vjp", "vjp_relu"):
        built = compared["resnet_cifar"][backward]
        assert built["bn_classes"] == ["VjpBatchNormalization"]
        for key in ("trainable", "macs"):
            assert built[key] == plain[key] > 0, key
        assert sum(built["relus"]) == sum(plain["relus"]) > 0
        r50 = compared["resnet50"][backward]
        assert r50["trainable"] == 25_557_032
        assert r50["bn_classes"] == ["VjpBatchNormalization"]
    # ResNet-50: 33 ReLUs after a batch norm, 16 after a block's add
    assert compared["resnet50"]["vjp"]["relus"] == [49, 0]
    assert compared["resnet50"]["vjp_relu"]["relus"] == [16, 33]


def test_tf_keras_and_other_backends_are_refused():
    from official_bench.runtime.keras_setup import keras
    with pytest.raises(ValueError, match="bn_backward vjp needs Keras 3"):
        batch_norm_layer(keras, "two_pass", "vjp", **BN)
    with pytest.raises(ValueError, match="unknown bn_backward 'fast'; "
                                         "valid: autodiff, vjp, vjp_relu$"):
        batch_norm_layer(keras, "two_pass", "fast", **BN)

    class TorchKeras3:
        ops = object()

        class backend:
            backend = staticmethod(lambda: "torch")
    with pytest.raises(ValueError, match="needs Keras 3 on JAX, not torch"):
        vjp_batch_norm_class(TorchKeras3, object)


def test_the_config_takes_it_on_jax_only():
    cfg = C.load_config(params_override=(
        "runtime.backend=jax,runtime.num_gpus=0,"
        "model.model_params.bn_backward=vjp"))
    assert cfg.model.model_params.bn_backward == "vjp"
    assert C.load_config().model.model_params.bn_backward == "autodiff"
    lines = config_error_lines("model.model_params.bn_backward=vjp")
    assert len(lines) == 1 and lines[0].startswith(
        "model.model_params.bn_backward:"), lines
    assert "needs runtime.backend jax" in lines[0]
    lines = config_error_lines(
        "runtime.backend=jax,model.model_params.bn_backward=fast")
    assert any("unknown bn_backward 'fast'; valid: autodiff, vjp, vjp_relu"
               in line
               for line in lines), lines
