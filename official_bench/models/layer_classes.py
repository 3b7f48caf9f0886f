"""Layer classes made per Keras module: each subclasses that module's
layers (tf-keras or Keras 3), so it is defined at first use, once per
module; and the one-line refusal of the Keras-3-only ones (channel_pad,
stem_s2d, bn_statistics, stem_pool, bn_backward) on tf-keras.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

_CLASSES: Dict[Tuple[Callable, Any], type] = {}


def require_keras3(keras, what: str) -> None:
    """ValueError naming `what` (e.g. "model_params.pad_input_channels")
    when `keras` is tf-keras, which has no keras.ops."""
    if not hasattr(keras, "ops"):
        raise ValueError(f"{what} needs Keras 3 (runtime.backend jax)")


def layer_class(keras, define: Callable[[Any], type]) -> type:
    """`define(keras)`, made once per Keras module and `define`."""
    key = (define, keras)
    if key not in _CLASSES:
        _CLASSES[key] = define(keras)
    return _CLASSES[key]
