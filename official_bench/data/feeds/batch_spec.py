"""What one per-replica batch from a Python source or a ZMQ producer must be.

TensorFlow-free (numpy only): the trainer, the reference Python sources and
the ZMQ producer all import it, so both ends check batches the same way.

A batch is (images, labels): images [batch, size, size, channels] in the
dataset's image dtype (`dtype`, or uint8 with `transfer_uint8`), labels
[batch] integer class ids in 0..num_classes-1 (int32 or int64; one-hot is
applied by the trainer's pipeline when `one_hot` is true).
"""

from __future__ import annotations

import dataclasses
from typing import Tuple

import numpy as np

LABEL_DTYPES = ("int32", "int64")


class BadBatch(ValueError):
    """A batch that does not match the spec; the message names the field."""


@dataclasses.dataclass(frozen=True)
class BatchSpec:
    """Shapes and dtypes every batch of one pipeline must have."""
    batch_size: int
    image_size: int
    num_channels: int
    num_classes: int
    image_dtype: str  # float32 | float16 | bfloat16 | uint8

    @property
    def image_shape(self) -> Tuple[int, int, int, int]:
        return (self.batch_size, self.image_size, self.image_size,
                self.num_channels)


def numpy_dtype(name: str) -> np.dtype:
    """numpy has no bfloat16; ml_dtypes (a TensorFlow dependency) does."""
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def check_batch(spec: BatchSpec, images, labels, origin: str
                ) -> Tuple[np.ndarray, np.ndarray]:
    """The batch as contiguous arrays (labels int32), or BadBatch naming
    `origin` (the source or producer), the field, what came and what fits.

    Nothing is converted silently except int64 labels to int32: a float64
    image batch is a bug in the source, not something to cast away.
    """
    if not isinstance(images, np.ndarray):
        raise BadBatch(f"{origin}: images must be a numpy array, got "
                       f"{type(images).__name__}")
    if not isinstance(labels, np.ndarray):
        raise BadBatch(f"{origin}: labels must be a numpy array, got "
                       f"{type(labels).__name__}")
    if tuple(images.shape) != spec.image_shape:
        raise BadBatch(f"{origin}: images shape {tuple(images.shape)}, "
                       f"expected {spec.image_shape} (per-replica batch, "
                       "image_size, image_size, num_channels)")
    if images.dtype != numpy_dtype(spec.image_dtype):
        raise BadBatch(f"{origin}: images dtype {images.dtype}, expected "
                       f"{spec.image_dtype} (the dataset's dtype, or uint8 "
                       "with transfer_uint8)")
    if tuple(labels.shape) != (spec.batch_size,):
        raise BadBatch(f"{origin}: labels shape {tuple(labels.shape)}, "
                       f"expected ({spec.batch_size},) (class ids)")
    if labels.dtype.name not in LABEL_DTYPES:
        raise BadBatch(f"{origin}: labels dtype {labels.dtype}, expected one "
                       f"of {', '.join(LABEL_DTYPES)}")
    if labels.size and (labels.min() < 0 or
                        labels.max() >= spec.num_classes):
        raise BadBatch(f"{origin}: labels out of range {labels.min()}.."
                       f"{labels.max()}, expected 0..{spec.num_classes - 1}"
                       " (num_classes)")
    return (np.ascontiguousarray(images),
            np.ascontiguousarray(labels, dtype=np.int32))
