"""models/stem_s2d.py: model_params.stem_space_to_depth. On Keras 3 (JAX,
in a child Python) ResNet v1.5's stem, built by the code resnet_v15 builds
it with, keeps its 7x7x3x64 kernel and computes what the plain stem
computes (output and kernel gradient, float32; also on an odd-sized image
and with the channels padded to 4 first), while the convolution JAX
compiles is a 4x4 one over 12 (16) channels at half the resolution; the
trainable parameters and layer-shape FLOPs stay the plain stem's on
either Keras. The factory hands the key to resnet_v15; tf-keras and a
channels_first or non-stride-2 layer are refused in one line; the config
takes the key on jax for model resnet only."""

import json

import numpy as np
import pytest

from official_bench import config as C
from official_bench.models.stem_s2d import s2d_conv2d
from support.helpers import config_error_lines, keras3_child
from support.stem_models import (
    convolution_types,
    counts,
    output_and_kernel_grad,
    stem,
)


def compare_in_keras3():
    """In the child: the stem plain and space-to-depth."""
    import jax
    import keras

    out = {}
    for size, pad in ((16, None), (15, None), (16, 4)):
        x = np.random.default_rng(size).standard_normal(
            (2, size, size, 3)).astype("float32")
        plain = stem(keras, size)
        s2d = stem(keras, size, pad, space_to_depth=True)
        s2d.set_weights(plain.get_weights())
        (y0, g0), (y1, g1) = (output_and_kernel_grad(jax, m, x)
                              for m in (plain, s2d))
        out[f"{size}/{pad}"] = {
            "y_diff": float(np.abs(y0 - y1).max() / np.abs(y0).max()),
            "shapes": [list(y0.shape), list(y1.shape)],
            "grad_diff": float(np.abs(g0 - g1).max() / np.abs(g0).max()),
            "grad_shapes": [list(g0.shape), list(g1.shape)],
            "convolution": [convolution_types(jax, m, x)
                            for m in (plain, s2d)],
            "counts": [counts(m, keras) for m in (plain, s2d)]}
    print(json.dumps(out))


@pytest.fixture(scope="module")
def compared():
    return keras3_child(__file__, "compare_in_keras3")


@pytest.mark.parametrize("case", ["16/None", "15/None", "16/4"])
def test_space_to_depth_computes_the_plain_stem(compared, case):
    got = compared[case]
    assert got["shapes"][0] == got["shapes"][1]
    assert got["grad_shapes"] == [[7, 7, 3, 64], [7, 7, 3, 64]]
    assert got["y_diff"] < 1e-5, got
    assert got["grad_diff"] < 1e-4, got


def test_the_compiled_stem_is_a_4x4_convolution_of_blocks(compared):
    # 16 + 2*3 = 22 padded -> 11x11 blocks of 12 channels (16 when the
    # image is padded to 4 channels); 15 + 6 = 21 -> padded to 22 -> 11
    assert compared["16/None"]["convolution"] == [
        ["2x22x22x3", "7x7x3x64"], ["2x11x11x12", "4x4x12x64"]]
    assert compared["15/None"]["convolution"][1] == [
        "2x11x11x12", "4x4x12x64"]
    assert compared["16/4"]["convolution"][1] == [
        "2x11x11x16", "4x4x16x64"]


def test_the_stem_keeps_its_weights_and_flops(compared):
    from official_bench.runtime.keras_setup import keras
    plain, s2d = compared["16/None"]["counts"]
    assert s2d["stem_kernel"] == plain["stem_kernel"] == [7, 7, 3, 64]
    assert (plain["stem_class"], s2d["stem_class"]) == (
        "Conv2D", "SpaceToDepthConv2D")
    tf_keras = counts(stem(keras), keras)
    for key in ("trainable", "macs"):
        assert s2d[key] == plain[key] == tf_keras[key] > 0, key


def test_refusals_and_the_factory():
    from official_bench.models import factory
    from official_bench.runtime.keras_setup import keras
    with pytest.raises(ValueError, match="stem_space_to_depth needs Keras 3"):
        stem(keras, space_to_depth=True)
    base = ("runtime.backend=jax,runtime.num_gpus=0,model.name=resnet,"
            "model.model_params.depth=18,train_dataset.image_size=32,"
            "train_dataset.num_classes=10")
    cfg = C.load_config(params_override=(
        base + ",model.model_params.stem_space_to_depth=true"))
    with pytest.raises(ValueError, match="stem_space_to_depth needs Keras 3"):
        factory.build_model(cfg, 0, keras=keras, backend="jax")
    assert factory.build_model(C.load_config(params_override=base), 0,
                               keras=keras, backend="jax")


def test_only_a_channels_last_stride_2_valid_convolution():
    class FakeKeras3:
        ops = object()
    for bad in (dict(data_format="channels_first", strides=2,
                     padding="valid"),
                dict(data_format="channels_last", strides=1,
                     padding="same")):
        with pytest.raises(ValueError, match="channels_last convolution "
                                             "of stride 2"):
            s2d_conv2d(FakeKeras3, None, filters=8, kernel_size=7, **bad)


def test_the_config_takes_it_on_jax_for_resnet_only():
    jax = "runtime.backend=jax,runtime.num_gpus=0,"
    cfg = C.load_config(params_override=(
        jax + "model.name=resnet,model.model_params.stem_space_to_depth="
        "true"))
    assert cfg.model.model_params.stem_space_to_depth is True
    assert C.load_config().model.model_params.stem_space_to_depth is False
    lines = config_error_lines(
        "model.model_params.stem_space_to_depth=true")
    assert len(lines) == 1 and lines[0].startswith(
        "model.model_params.stem_space_to_depth:"), lines
    assert "needs runtime.backend jax" in lines[0]
    lines = config_error_lines(
        jax + "model.name=resnet_cifar,"
        "model.model_params.stem_space_to_depth=true")
    assert any("rearranges the ImageNet ResNet's 7x7/2 stem; model.name "
               "is 'resnet_cifar' (valid: resnet)" in line
               for line in lines), lines
