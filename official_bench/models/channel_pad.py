"""The stem convolution on an image padded with zero channels
(model_params.pad_input_channels; MLPerf's ResNet-50 pads 3 to 4).

The layer is a Conv2D whose kernel keeps the image's channel count (7x7x3x64
on ResNet-50: the same trainable weights, initialiser and regulariser);
at call time the image gets zero channels and the kernel zero input slices
up to `channels`, so the convolution sums the same products plus zeros:
the same result and, by the layer-shape count, the same FLOPs, while cuDNN
may pick another kernel for the wider input. Keras 3 only (its `ops`): the
config refuses the key on the TensorFlow backend.
"""

from __future__ import annotations

from official_bench.models.layer_classes import layer_class, require_keras3


def padded_conv2d(keras, channels: int, **conv_kwargs):
    """A Conv2D of `keras` (Keras 3) that convolves its input padded with
    zero channels to `channels`; the other arguments are Conv2D's."""
    require_keras3(keras, "model_params.pad_input_channels")
    return layer_class(keras, _define)(channels, **conv_kwargs)


def _define(keras) -> type:
    ops = keras.ops

    class ChannelPaddedConv2D(keras.layers.Conv2D):
        """Conv2D over its input padded with zero channels (module doc)."""

        def __init__(self, pad_to: int, **kwargs):
            super().__init__(**kwargs)
            self.pad_to = pad_to

        def convolution_op(self, inputs, kernel):
            extra = self.pad_to - kernel.shape[2]
            if extra > 0:
                axis = 3 if self.data_format == "channels_last" else 1
                widths = [[0, 0]] * 4
                widths[axis] = [0, extra]
                inputs = ops.pad(inputs, widths)
                kernel = ops.pad(kernel, [[0, 0], [0, 0], [0, extra],
                                          [0, 0]])
            return super().convolution_op(inputs, kernel)

        def get_config(self):
            return dict(super().get_config(), pad_to=self.pad_to)

    return ChannelPaddedConv2D
