"""ResNet v1.5 (ImageNet family: 18/34/50/101/152) in plain Keras layers.

v1.5 differs from the original v1 in where a bottleneck block downsamples:
on the 3x3 convolution rather than the first 1x1 (the projection shortcut
keeps its stride). Conventions follow Model Garden r2.3 and NVIDIA's
example: no conv biases (BN follows), BN momentum 0.9 / epsilon 1e-5, L2
weight decay on conv and dense kernels only, optional zero-init of each
block's last BN gamma, and a float32 softmax under mixed precision.
ResNet-50 with 1000 classes has 25,557,032 trainable parameters.

One definition for both backends: every builder takes the Keras module to
build with (`keras=`: tf-keras for the TensorFlow backend, Keras 3 for the
JAX one) and uses only layers both have, so this module imports neither.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

import numpy as np

from official_bench.contracts.imagenet import (
    IMAGENET_MEAN_RGB,
    IMAGENET_STD_RGB,
)
from official_bench.models.bn_statistics import batch_norm_layer, fused_relu
from official_bench.models.channel_pad import padded_conv2d
from official_bench.models.layer_classes import layer_class
from official_bench.models.stem_pool import stem_max_pool
from official_bench.models.stem_s2d import s2d_conv2d

BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5

# depth -> (block kind, blocks per stage)
RESNET_SPECS = {
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3)),
}


@dataclasses.dataclass
class BlockOptions:
    """What every conv/BN in one network shares, the Keras to build with
    included."""
    keras: Any
    data_format: str = "channels_last"
    weight_decay: float = 1e-4
    zero_init_last_bn: bool = False
    bn_statistics: str = "two_pass"  # models/bn_statistics.py
    bn_backward: str = "autodiff"  # models/bn_backward.py

    @property
    def layers(self):
        return self.keras.layers

    @property
    def bn_axis(self) -> int:
        return 1 if self.data_format == "channels_first" else -1

    def regularizer(self):
        return self.keras.regularizers.l2(self.weight_decay) \
            if self.weight_decay else None


def conv(x, filters: int, kernel: int, stride: int, opts: BlockOptions,
         name: str, pad_channels: Optional[int] = None,
         space_to_depth: bool = False):
    """A bias-free conv with v1.5's padding: explicit pad when strided;
    `pad_channels`: its input padded with zero channels (channel_pad.py);
    `space_to_depth`: computed on the input's 2x2 blocks (stem_s2d.py)."""
    if stride > 1 and kernel > 1:
        pad = (kernel - 1) // 2
        x = opts.layers.ZeroPadding2D(pad, data_format=opts.data_format,
                                 name=name + "_pad")(x)
        padding = "valid"
    else:
        padding = "same"
    args = dict(filters=filters, kernel_size=kernel, strides=stride,
                padding=padding, use_bias=False,
                kernel_initializer="he_normal",
                kernel_regularizer=opts.regularizer(),
                data_format=opts.data_format, name=name)
    if space_to_depth:
        return s2d_conv2d(opts.keras, pad_channels, **args)(x)
    if pad_channels:
        return padded_conv2d(opts.keras, pad_channels, **args)(x)
    return opts.layers.Conv2D(**args)(x)


def batch_norm(x, opts: BlockOptions, name: str, zero_gamma: bool = False,
               relu: bool = False):
    """`relu`: a ReLU follows (the layer takes it in under bn_backward
    vjp_relu)."""
    return batch_norm_layer(
        opts.keras, opts.bn_statistics, opts.bn_backward, relu,
        axis=opts.bn_axis, momentum=BN_MOMENTUM, epsilon=BN_EPSILON,
        gamma_initializer="zeros" if zero_gamma else "ones", name=name)(x)


def conv_bn(x, filters, kernel, stride, opts, name, relu=True,
            zero_gamma=False, pad_channels=None, space_to_depth=False):
    x = conv(x, filters, kernel, stride, opts, name + "_conv", pad_channels,
             space_to_depth)
    x = batch_norm(x, opts, name + "_bn", zero_gamma=zero_gamma, relu=relu)
    if relu and not fused_relu(opts.bn_backward, relu):
        x = opts.layers.Activation("relu", name=name + "_relu")(x)
    return x


def _shortcut(x, filters: int, stride: int, opts: BlockOptions, name: str):
    """Identity when shapes match, else a strided 1x1 projection + BN."""
    in_channels = x.shape[opts.bn_axis]
    if stride == 1 and in_channels == filters:
        return x
    return conv_bn(x, filters, 1, stride, opts, name + "_proj", relu=False)


def basic_block(x, filters: int, stride: int, opts: BlockOptions, name: str):
    """Two 3x3 convs (ResNet-18/34 and the CIFAR ResNets)."""
    shortcut = _shortcut(x, filters, stride, opts, name)
    y = conv_bn(x, filters, 3, stride, opts, name + "_a")
    y = conv_bn(y, filters, 3, 1, opts, name + "_b", relu=False,
                zero_gamma=opts.zero_init_last_bn)
    y = opts.layers.Add(name=name + "_add")([y, shortcut])
    return opts.layers.Activation("relu", name=name + "_out")(y)


