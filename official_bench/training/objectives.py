"""Loss (with label smoothing) and top-1 / top-5 metrics, for either
backend's Keras (the caller passes the module; TensorFlow-free)."""

from __future__ import annotations

from typing import List

from official_bench.config import ExperimentConfig


def build_loss(cfg: ExperimentConfig, keras):
    loss = cfg.model.loss
    if loss.name == "categorical_crossentropy":
        return keras.losses.CategoricalCrossentropy(
            label_smoothing=loss.label_smoothing)
    return keras.losses.SparseCategoricalCrossentropy()


def wanted_metrics(cfg: ExperimentConfig):
    """(top-1, top-5): both unless train.metrics turns one off."""
    wanted = cfg.train.metrics
    return (wanted is None or wanted.accuracy is not False,
            wanted is None or wanted.top_5 is not False)


def build_metrics(cfg: ExperimentConfig, keras) -> List:
    """top-1 and top-5 metrics of `keras` (wanted_metrics)."""
    top1, top5 = wanted_metrics(cfg)
    one_hot = cfg.model.loss.name == "categorical_crossentropy"
    metrics = []
    if top1:
        metrics.append(keras.metrics.CategoricalAccuracy(name="accuracy")
                       if one_hot else
                       keras.metrics.SparseCategoricalAccuracy(name="accuracy"))
    if top5:
        metrics.append(
            keras.metrics.TopKCategoricalAccuracy(k=5, name="top_5_accuracy")
            if one_hot else
            keras.metrics.SparseTopKCategoricalAccuracy(
                k=5, name="top_5_accuracy"))
    return metrics
