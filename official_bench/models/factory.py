"""Turns the `model` config into a Keras model of either backend's Keras.

TensorFlow-free: the caller passes the Keras module (tf-keras or Keras 3)
and, for transfer_uint8, the TensorFlow backend's first layer
(models/device_normalize.py).
"""

from __future__ import annotations

from typing import Optional

from official_bench.config import ExperimentConfig, compute_dtype
from official_bench.models.resnet import resnet_v15
from official_bench.models.resnet_cifar import resnet_cifar


def resolve_data_format(requested: str, num_gpus: int,
                        dtype: str = "float32",
                        backend: str = "tensorflow") -> str:
    """`auto`: on the TensorFlow backend channels_first for float32/float16
    on GPUs, else channels_last; on the JAX backend always channels_last
    (XLA assigns the convolutions' layouts itself, and NHWC is the layout
    its GPU convolutions are fastest in).

    CPU: channels_last, as Model Garden r2.3 chose; Eigen's CPU kernels
    take NHWC only (oneDNN's take NCHW too: config/rules.py refuses
    channels_first on Eigen), and grappler's layout optimizer leaves a
    CPU-only graph's layout alone by default.

    GPU: cuDNN's float32 convolutions are fastest in NCHW, as Model Garden
    r2.3 and DLPerf ran them. float16 keeps that choice too: on Volta or
    newer, grappler's generic layout optimizer turns a graph whose GPU convs
    are mostly float16 back to NHWC for the tensor cores. bfloat16 runs on
    tensor cores only (Ampere or newer), which want NHWC: a channels_last
    model is their layout as built, without relying on grappler to convert
    NCHW back (it does so for bfloat16 only when most GPUs are Ampere+) and
    without the transposes that conversion leaves at the model's ends. Source:
    tensorflow/core/grappler/optimizers/generic_layout_optimizer.cc,
    GetSrcAndDstDataFormats.
    """
    if requested != "auto":
        return requested
    if backend == "jax":
        return "channels_last"
    if num_gpus > 0 and dtype != "bfloat16":
        return "channels_first"
    return "channels_last"


def build_model(cfg: ExperimentConfig, num_gpus: int = 0, *, keras,
                input_dtype: Optional[str] = None, input_layer=None,
                backend: str = "tensorflow"):
    """Builds the configured model for the train dataset's image shape with
    `keras`; `input_dtype` defaults to the dataset's dtype."""
    mp = cfg.model.model_params
    ds = cfg.train_dataset
    common = dict(
        depth=mp.depth, num_classes=mp.num_classes, image_size=ds.image_size,
        channels=ds.num_channels,
        data_format=resolve_data_format(mp.data_format, num_gpus,
                                        compute_dtype(cfg), backend),
        weight_decay=mp.weight_decay if mp.use_l2_regularizer else 0.0,
        zero_init_last_bn=mp.zero_init_last_bn,
        rescale_inputs=mp.rescale_inputs,
        input_dtype=input_dtype or ds.dtype, batch_size=mp.batch_size,
        input_layer=input_layer, keras=keras,
        pad_input_channels=mp.pad_input_channels,
        bn_statistics=mp.bn_statistics, bn_backward=mp.bn_backward)
    if cfg.model.name == "resnet":
        return resnet_v15(stem_space_to_depth=mp.stem_space_to_depth,
                          stem_pool=mp.stem_pool,
                          **common)
    if cfg.model.name == "resnet_cifar":
        return resnet_cifar(width=mp.width, **common)
    raise ValueError(f"unknown model {cfg.model.name!r}")
