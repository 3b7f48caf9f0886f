"""Model factory: `model.name` -> a Keras model."""

from official_bench.models.factory import build_model

__all__ = ["build_model"]
