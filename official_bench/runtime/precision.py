"""float32 / mixed_float16 / mixed_bfloat16 and loss scaling."""

from __future__ import annotations

from typing import Optional, Union

from official_bench.contracts.dtypes import KERAS_POLICIES as POLICIES
from official_bench.runtime.keras_setup import keras


def set_policy(dtype: str) -> str:
    """Sets the global Keras policy; returns its name."""
    policy = POLICIES[dtype]
    keras.mixed_precision.set_global_policy(policy)
    return policy


def reset_policy() -> None:
    """Back to float32, so a second run in one process starts clean."""
    keras.mixed_precision.set_global_policy("float32")


def wrap_optimizer(optimizer, dtype: str,
                   loss_scale: Optional[Union[str, float]]):
    """float16 needs loss scaling: dynamic unless a fixed number is given."""
    if dtype != "float16":
        return optimizer
    if loss_scale is None or loss_scale == "dynamic":
        return keras.mixed_precision.LossScaleOptimizer(optimizer)
    return keras.mixed_precision.LossScaleOptimizer(
        optimizer, dynamic=False, initial_scale=float(loss_scale))
