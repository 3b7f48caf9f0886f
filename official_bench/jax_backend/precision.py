"""Keras 3 dtype policies for fp32, fp16 and bf16, and fp16's loss scaling.

The same names as the TensorFlow backend (contracts/dtypes.py): float32,
mixed_float16, mixed_bfloat16; a float32 softmax either way (the model
says so). float16 trains with Keras 3's LossScaleOptimizer, which scales
dynamically (the only loss scaling the config check lets through here).
"""

from __future__ import annotations

from official_bench.contracts.dtypes import KERAS_POLICIES


def set_policy(keras, dtype: str) -> str:
    """Sets Keras 3's global policy for `dtype`; returns its name."""
    policy = KERAS_POLICIES[dtype]
    keras.config.set_dtype_policy(policy)
    return policy


def reset_policy(keras) -> None:
    """Back to float32, so a second run in one process starts clean."""
    keras.config.set_dtype_policy("float32")


def wrap_optimizer(keras, optimizer, dtype: str):
    """float16 needs loss scaling; the others train as they are."""
    if dtype != "float16":
        return optimizer
    return keras.optimizers.LossScaleOptimizer(optimizer)