def bottleneck_block(x, filters: int, stride: int, opts: BlockOptions,
                     name: str):
    """1x1 -> 3x3 (strided: the v1.5 change) -> 1x1 x4."""
    shortcut = _shortcut(x, filters * 4, stride, opts, name)
    y = conv_bn(x, filters, 1, 1, opts, name + "_a")
    y = conv_bn(y, filters, 3, stride, opts, name + "_b")
    y = conv_bn(y, filters * 4, 1, 1, opts, name + "_c", relu=False,
                zero_gamma=opts.zero_init_last_bn)
    y = opts.layers.Add(name=name + "_add")([y, shortcut])
    return opts.layers.Activation("relu", name=name + "_out")(y)


def standardize_layer(keras, name: str = "standardize"):
    """(x * 255 - mean) / std: for inputs in [0, 1] (rescale_inputs), in
    the layer's compute dtype; one class per Keras module."""
    return layer_class(keras, _define_standardize)(name=name)


def _define_standardize(keras) -> type:
    class Standardize(keras.layers.Layer):
        """Subtracts the ImageNet mean and divides by its std."""

        def call(self, x):
            dtype = _numpy_dtype(self.compute_dtype)
            mean = np.asarray(IMAGENET_MEAN_RGB, dtype)
            std = np.asarray(IMAGENET_STD_RGB, dtype)
            return (x * np.asarray(255.0, dtype) - mean) / std

    return Standardize


def _numpy_dtype(name: str):
    """numpy's dtype for a Keras dtype name (bfloat16 from ml_dtypes, which
    both TensorFlow and JAX depend on)."""
    if name == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return np.dtype(name)


def image_input(keras, image_size: int, channels: int, input_dtype: str,
                batch_size: Optional[int], data_format: str,
                rescale_inputs: bool, input_layer=None):
    """The NHWC input every pipeline produces, moved to `data_format`;
    `input_layer` first (transfer_uint8: models/device_normalize.py)."""
    inputs = keras.Input(shape=(image_size, image_size, channels),
                         batch_size=batch_size, dtype=input_dtype,
                         name="images")
    x = inputs if input_layer is None else input_layer(inputs)
    if rescale_inputs:
        x = standardize_layer(keras)(x)
    if data_format == "channels_first":
        x = keras.layers.Permute((3, 1, 2), name="to_nchw")(x)
    return inputs, x


def classifier(x, num_classes: int, opts: BlockOptions):
    """Global pool -> dense -> softmax kept in float32 for stable losses."""
    layers = opts.layers
    x = layers.GlobalAveragePooling2D(data_format=opts.data_format,
                                      name="avg_pool")(x)
    x = layers.Dense(num_classes,
                     kernel_initializer=opts.keras.initializers.RandomNormal(
                         stddev=0.01),
                     kernel_regularizer=opts.regularizer(),
                     name="fc")(x)
    return layers.Activation("softmax", dtype="float32", name="probs")(x)


def resnet_v15(depth: int = 50, num_classes: int = 1000,
               image_size: int = 224, channels: int = 3,
               data_format: str = "channels_last",
               weight_decay: float = 1e-4, zero_init_last_bn: bool = False,
               rescale_inputs: bool = False, input_dtype: str = "float32",
               batch_size: Optional[int] = None,
               stage_filters: Sequence[int] = (64, 128, 256, 512),
               input_layer=None, *, keras,
               pad_input_channels: Optional[int] = None,
               bn_statistics: str = "two_pass",
               stem_space_to_depth: bool = False,
               stem_pool: str = "keras", bn_backward: str = "autodiff"):
    """Builds ResNet v1.5 of the given depth as a functional model of
    `keras` (tf_keras or Keras 3); `pad_input_channels` (Keras 3): the
    stem sees the image padded to that many channels; `bn_statistics`:
    models/bn_statistics.py; `stem_space_to_depth` (Keras 3): the stem
    computed on the image's 2x2 blocks (models/stem_s2d.py); `stem_pool`:
    how its max-pool is computed (models/stem_pool.py); `bn_backward`:
    models/bn_backward.py."""
    if depth not in RESNET_SPECS:
        raise ValueError(f"unknown ResNet depth {depth}; valid: "
                         f"{', '.join(map(str, RESNET_SPECS))}")
    kind, blocks = RESNET_SPECS[depth]
    block = bottleneck_block if kind == "bottleneck" else basic_block
    opts = BlockOptions(keras, data_format, weight_decay, zero_init_last_bn,
                        bn_statistics, bn_backward)
    inputs, x = image_input(keras, image_size, channels, input_dtype,
                            batch_size, data_format, rescale_inputs,
                            input_layer)
    x = conv_bn(x, 64, 7, 2, opts, "stem", pad_channels=pad_input_channels,
                space_to_depth=stem_space_to_depth)
    x = stem_max_pool(keras, stem_pool, data_format=data_format,
                      name="stem_pool")(x)
    for stage, (filters, count) in enumerate(zip(stage_filters, blocks)):
        for i in range(count):
            stride = 2 if (i == 0 and stage > 0) else 1
            x = block(x, filters, stride, opts,
                      f"stage{stage + 1}_block{i + 1}")
    outputs = classifier(x, num_classes, opts)
    return keras.Model(inputs, outputs, name=f"resnet{depth}_v1_5")
