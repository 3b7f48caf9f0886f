"""Image preprocessing for real data, as Model Garden r2.3 / DLPerf did it.

Train: `sample_distorted_bounding_box` picks a crop (min_object_covered 0.1,
aspect 3/4..4/3, area 0.05..1, 100 attempts; the record's boxes when it has
any, else the whole image), the crop is fused into the JPEG decode
(`decode_and_crop_jpeg` only decodes the rows and MCU blocks it needs), then
a random horizontal flip and a bilinear resize to `image_size`.

Eval: a central square crop of image_size / (image_size + 32) of the short
side, fused into the decode the same way, then the resize.

All ranges are configurable (`crop_area_range`, `crop_aspect_ratio_range`,
`min_object_covered`, `random_flip`, `eval_crop_padding`): the ImageNet
values hurt small images (see docs/design.md), so e.g. 32x32 data wants
`crop_area_range: [1, 1]`, `random_flip: false`, `eval_crop_padding: 0`.

Images that are not JPEG (PNG, GIF, BMP inside a record) take a slower
decode-then-crop path with the same crop arithmetic. Randomness is
stateless: each image gets its own seed from the caller, so a seeded,
deterministic pipeline augments identically on every run.

Normalisation (`mean_subtract`, `standardize`) uses the ImageNet RGB mean
and std on a 0..255 scale (contracts/imagenet.py; the models' Standardize
layer uses them too).
"""

from __future__ import annotations

from typing import Optional, Sequence

from official_bench.contracts.imagenet import (
    IMAGENET_MEAN_RGB,
    IMAGENET_STD_RGB,
)
from official_bench.runtime.keras_setup import tf

CROP_PADDING = 32  # r2.3's eval crop: image_size / (image_size + 32)
MIN_OBJECT_COVERED = 0.1
AREA_RANGE = (0.05, 1.0)
ASPECT_RATIO_RANGE = (0.75, 1.33)
MAX_ATTEMPTS = 100


def _decode_and_crop(image_bytes: tf.Tensor, window_fn,
                     channels: int) -> tf.Tensor:
    """Decodes only `window_fn(shape)` = [y, x, h, w] of the image (uint8).

    JPEG: the crop is fused into the decode. Anything else decode_image
    reads (PNG, GIF, BMP) is decoded whole and then sliced.
    """
    def jpeg():
        shape = tf.image.extract_jpeg_shape(image_bytes)
        window = window_fn(shape)
        return tf.image.decode_and_crop_jpeg(image_bytes, window,
                                             channels=channels)

    def other():
        image = tf.io.decode_image(image_bytes, channels=channels,
                                   expand_animations=False)
        window = window_fn(tf.shape(image))
        return tf.slice(image, tf.stack([window[0], window[1], 0]),
                        tf.stack([window[2], window[3], channels]))

    image = tf.cond(tf.io.is_jpeg(image_bytes), jpeg, other)
    image.set_shape([None, None, channels])
    return image


def center_crop_window(shape: tf.Tensor, image_size: int,
                       crop_padding: int = CROP_PADDING) -> tf.Tensor:
    """[y, x, h, w] of the central square: size/(size+padding) of the short
    side."""
    height, width = shape[0], shape[1]
    fraction = image_size / (image_size + crop_padding)
    crop = tf.cast(fraction * tf.cast(tf.minimum(height, width), tf.float32),
                   tf.int32)
    crop = tf.maximum(crop, 1)
    return tf.stack([(height - crop + 1) // 2, (width - crop + 1) // 2,
                     crop, crop])


def random_crop_window(
        shape: tf.Tensor, boxes: tf.Tensor, seed: tf.Tensor,
        area_range: Sequence[float] = AREA_RANGE,
        aspect_ratio_range: Sequence[float] = ASPECT_RATIO_RANGE,
        min_object_covered: float = MIN_OBJECT_COVERED) -> tf.Tensor:
    """[y, x, h, w] from sample_distorted_bounding_box (Inception-style crop).

    `boxes` is [N, 4] as (ymin, xmin, ymax, xmax) in 0..1; with N == 0 the
    whole image is the object. An area range starting at 1 means "no crop"
    and skips the sampling.
    """
    if area_range[0] >= 1.0:
        return tf.stack([0, 0, shape[0], shape[1]])
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        shape, bounding_boxes=tf.expand_dims(boxes, 0), seed=seed,
        min_object_covered=min_object_covered,
        aspect_ratio_range=list(aspect_ratio_range),
        area_range=list(area_range), max_attempts=MAX_ATTEMPTS,
        use_image_if_no_bounding_boxes=True)
    return tf.stack([begin[0], begin[1], size[0], size[1]])


def resize(image: tf.Tensor, image_size: int) -> tf.Tensor:
    """Bilinear resize to a square, as r2.3 (tf.compat.v1, no corner align).

    Returns float32 in the 0..255 range.
    """
    # (v1 resize hands back the uint8 input when the size already fits.)
    return tf.cast(tf.compat.v1.image.resize(
        image, [image_size, image_size],
        method=tf.image.ResizeMethod.BILINEAR, align_corners=False),
        tf.float32)


