"""models/stem_pool.py: model_params.stem_pool. On Keras 3 (JAX, in a
child Python) the shifted max-pool gives MaxPooling2D(3, 2, 'same')'s
output (odd and even sides, channels_last and channels_first) and its
gradient on tie-free input, and through a ReLU (zero ties) as well; its
compiled gradient has no select_and_scatter (Keras' has); ResNet-50 built
with it keeps 25,557,032 trainable parameters and passes the FLOP check.
tf-keras and unknown names are refused in one line; the config takes the
key on jax for model resnet only."""

import json

import numpy as np
import pytest

from official_bench import config as C
from official_bench.models.stem_pool import same_padding, stem_max_pool
from support.helpers import config_error_lines, keras3_child

CASES = ("8/channels_last", "7/channels_last", "8/channels_first",
         "7/channels_first")


def _pools(keras, data_format):
    return [stem_max_pool(keras, how, data_format=data_format)
            for how in ("keras", "shifted")]


def _output_and_grad(jax, layer, x, upstream, relu=False):
    """The layer's output and d(sum(y * upstream))/dx (through a ReLU
    first when `relu`)."""
    def loss(x):
        y = layer(jax.nn.relu(x) if relu else x)
        return (y * upstream).sum(), y
    (_, y), g = jax.jit(jax.value_and_grad(loss, has_aux=True))(x)
    return np.asarray(y), np.asarray(g)


def _has_select_and_scatter(jax, layer, x):
    hlo = jax.jit(jax.grad(lambda v: layer(v).sum())).lower(x).as_text()
    return "select_and_scatter" in hlo


def _resnet50(keras):
    """ResNet-50 with the shifted pool: its trainable parameters, the
    pool's class and the FLOP check's two counts (GFLOP per image)."""
    import jax

    from official_bench.jax_backend.flop_check import forward_gflop
    from official_bench.measure.layer_flops import count_forward
    from official_bench.models import factory
    cfg = C.load_config(params_override=(
        "runtime.backend=jax,runtime.num_gpus=0,model.name=resnet,"
        "train_dataset.image_size=32,train_dataset.num_classes=1000,"
        "model.model_params.stem_pool=shifted"))
    model = factory.build_model(cfg, 0, keras=keras, backend="jax")
    return {"trainable": int(sum(np.prod(w.shape)
                                 for w in model.trainable_weights)),
            "pool_class": type(model.get_layer("stem_pool")).__name__,
            "layer_gflop": 2 * count_forward(model, keras).macs / 1e9,
            "xla_gflop": forward_gflop(jax, model)}


def compare_in_keras3():
    """In the child: every measurement the tests below read."""
    import jax
    import keras

    out = {}
    for case in CASES:
        size, data_format = case.split("/")
        shape = (2, int(size), int(size), 4)
        if data_format == "channels_first":
            shape = (2, 4, int(size), int(size))
        rng = np.random.default_rng(int(size))
        x = rng.standard_normal(shape).astype("float32")
        plain, shifted = _pools(keras, data_format)
        upstream = rng.standard_normal(
            plain.compute_output_shape(shape)).astype("float32")
        got = {}
        for relu in (False, True):
            (y0, g0), (y1, g1) = (_output_and_grad(jax, p, x, upstream, relu)
                                  for p in (plain, shifted))
            got["relu" if relu else "plain"] = {
                "shapes": [list(y0.shape), list(y1.shape)],
                "y_diff": float(np.abs(y0 - y1).max()),
                "grad_diff": float(np.abs(g0 - g1).max()),
                "grad_scale": float(np.abs(g0).max())}
        # The pool's own gradient at ReLU's zero ties: split, same sum.
        r = np.maximum(x, 0)
        g0, g1 = (_output_and_grad(jax, p, r, upstream)[1]
                  for p in (plain, shifted))
        got["ties"] = {"differ": bool(np.abs(g0 - g1).max() > 1e-3),
                       "sums": [float(g0.sum()), float(g1.sum())]}
        got["select_and_scatter"] = [_has_select_and_scatter(jax, p, x)
                                     for p in (plain, shifted)]
        out[case] = got
    out["resnet50"] = _resnet50(keras)
    print(json.dumps(out))


@pytest.fixture(scope="module")
def compared():
    return keras3_child(__file__, "compare_in_keras3")


@pytest.mark.parametrize("case", CASES)
def test_output_and_gradient_are_keras_own(compared, case):
    for kind in ("plain", "relu"):  # tie-free, then through a ReLU
        got = compared[case][kind]
        assert got["shapes"][0] == got["shapes"][1], got
        assert got["y_diff"] == 0.0, (kind, got)
        assert got["grad_diff"] <= 1e-6 * got["grad_scale"], (kind, got)


@pytest.mark.parametrize("case", CASES)
def test_ties_split_and_keep_the_gradient_s_sum(compared, case):
    ties = compared[case]["ties"]
    assert ties["differ"]  # the pool's own input gradient at zero ties
    assert ties["sums"][0] == pytest.approx(ties["sums"][1], rel=1e-5)


@pytest.mark.parametrize("case", CASES)
def test_its_gradient_has_no_select_and_scatter(compared, case):
    assert compared[case]["select_and_scatter"] == [True, False]


def test_resnet50_keeps_its_parameters_and_passes_the_flop_check(compared):
    from official_bench.measure.mfu import CHECK_TOLERANCE
    got = compared["resnet50"]
    assert got["trainable"] == 25_557_032
    assert got["pool_class"] == "ShiftedMaxPooling2D"
    assert got["xla_gflop"] and abs(got["xla_gflop"] - got["layer_gflop"]) \
        <= CHECK_TOLERANCE["xla"] * got["xla_gflop"], got


def test_same_padding_is_keras_placement():
    # even sides pad one after; odd sides one on each side
    assert [same_padding(n) for n in (8, 7, 112, 1)] == [
        (0, 1), (1, 1), (0, 1), (1, 1)]


def test_refusals():
    from official_bench.runtime.keras_setup import keras
    with pytest.raises(ValueError, match="stem_pool shifted needs Keras 3"):
        stem_max_pool(keras, "shifted")
    with pytest.raises(ValueError, match="unknown stem_pool 'fast'; valid: "
                                         "keras, shifted$"):
        stem_max_pool(keras, "fast")
    assert type(stem_max_pool(keras)).__name__ == "MaxPooling2D"


def test_the_config_takes_it_on_jax_for_resnet_only():
    jax = "runtime.backend=jax,runtime.num_gpus=0,"
    cfg = C.load_config(params_override=(
        jax + "model.name=resnet,model.model_params.stem_pool=shifted"))
    assert cfg.model.model_params.stem_pool == "shifted"
    assert C.load_config().model.model_params.stem_pool == "keras"
    lines = config_error_lines("model.model_params.stem_pool=shifted")
    assert len(lines) == 1 and lines[0].startswith(
        "model.model_params.stem_pool:"), lines
    assert "needs runtime.backend jax" in lines[0]
    lines = config_error_lines(
        jax + "model.name=resnet_cifar,model.model_params.stem_pool=shifted")
    assert any("model.name is 'resnet_cifar' (valid: resnet)" in line
               for line in lines), lines
    lines = config_error_lines(jax + "model.model_params.stem_pool=fast")
    assert any("unknown stem_pool 'fast'; valid: keras, shifted" in line
               for line in lines), lines
