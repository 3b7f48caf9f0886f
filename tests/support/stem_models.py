"""ResNet v1.5's stem as resnet_v15 builds it, and what the stem-layout
tests (models/test_channel_pad.py, models/test_stem_s2d.py) measure of it:
its training output and kernel gradient, the convolution JAX lowers it
to, and its parameter and layer-shape counts."""

import re

import numpy as np


def stem(keras, size=16, pad=None, space_to_depth=False):
    """The stem (7x7/2 conv, BN, ReLU) on a size x size RGB image."""
    from official_bench.models import resnet
    opts = resnet.BlockOptions(keras)
    inputs = keras.Input((size, size, 3))
    x = resnet.conv_bn(inputs, 64, 7, 2, opts, "stem", pad_channels=pad,
                       space_to_depth=space_to_depth)
    return keras.Model(inputs, x)


def output_and_kernel_grad(jax, model, x):
    """One jitted call: the training-mode output and d(sum y^2)/d(kernel)."""
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]

    def loss(tv):
        y, _ = model.stateless_call(tv, ntv, x, training=True)
        return (y * y).sum(), y
    (_, y), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(tv)
    return np.asarray(y), np.asarray(grads[0])


def convolution_types(jax, model, x):
    """[input, kernel] types ("2x22x22x3") of the first convolution JAX
    lowers the model to."""
    hlo = jax.jit(lambda v: model(v, training=False)).lower(x).as_text()
    line = next(l for l in hlo.splitlines() if "convolution" in l)
    return re.findall(r"tensor<([0-9x]+?)xf32>", line)[:2]


def counts(model, keras):
    """Trainable parameters, layer-shape MACs, the stem's kernel and class.
    """
    from official_bench.measure.layer_flops import count_forward
    conv = model.get_layer("stem_conv")
    return {"trainable": int(sum(np.prod(w.shape)
                                 for w in model.trainable_weights)),
            "macs": count_forward(model, keras).macs,
            "stem_kernel": [int(d) for d in conv.kernel.shape],
            "stem_class": type(conv).__name__}