def normalize(images: tf.Tensor, mean_subtract: bool, standardize: bool,
              dtype: str = "float32") -> tf.Tensor:
    """0..255 pixels -> (x - mean) / std as configured, cast to `dtype`.

    Works on one image or a batch (the last axis is RGB); with 1 channel
    the RGB means/stds are averaged. Computes in float32.
    """
    images = tf.cast(images, tf.float32)
    channels = images.shape[-1]
    mean, std = _channel_constants(channels)
    if mean_subtract:
        images = images - mean
    if standardize:
        images = images / std
    return tf.cast(images, dtype)


def _channel_constants(channels: Optional[int]):
    mean = tf.constant(IMAGENET_MEAN_RGB, tf.float32)
    std = tf.constant(IMAGENET_STD_RGB, tf.float32)
    if channels == 1:
        return tf.reduce_mean(mean, keepdims=True), \
            tf.reduce_mean(std, keepdims=True)
    return mean, std


def to_uint8(images: tf.Tensor) -> tf.Tensor:
    """Resized float pixels (bilinear of uint8: within 0..255) -> uint8,
    rounded."""
    return tf.cast(images + 0.5, tf.uint8)


def _finish(image: tf.Tensor, image_size: int, channels: int,
            mean_subtract: bool, standardize: bool, dtype: str,
            transfer_uint8: bool) -> tf.Tensor:
    image = resize(image, image_size)
    image = tf.ensure_shape(image, [image_size, image_size, channels])
    if transfer_uint8:
        return to_uint8(image)
    return normalize(image, mean_subtract, standardize, dtype)


def preprocess_for_train(
        image_bytes: tf.Tensor, boxes: tf.Tensor, seed: tf.Tensor,
        image_size: int = 224, channels: int = 3,
        area_range: Sequence[float] = AREA_RANGE,
        aspect_ratio_range: Sequence[float] = ASPECT_RATIO_RANGE,
        min_object_covered: float = MIN_OBJECT_COVERED,
        random_flip: bool = True, mean_subtract: bool = False,
        standardize: bool = False, dtype: str = "float32",
        transfer_uint8: bool = False) -> tf.Tensor:
    """Encoded image -> [image_size, image_size, channels] training image.

    `seed` is a shape-[2] integer tensor, one per image (stateless ops);
    `boxes` is [N, 4] (ymin, xmin, ymax, xmax), N may be 0. Output is
    `dtype`, normalised as configured, or uint8 0..255 with
    `transfer_uint8` (then normalise on the device with `normalize`).
    """
    seed = tf.cast(seed, tf.int64)

    def window(shape):
        return random_crop_window(shape, boxes, seed, area_range,
                                  aspect_ratio_range, min_object_covered)

    image = _decode_and_crop(image_bytes, window, channels)
    if random_flip:
        image = tf.image.stateless_random_flip_left_right(
            image, tf.reverse(seed, [0]) + 1)
    return _finish(image, image_size, channels, mean_subtract, standardize,
                   dtype, transfer_uint8)


def preprocess_for_eval(image_bytes: tf.Tensor, image_size: int = 224,
                        channels: int = 3,
                        crop_padding: int = CROP_PADDING,
                        mean_subtract: bool = False, standardize: bool = False,
                        dtype: str = "float32",
                        transfer_uint8: bool = False) -> tf.Tensor:
    """Encoded image -> central crop resized to [image_size, image_size, C]."""
    image = _decode_and_crop(
        image_bytes, lambda s: center_crop_window(s, image_size, crop_padding),
        channels)
    return _finish(image, image_size, channels, mean_subtract, standardize,
                   dtype, transfer_uint8)


# Reference paths for benchmarks/input_pipeline.py and tests: what the fused
# crop is measured against.


def decode_then_random_crop(image_bytes: tf.Tensor, seed: tf.Tensor,
                            image_size: int = 224, channels: int = 3
                            ) -> tf.Tensor:
    """(a) unfused: decode the whole JPEG, then the same crop, flip, resize.

    Same output as `preprocess_for_train` without boxes or normalisation;
    only the decode differs.
    """
    seed = tf.cast(seed, tf.int64)
    image = tf.io.decode_jpeg(image_bytes, channels=channels)
    window = random_crop_window(tf.shape(image), tf.zeros([0, 4]), seed)
    image = tf.slice(image, tf.stack([window[0], window[1], 0]),
                     tf.stack([window[2], window[3], channels]))
    image = tf.image.stateless_random_flip_left_right(
        image, tf.reverse(seed, [0]) + 1)
    return _finish(image, image_size, channels, False, False, "float32",
                   False)


def decode_only(image_bytes: tf.Tensor, channels: int = 3) -> tf.Tensor:
    """(b) plain JPEG decode of the whole image: the upper bound on speed."""
    return tf.io.decode_jpeg(image_bytes, channels=channels)
