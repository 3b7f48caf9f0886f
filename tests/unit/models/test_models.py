"""ResNet v1.5 shapes and parameter counts."""

import functools

import numpy as np
import pytest

from official_bench import config as C
from official_bench.models import factory, resnet, resnet_cifar as cifar
from official_bench.runtime import precision
from official_bench.runtime.keras_setup import keras

# The TensorFlow backend's Keras (tf-keras); tests/unit/jax_backend builds
# the same definitions with Keras 3.
resnet_v15 = functools.partial(resnet.resnet_v15, keras=keras)
resnet_cifar = functools.partial(cifar.resnet_cifar, keras=keras)
build_model = functools.partial(factory.build_model, keras=keras)


def trainable(model):
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


@pytest.fixture(scope="module")
def rn50():
    return resnet_v15(50, num_classes=1000, image_size=224)


def test_resnet50_has_torchvision_parameter_count(rn50):
    assert trainable(rn50) == 25_557_032
    # plus BN moving mean/variance: 2 x 26,560 channels
    assert rn50.count_params() == 25_557_032 + 53_120


def test_resnet50_stage_shapes_are_v15(rn50):
    shapes = {l.name: tuple(l.output.shape[1:]) for l in rn50.layers}
    assert shapes["stem_pool"] == (56, 56, 64)
    assert shapes["stage1_block3_out"] == (56, 56, 256)
    assert shapes["stage2_block4_out"] == (28, 28, 512)
    assert shapes["stage3_block6_out"] == (14, 14, 1024)
    assert shapes["stage4_block3_out"] == (7, 7, 2048)
    assert shapes["probs"] == (1000,)


def test_v15_downsamples_on_the_3x3_conv(rn50):
    first_1x1 = rn50.get_layer("stage2_block1_a_conv")
    three = rn50.get_layer("stage2_block1_b_conv")
    proj = rn50.get_layer("stage2_block1_proj_conv")
    assert first_1x1.strides == (1, 1)
    assert three.strides == (2, 2) and three.kernel_size == (3, 3)
    assert proj.strides == (2, 2)


def test_no_conv_bias_bn_constants_and_decay_only_on_kernels(rn50):
    convs = [l for l in rn50.layers if l.__class__.__name__ == "Conv2D"]
    assert convs and all(not c.use_bias for c in convs)
    assert all(c.kernel_regularizer is not None for c in convs)
    bns = [l for l in rn50.layers
           if l.__class__.__name__ == "BatchNormalization"]
    assert all(b.momentum == 0.9 and b.epsilon == 1e-5 for b in bns)
    assert all(b.gamma_regularizer is None and b.beta_regularizer is None
               for b in bns)
    fc = rn50.get_layer("fc")
    assert fc.kernel_regularizer is not None and fc.bias_regularizer is None
    # 53 conv kernels + fc kernel carry weight decay.
    assert len(rn50.losses) == len(convs) + 1 == 54


def test_channels_first_has_same_parameters(rn50):
    nchw = resnet_v15(50, data_format="channels_first")
    assert nchw.count_params() == rn50.count_params()
    assert nchw.get_layer("stage4_block3_out").output.shape[1:] == \
        (2048, 7, 7)


@pytest.mark.parametrize("depth,params", [(18, 11_689_512),
                                          (34, 21_797_672)])
def test_other_depths(depth, params):
    assert trainable(resnet_v15(depth)) == params


def test_zero_init_last_bn():
    m = resnet_v15(18, zero_init_last_bn=True, image_size=64)
    assert not np.any(m.get_layer("stage1_block1_b_bn").gamma.numpy())
    assert np.all(m.get_layer("stage1_block1_a_bn").gamma.numpy() == 1)


def test_resnet_cifar_depth_and_width():
    m = resnet_cifar(20, num_classes=10)
    assert m.get_layer("stage3_block3_out").output.shape[1:] == (8, 8, 64)
    wide = resnet_cifar(8, num_classes=10, width=2)
    assert wide.get_layer("stage3_block1_out").output.shape[-1] == 128
    with pytest.raises(ValueError, match="6n\\+2"):
        resnet_cifar(10)


def test_float32_output_under_mixed_precision():
    precision.set_policy("float16")
    try:
        m = resnet_cifar(8, num_classes=10, image_size=16)
        assert m.get_layer("stage1_block1_a_conv").compute_dtype == "float16"
        assert m.output.dtype == "float32"
    finally:
        precision.reset_policy()


def test_factory_follows_dataset_classes_and_input_dtype():
    cfg = C.load_config(params_override=(
        "model.name=resnet_cifar,train_dataset.num_classes=7,"
        "train_dataset.image_size=16,train_dataset.dtype=bf16"))
    m = build_model(cfg)
    assert m.output.shape[-1] == 7
    assert m.input.dtype == "bfloat16"
    assert m.input.shape[1:] == (16, 16, 3)


def test_rescale_inputs_standardises_in_the_model():
    m = resnet_cifar(8, num_classes=10, image_size=8, rescale_inputs=True)
    layer = m.get_layer("standardize")
    x = np.full((1, 8, 8, 3), 0.485, np.float32)
    out = layer(x).numpy()
    assert abs(out[0, 0, 0, 0]) < 1e-4  # red channel: mean removed


@pytest.mark.parametrize("num_gpus,dtype,expected", [
    (0, "float32", "channels_last"),
    (0, "bfloat16", "channels_last"),
    (0, "float16", "channels_last"),
    (1, "float32", "channels_first"),
    (1, "float16", "channels_first"),  # grappler turns it to NHWC on Volta+
    (2, "bfloat16", "channels_last"),  # tensor-core only: built NHWC
])
def test_auto_data_format_by_device_and_precision(num_gpus, dtype, expected):
    from official_bench.models.factory import resolve_data_format
    assert resolve_data_format("auto", num_gpus, dtype) == expected
    # An explicit choice always wins.
    assert resolve_data_format("channels_first", 0, dtype) == "channels_first"
    # XLA on the JAX backend picks convolution layouts itself: NHWC.
    assert resolve_data_format("auto", num_gpus, dtype, "jax") == \
        "channels_last"


def test_factory_passes_the_run_precision_to_the_layout_choice(monkeypatch):
    seen = []
    monkeypatch.setattr(factory, "resolve_data_format",
                        lambda *a: seen.append(a) or "channels_last")
    cfg = C.load_config(params_override=(
        "model.name=resnet_cifar,train_dataset.image_size=8,"
        "train_dataset.dtype=bfloat16"))
    factory.build_model(cfg, num_gpus=1, keras=keras)
    assert seen == [("auto", 1, "bfloat16", "tensorflow")]
