"""Turns the `model` config into a Keras model."""

from __future__ import annotations

from official_bench.config import ExperimentConfig
from official_bench.models.resnet import resnet_v15
from official_bench.models.resnet_cifar import resnet_cifar


def resolve_data_format(requested: str, num_gpus: int) -> str:
    """`auto` is channels_first on GPUs (faster cuDNN), else channels_last.

    TensorFlow's CPU kernels only train NHWC, as Model Garden r2.3 noted.
    """
    if requested != "auto":
        return requested
    return "channels_first" if num_gpus > 0 else "channels_last"


def build_model(cfg: ExperimentConfig, num_gpus: int = 0):
    """Builds the configured model for the train dataset's image shape."""
    mp = cfg.model.model_params
    ds = cfg.train_dataset
    common = dict(
        depth=mp.depth, num_classes=mp.num_classes, image_size=ds.image_size,
        channels=ds.num_channels,
        data_format=resolve_data_format(mp.data_format, num_gpus),
        weight_decay=mp.weight_decay if mp.use_l2_regularizer else 0.0,
        zero_init_last_bn=mp.zero_init_last_bn,
        rescale_inputs=mp.rescale_inputs, input_dtype=ds.dtype,
        batch_size=mp.batch_size)
    if cfg.model.name == "resnet":
        return resnet_v15(**common)
    if cfg.model.name == "resnet_cifar":
        return resnet_cifar(width=mp.width, **common)
    raise ValueError(f"unknown model {cfg.model.name!r}")
