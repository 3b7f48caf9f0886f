"""A small CIFAR-style ResNet (He et al. 2016, section 4.2) for 32x32 inputs.

depth = 6n + 2: a 3x3 stem, then three stages of n basic blocks with
16/32/64 filters (times `width`), strides 1/2/2. Cheap enough to train for
real on two CPU cores, which is what the tests and the real-data check need.
Built with the Keras module passed as `keras=` (models/resnet.py).
"""

from __future__ import annotations

from typing import Optional

from official_bench.models.resnet import (
    BlockOptions,
    basic_block,
    classifier,
    conv_bn,
    image_input,
)


def resnet_cifar(depth: int = 20, num_classes: int = 10, image_size: int = 32,
                 channels: int = 3, width: int = 1,
                 data_format: str = "channels_last",
                 weight_decay: float = 1e-4, zero_init_last_bn: bool = False,
                 rescale_inputs: bool = False, input_dtype: str = "float32",
                 batch_size: Optional[int] = None, input_layer=None, *,
                 keras, pad_input_channels: Optional[int] = None,
                 bn_statistics: str = "two_pass",
                 bn_backward: str = "autodiff"):
    """A depth-`depth` CIFAR ResNet as a functional model of `keras`."""
    if depth < 8 or (depth - 2) % 6:
        raise ValueError(f"resnet_cifar depth must be 6n+2, got {depth}")
    n = (depth - 2) // 6
    opts = BlockOptions(keras, data_format, weight_decay, zero_init_last_bn,
                        bn_statistics, bn_backward)
    inputs, x = image_input(keras, image_size, channels, input_dtype,
                            batch_size, data_format, rescale_inputs,
                            input_layer)
    x = conv_bn(x, 16 * width, 3, 1, opts, "stem",
                pad_channels=pad_input_channels)
    for stage, filters in enumerate((16, 32, 64)):
        for i in range(n):
            stride = 2 if (i == 0 and stage > 0) else 1
            x = basic_block(x, filters * width, stride, opts,
                            f"stage{stage + 1}_block{i + 1}")
    outputs = classifier(x, num_classes, opts)
    return keras.Model(inputs, outputs, name=f"resnet{depth}_cifar")
