"""models/channel_pad.py: model_params.pad_input_channels. On Keras 3 (JAX,
in a child Python) ResNet v1.5's stem, built by the code resnet_v15 builds
it with, keeps its 7x7x3x64 kernel, computes what the unpadded stem
computes (output and kernel gradient, the same weights, float32) while the
convolution it compiles sees 4 channels, and keeps the trainable
parameters and layer-shape FLOPs of the unpadded stem on either Keras (the
rest of the model is built by the same code either way). resnet_v15,
resnet_cifar and the factory hand the key to the stem (tf-keras, which
cannot build the padded layer, says so)."""

import json

import numpy as np
import pytest

from official_bench import config as C
from official_bench.models import factory
from support.helpers import keras3_child
from support.stem_models import (
    convolution_types,
    counts,
    output_and_kernel_grad,
    stem,
)


def compare_in_keras3():
    """In the child: the stem with and without the padding."""
    import jax
    import keras

    x = np.random.default_rng(0).standard_normal((2, 16, 16, 3)).astype(
        "float32")
    stems = stem(keras), stem(keras, pad=4)
    stems[1].set_weights(stems[0].get_weights())
    (y0, g0), (y1, g1) = (output_and_kernel_grad(jax, m, x) for m in stems)
    print(json.dumps({
        "counts": [counts(m, keras) for m in stems],
        "stem_max_diff": float(np.abs(y0 - y1).max()),
        "stem_max": float(np.abs(y0).max()),
        "grad": [g0.tolist(), g1.tolist()],
        "first_conv": [convolution_types(jax, m, x)[0] for m in stems],
    }))


@pytest.fixture(scope="module")
def compared():
    return keras3_child(__file__, "compare_in_keras3")


def test_padded_stem_computes_the_unpadded_result(compared):
    assert compared["stem_max_diff"] <= 1e-5 * compared["stem_max"]
    plain, padded = (np.asarray(g) for g in compared["grad"])
    assert plain.shape == padded.shape == (7, 7, 3, 64)
    np.testing.assert_allclose(padded, plain, rtol=1e-4, atol=1e-6)
    assert np.abs(plain).max() > 0


def test_the_compiled_stem_convolves_four_channels(compared):
    # 16x16 padded by 3 on each side for the 7x7/2 convolution.
    assert compared["first_conv"] == ["2x22x22x3", "2x22x22x4"]


def test_the_padded_stem_keeps_the_weights_and_flops(compared):
    from official_bench.runtime.keras_setup import keras
    plain, padded = compared["counts"]
    assert padded["stem_kernel"] == plain["stem_kernel"] == [7, 7, 3, 64]
    assert (plain["stem_class"], padded["stem_class"]) == (
        "Conv2D", "ChannelPaddedConv2D")
    tf_keras = counts(stem(keras), keras)  # the TensorFlow build
    for key in ("trainable", "macs"):
        assert padded[key] == plain[key] == tf_keras[key] > 0, key


def test_the_models_and_the_factory_hand_the_key_to_the_stem():
    """tf-keras cannot build the padded stem (no keras.ops): its
    ValueError shows the key reached it; without the key both build."""
    from official_bench.models.resnet import resnet_v15
    from official_bench.runtime.keras_setup import keras
    small = dict(depth=18, num_classes=10, image_size=32,
                 stage_filters=(8, 8, 8, 8), keras=keras)
    assert resnet_v15(**small)
    with pytest.raises(ValueError, match="pad_input_channels needs Keras 3"):
        resnet_v15(**small, pad_input_channels=4)
    base = ("runtime.backend=jax,runtime.num_gpus=0,model.name=resnet_cifar,"
            "model.model_params.depth=8,train_dataset.image_size=8,"
            "train_dataset.num_classes=10")
    plain = C.load_config(params_override=base)
    assert factory.build_model(plain, 0, keras=keras, backend="jax")
    padded = C.load_config(
        params_override=base + ",model.model_params.pad_input_channels=4")
    with pytest.raises(ValueError, match="pad_input_channels needs Keras 3"):
        factory.build_model(padded, 0, keras=keras, backend="jax")
