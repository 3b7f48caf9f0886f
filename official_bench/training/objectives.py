"""Loss (with label smoothing) and top-1 / top-5 metrics."""

from __future__ import annotations

from typing import List

from official_bench.config import ExperimentConfig
from official_bench.runtime.keras_setup import keras


def build_loss(cfg: ExperimentConfig):
    loss = cfg.model.loss
    if loss.name == "categorical_crossentropy":
        return keras.losses.CategoricalCrossentropy(
            label_smoothing=loss.label_smoothing)
    return keras.losses.SparseCategoricalCrossentropy()


def build_metrics(cfg: ExperimentConfig) -> List:
    """top-1 and top-5 unless train.metrics turns one off."""
    wanted = cfg.train.metrics
    top1 = wanted is None or wanted.accuracy is not False
    top5 = wanted is None or wanted.top_5 is not False
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
