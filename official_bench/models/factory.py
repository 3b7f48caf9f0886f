"""Turns the `model` config into a Keras model."""

from __future__ import annotations

from official_bench.config import ExperimentConfig, compute_dtype
from official_bench.models.device_normalize import model_input
from official_bench.models.resnet import resnet_v15
from official_bench.models.resnet_cifar import resnet_cifar


def resolve_data_format(requested: str, num_gpus: int,
                        dtype: str = "float32") -> str:
    """`auto`: channels_first for float32/float16 on GPUs, else channels_last.

    CPU: TensorFlow's CPU kernels train NHWC (Model Garden r2.3 chose
    channels_last there too), and grappler's layout optimizer leaves a
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
    if num_gpus > 0 and dtype != "bfloat16":
        return "channels_first"
    return "channels_last"


def build_model(cfg: ExperimentConfig, num_gpus: int = 0):
    """Builds the configured model for the train dataset's image shape."""
    mp = cfg.model.model_params
    ds = cfg.train_dataset
    input_dtype, input_layer = model_input(ds)
    common = dict(
        depth=mp.depth, num_classes=mp.num_classes, image_size=ds.image_size,
        channels=ds.num_channels,
        data_format=resolve_data_format(mp.data_format, num_gpus,
                                        compute_dtype(cfg)),
        weight_decay=mp.weight_decay if mp.use_l2_regularizer else 0.0,
        zero_init_last_bn=mp.zero_init_last_bn,
        rescale_inputs=mp.rescale_inputs, input_dtype=input_dtype,
        batch_size=mp.batch_size, input_layer=input_layer)
    if cfg.model.name == "resnet":
        return resnet_v15(**common)
    if cfg.model.name == "resnet_cifar":
        return resnet_cifar(width=mp.width, **common)
    raise ValueError(f"unknown model {cfg.model.name!r}")
