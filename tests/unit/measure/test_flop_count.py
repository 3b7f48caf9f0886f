"""measure/flops.py: forward multiply-adds from a built Keras model's
shapes, against torchvision's ResNet-50 figure, hand counts, the image
size, and TensorFlow's own profiler count."""

import functools

import pytest

from official_bench.contracts import flops as contract
from official_bench.measure import flops
from official_bench.measure.mfu import TF_COUNTED_BY
from official_bench.models import resnet, resnet_cifar as cifar
from official_bench.runtime.keras_setup import keras

resnet_v15 = functools.partial(resnet.resnet_v15, keras=keras)
resnet_cifar = functools.partial(cifar.resnet_cifar, keras=keras)

L = keras.layers
TORCHVISION_RN50_GMACS = 4.09  # torchvision's ResNet50_Weights: 4.09 GFLOPS


@pytest.fixture(scope="module")
def rn50_224():
    return resnet_v15(50, num_classes=1000, image_size=224)


def test_resnet50_at_224_is_torchvision_s_4_09_g_multiply_adds(rn50_224):
    count = flops.count_forward(rn50_224)
    assert count.gmacs == pytest.approx(TORCHVISION_RN50_GMACS, rel=0.01)
    assert count.by_kind["Dense"] == 2048 * 1000
    assert not count.uncounted
    # 3 x 2 x 4.09: the 24.5 GFLOP per training image
    assert contract.training_gflop_per_image(count.gmacs) == pytest.approx(
        24.5, abs=0.05)


def test_tensorflow_s_count_agrees_within_one_percent(rn50_224):
    counted = flops.model_flops(rn50_224)
    assert counted.tf_forward_gflop == pytest.approx(
        2 * counted.forward_gmacs, rel=0.01)
    assert counted.tf_gflop_per_image == pytest.approx(
        counted.gflop_per_image, rel=0.01)


def test_half_the_image_side_is_a_quarter_of_the_conv_work():
    """64 and 128 pixels divide by ResNet's total stride 32, so every
    feature map halves its side: conv work / 4, the classifier unchanged."""
    small = flops.count_forward(resnet_v15(50, 1000, image_size=64))
    large = flops.count_forward(resnet_v15(50, 1000, image_size=128))
    assert large.by_kind["Conv2D"] == 4 * small.by_kind["Conv2D"]
    assert large.by_kind["Dense"] == small.by_kind["Dense"]


def _resnet_cifar_macs(depth, size, width=1, classes=10):
    """He et al.'s CIFAR ResNet by hand: 3x3 stem, three stages of n basic
    blocks (two 3x3 convs each), 1x1 projections where the stage widens."""
    n = (depth - 2) // 6
    macs = size * size * 9 * 3 * 16 * width  # stem
    channels, side = 16 * width, size
    for stage, filters in enumerate((16, 32, 64)):
        filters *= width
        for i in range(n):
            if i == 0 and stage > 0:
                side //= 2
                macs += side * side * channels * filters  # projection
            macs += side * side * 9 * channels * filters
            macs += side * side * 9 * filters * filters
            channels = filters
    return macs + channels * classes


@pytest.mark.parametrize("depth, size, width", [(20, 32, 1), (8, 16, 1),
                                                (8, 32, 2), (14, 64, 1)])
def test_resnet_cifar_counts_as_its_shapes_say(depth, size, width):
    model = resnet_cifar(depth, num_classes=10, image_size=size, width=width)
    assert flops.count_forward(model).macs == \
        _resnet_cifar_macs(depth, size, width)


def test_each_layer_kind_by_hand():
    x = keras.Input((8, 8, 4))
    a = L.Conv2D(6, 3, padding="same", groups=2, name="grouped")(x)
    b = L.DepthwiseConv2D(3, depth_multiplier=2, name="dw")(a)  # 6x6x12
    c = L.SeparableConv2D(5, 3, name="sep")(b)  # 4x4x5
    d = L.Conv2DTranspose(3, 2, strides=2, name="up")(c)  # 8x8x3
    seq = L.Reshape((64, 3))(d)
    shared = L.Dense(7, name="shared")
    e = shared(seq)  # a dense layer on every one of 64 positions
    f = shared(L.Dense(3, name="pre")(seq))  # called twice
    model = keras.Model(x, [e, f])
    count = flops.count_forward(model)
    expect = {
        "Conv2D": 8 * 8 * 6 * (3 * 3 * 2),  # each output: 3x3 x 4/2 inputs
        "DepthwiseConv2D": 6 * 6 * 12 * 9,
        "SeparableConv2D": 4 * 4 * 12 * (9 + 5),
        "Conv2DTranspose": 4 * 4 * 5 * (2 * 2 * 3),
        "Dense": 64 * 3 * 7 * 2 + 64 * 3 * 3,
    }
    assert count.by_kind == expect and count.macs == sum(expect.values())


def test_a_nested_model_counts_once_per_call():
    inner_in = keras.Input((6, 6, 2))
    inner = keras.Model(inner_in, L.Conv2D(3, 3, use_bias=False)(inner_in))
    x = keras.Input((6, 6, 2))
    y = L.Concatenate()([inner(x), inner(L.Permute((2, 1, 3))(x))])
    model = keras.Model(x, L.Dense(2, use_bias=False)(L.Flatten()(y)))
    conv = 4 * 4 * 3 * (3 * 3 * 2)
    assert flops.count_forward(model).by_kind == {
        "Conv2D": 2 * conv, "Dense": 4 * 4 * 6 * 2}
    assert flops.tf_cost_analysis(model) == pytest.approx(
        2 * flops.count_forward(model).gmacs, rel=1e-9)


def test_tf_count_is_twice_the_multiply_adds_without_biases():
    """Without bias adds TensorFlow's count is exactly 2 FLOPs per
    multiply-add of the same layers: the two counts agree op by op."""
    x = keras.Input((12, 12, 3))
    y = L.Conv2D(8, 3, strides=2, use_bias=False)(x)
    y = L.DepthwiseConv2D(3, use_bias=False)(y)
    y = L.Flatten()(y)
    y = L.Dense(10, use_bias=False)(y)
    model = keras.Model(x, y)
    gmacs = flops.count_forward(model).gmacs
    assert flops.tf_cost_analysis(model) == pytest.approx(2 * gmacs,
                                                          rel=1e-9)


class _Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.conv = L.Conv2D(4, 3, use_bias=False)
        self.pool = L.GlobalAveragePooling2D()

    def call(self, x):
        return self.pool(self.conv(x))


def test_a_subclassed_model_is_counted_by_tensorflow():
    model = _Subclassed()
    model.build((None, 10, 10, 3))
    with pytest.raises(ValueError, match="subclassed"):
        flops.count_forward(model)
    # tf_cost_analysis reads the input from model.inputs: none here.
    assert flops.model_flops(model) is None
    inputs = keras.Input((10, 10, 3))
    functional = keras.Model(inputs, model(inputs))
    counted = flops.model_flops(functional)
    # the subclassed layer's conv has no graph node of its own
    assert counted.counted_by == TF_COUNTED_BY
    # 8x8 outputs x 4 filters x 27 inputs, plus the pool's mean
    assert counted.forward_gmacs * 1e9 == pytest.approx(8 * 8 * 4 * 27,
                                                        rel=0.1)
