"""transfer_uint8: the second half of the input pipeline, inside the model.

With `transfer_uint8: true` every builder sends uint8 0..255 images (4x
fewer bytes from the pipeline, the socket or the producer, and over PCIe),
the model's input is uint8, and its first layer does what the host path
does after the resize: cast to float32, `mean_subtract` / `standardize`
with the ImageNet mean and std (data/preprocessing.normalize, the very
function the host path calls), cast to the dataset's dtype. As the model's
first op it runs on the replica's device. The layer has no weights, so
checkpoints are the same with and without it; a SavedModel exported from
such a run takes uint8 images.

What differs from the float path: the records pipeline rounds the resized
pixels to integers before sending (preprocessing.to_uint8), so a pixel can
differ by up to 0.5 / std (0.009 with `standardize`) from the float path.
"""

from __future__ import annotations

from official_bench.data.preprocessing import normalize
from official_bench.runtime.keras_setup import keras, tf


class DeviceNormalize(keras.layers.Layer):
    """uint8 images -> normalised images in `output_dtype`, on the device."""

    def __init__(self, mean_subtract: bool = False, standardize: bool = False,
                 output_dtype: str = "float32", **kwargs):
        # float32 layer: the arithmetic is the host path's; the next layer
        # casts to the compute dtype as it would for host-made images.
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.mean_subtract = mean_subtract
        self.standardize = standardize
        self.output_dtype = output_dtype

    def call(self, images):
        return normalize(tf.cast(images, tf.float32), self.mean_subtract,
                         self.standardize, self.output_dtype)

    def get_config(self):
        return dict(super().get_config(), mean_subtract=self.mean_subtract,
                    standardize=self.standardize,
                    output_dtype=self.output_dtype)


def model_input(ds):
    """(input dtype, first layer or None) for the model that `ds` feeds."""
    if not ds.transfer_uint8:
        return ds.dtype, None
    return "uint8", DeviceNormalize(ds.mean_subtract, ds.standardize,
                                    ds.dtype, name="device_normalize")
