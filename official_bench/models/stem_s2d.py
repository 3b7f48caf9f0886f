"""The stem convolution on the image rearranged space-to-depth
(model_params.stem_space_to_depth; MLPerf's TPU ResNet-50 stem).

A k x k convolution of stride 2 (ResNet's 7x7/2 stem, over the image the
model has zero-padded) is a ceil(k/2)-square convolution of stride 1 over
the image's 2x2 blocks stacked as channels (3 colours become 12): output
row i sums input rows 2i..2i+k-1, which are rows i..i+ceil(k/2)-1 of the
blocks, and the kernel, padded to an even size with zeros, is rearranged
the same way. The layer keeps the 7x7x3x64 kernel (the same trainable
weights, initialiser, regulariser and layer-shape FLOPs) and rearranges
image and kernel at call time, so it computes the same sums (plus zeros);
cuDNN then convolves 12 channels with a 4x4 kernel instead of 3 with a
7x7 one. With `pad_to` the image's channels are first padded with zeros
(models/channel_pad.py: 4 become 16). Keras 3 and channels_last only: the
config refuses the key on the TensorFlow backend.
"""

from __future__ import annotations

from typing import Optional

from official_bench.models.layer_classes import layer_class, require_keras3


def s2d_conv2d(keras, pad_to: Optional[int] = None, **conv_kwargs):
    """A stride-2 Conv2D of `keras` (Keras 3) computed space-to-depth, its
    input padded with zero channels to `pad_to` first; the other
    arguments are Conv2D's."""
    require_keras3(keras, "model_params.stem_space_to_depth")
    if conv_kwargs.get("data_format") == "channels_first" or \
            conv_kwargs.get("strides") != 2 or \
            conv_kwargs.get("padding") != "valid":
        raise ValueError("model_params.stem_space_to_depth rearranges a "
                         "channels_last convolution of stride 2 with "
                         "padding 'valid' (ResNet's ImageNet stem)")
    return layer_class(keras, _define)(pad_to, **conv_kwargs)


def _define(keras) -> type:
    ops = keras.ops

    def blocks(x, rows: int, cols: int):
        """[..., 2*rows, 2*cols, C, ...] -> 2x2 blocks as channels."""
        n, c = x.shape[0], x.shape[3]
        x = ops.reshape(x, (-1 if n is None else n, rows, 2, cols, 2, c))
        x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
        return ops.reshape(x, (-1 if n is None else n, rows, cols, 4 * c))

    def kernel_blocks(kernel):
        kh, kw, c, f = kernel.shape
        kernel = ops.pad(kernel, [[0, kh % 2], [0, kw % 2], [0, 0], [0, 0]])
        rows, cols = (kh + 1) // 2, (kw + 1) // 2
        kernel = ops.reshape(kernel, (rows, 2, cols, 2, c, f))
        kernel = ops.transpose(kernel, (0, 2, 1, 3, 4, 5))
        return ops.reshape(kernel, (rows, cols, 4 * c, f))

    class SpaceToDepthConv2D(keras.layers.Conv2D):
        """A stride-2 Conv2D computed space-to-depth (module doc)."""

        def __init__(self, pad_to: Optional[int] = None, **kwargs):
            super().__init__(**kwargs)
            self.pad_to = pad_to

        def convolution_op(self, inputs, kernel):
            extra = (self.pad_to or 0) - kernel.shape[2]
            if extra > 0:
                inputs = ops.pad(inputs, [[0, 0], [0, 0], [0, 0],
                                          [0, extra]])
                kernel = ops.pad(kernel, [[0, 0], [0, 0], [0, extra],
                                          [0, 0]])
            h, w = inputs.shape[1], inputs.shape[2]
            out_h = (h - kernel.shape[0]) // 2 + 1
            out_w = (w - kernel.shape[1]) // 2 + 1
            inputs = ops.pad(inputs, [[0, 0], [0, h % 2], [0, w % 2],
                                      [0, 0]])
            x = blocks(inputs, (h + 1) // 2, (w + 1) // 2)
            y = ops.conv(x, kernel_blocks(kernel), strides=1,
                         padding="valid", data_format="channels_last")
            return y[:, :out_h, :out_w, :]

        def get_config(self):
            return dict(super().get_config(), pad_to=self.pad_to)

    return SpaceToDepthConv2D
