"""The stem's 3x3 stride-2 'same' max-pool without XLA's select_and_scatter
(model_params.stem_pool: shifted; Keras 3 only).

The pool is the elementwise maximum of the 9 strided slices of its input
padded with -inf where Keras' 'same' padding puts it (the odd pixel after,
never before, on an even side), so its gradient is selects and strided
pads that XLA can fuse, not select_and_scatter. The output is Keras'
exactly. The gradient differs only at ties: jnp.maximum splits a tie
evenly (max(a, b) gives each half), where select_and_scatter gives the
whole window's gradient to one element; either way a window's gradient
sums to the same. The stem pools a ReLU's output: its ties are zeros,
whose ReLU gradient is 0 however they split, and positive ties need two
equal activations, rare in practice.
"""

from __future__ import annotations

import functools

from official_bench.models.layer_classes import layer_class, require_keras3

POOL, STRIDE = 3, 2


def stem_max_pool(keras, how: str = "keras", **pool_kwargs):
    """The stem's MaxPooling2D(3, 2, 'same') of `keras`, `how` computed:
    keras (its own op) or shifted (module doc)."""
    from official_bench.config.schema import STEM_POOLS
    if how not in STEM_POOLS:
        raise ValueError(f"unknown stem_pool {how!r}; valid: "
                         f"{', '.join(STEM_POOLS)}")
    args = dict(pool_size=POOL, strides=STRIDE, padding="same", **pool_kwargs)
    if how == "keras":
        return keras.layers.MaxPooling2D(**args)
    require_keras3(keras, "model_params.stem_pool shifted")
    return layer_class(keras, _define)(**args)


def same_padding(size: int) -> tuple:
    """(before, after) of Keras' 'same' padding of a 3-wide, stride-2
    window on a side of `size`."""
    out = -(-size // STRIDE)
    total = max((out - 1) * STRIDE + POOL - size, 0)
    return total // 2, total - total // 2


def _define(keras) -> type:
    ops = keras.ops

    class ShiftedMaxPooling2D(keras.layers.MaxPooling2D):
        """MaxPooling2D(3, 2, 'same') as a maximum of 9 strided slices."""

        def call(self, inputs):
            first = self.data_format == "channels_first"
            rows, cols = (2, 3) if first else (1, 2)
            pads = [[0, 0]] * 4
            pads[rows] = list(same_padding(inputs.shape[rows]))
            pads[cols] = list(same_padding(inputs.shape[cols]))
            padded = ops.pad(inputs, pads, constant_values=float("-inf"))
            out_rows = -(-inputs.shape[rows] // STRIDE)
            out_cols = -(-inputs.shape[cols] // STRIDE)
            slices = []
            for i in range(POOL):
                for j in range(POOL):
                    index = [slice(None)] * 4
                    index[rows] = slice(i, i + STRIDE * (out_rows - 1) + 1,
                                        STRIDE)
                    index[cols] = slice(j, j + STRIDE * (out_cols - 1) + 1,
                                        STRIDE)
                    slices.append(padded[tuple(index)])
            return functools.reduce(ops.maximum, slices)

    return ShiftedMaxPooling2D
