"""The crop windows of the TensorFlow path (data/preprocessing.py) without
TensorFlow: tf.image.sample_distorted_bounding_box's algorithm for the
train crop, and the eval centre crop, as [y, x, height, width].

The train crop follows the op (TensorFlow's
kernels/image/sample_distorted_bounding_box_op.cc) step for step, in
float32 where it computes in float: up to `max_attempts` times an aspect
ratio uniform in its range, a height uniform among the integers whose
area fits the area range (uniform in side, not in area), width = round(
height * aspect), a position uniform in the image; the first crop that
covers `min_object_covered` of one box wins, else the whole image. The
random numbers are Python's (random.Random), so the crops are drawn from
the same distribution as TensorFlow's, not the same crops (tests compare
histograms with the op's). TensorFlow-free.
"""

from __future__ import annotations

import random
from typing import Optional, Sequence, Tuple

import numpy as np

MAX_ATTEMPTS = 100  # as data/preprocessing.MAX_ATTEMPTS
_EPS = float(np.float32(0.0000001))
_RAND_BITS = 23  # the op's RandFloat: 23 random bits of [0, 1)

Window = Tuple[int, int, int, int]  # y, x, height, width
Rect = Tuple[int, int, int, int]  # min x, min y, max x, max y

f32 = np.float32


def _rint(value) -> int:
    """lrintf: to the nearest integer, ties to even."""
    return int(np.rint(value))


def _crop_size(width: int, height: int, min_area, max_area, aspect,
               rng: random.Random) -> Optional[Tuple[int, int]]:
    """(crop width, crop height) as the op draws them, or None."""
    crop_h = _rint(np.sqrt(min_area / aspect))
    max_h = _rint(np.sqrt(max_area / aspect))
    if _rint(f32(max_h) * aspect) > width:
        max_h = int((width + 0.5 - _EPS) / float(aspect))
        if _rint(f32(max_h) * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    crop_h = min(crop_h, max_h)
    if crop_h < max_h:
        crop_h += rng.randrange(max_h - crop_h + 1)
    crop_w = _rint(f32(crop_h) * aspect)
    area = f32(crop_w * crop_h)
    if area < min_area:
        crop_h += 1
        crop_w = _rint(f32(crop_h) * aspect)
        area = f32(crop_w * crop_h)
    if area > max_area:
        crop_h -= 1
        crop_w = _rint(f32(crop_h) * aspect)
        area = f32(crop_w * crop_h)
    if (area < min_area or area > max_area or crop_w > width
            or crop_h > height or crop_w <= 0 or crop_h <= 0):
        return None
    return crop_w, crop_h


def _random_crop(width: int, height: int, area_range, aspect,
                 rng: random.Random) -> Optional[Rect]:
    min_rel, max_rel = f32(area_range[0]), f32(area_range[1])
    if max_rel <= 0 or aspect <= 0 or min_rel > max_rel:
        return None
    min_area = min_rel * f32(width) * f32(height)
    max_area = max_rel * f32(width) * f32(height)
    size = _crop_size(width, height, min_area, max_area, aspect, rng)
    if size is None:
        return None
    crop_w, crop_h = size
    y = rng.randrange(height - crop_h) if crop_h < height else 0
    x = rng.randrange(width - crop_w) if crop_w < width else 0
    return x, y, x + crop_w, y + crop_h


def _area(r: Rect) -> np.float32:
    return f32((r[2] - r[0]) * (r[3] - r[1]))


def _covers(crop: Rect, boxes: Sequence[Rect], min_covered) -> bool:
    if _area(crop) < 1:
        return False
    for box in boxes:
        box_area = _area(box)
        if box_area < 1:
            continue
        inter = (max(crop[0], box[0]), max(crop[1], box[1]),
                 min(crop[2], box[2]), min(crop[3], box[3]))
        if inter[0] > inter[2] or inter[1] > inter[3]:
            inter = (0, 0, 0, 0)
        if _area(inter) / box_area >= min_covered:
            return True
    return False


def _pixel_boxes(boxes, height: int, width: int) -> list:
    """(ymin, xmin, ymax, xmax) fractions -> pixel rectangles, truncated
    as the op truncates them; the whole image when there are none."""
    rects = [(int(f32(b[1]) * f32(width)), int(f32(b[0]) * f32(height)),
              int(f32(b[3]) * f32(width)), int(f32(b[2]) * f32(height)))
             for b in boxes]
    return rects or [(0, 0, width, height)]


def sample_window(height: int, width: int, boxes, rng: random.Random,
                  area_range: Sequence[float] = (0.05, 1.0),
                  aspect_ratio_range: Sequence[float] = (0.75, 1.33),
                  min_object_covered: float = 0.1,
                  max_attempts: int = MAX_ATTEMPTS) -> Window:
    """sample_distorted_bounding_box with use_image_if_no_bounding_boxes:
    `boxes` are (ymin, xmin, ymax, xmax) fractions in 0..1 (may be
    empty)."""
    rects = _pixel_boxes(boxes, height, width)
    low, high = f32(aspect_ratio_range[0]), f32(aspect_ratio_range[1])
    covered = f32(min_object_covered)
    for _ in range(max_attempts):
        unit = f32(rng.getrandbits(_RAND_BITS) / (1 << _RAND_BITS))
        aspect = unit * (high - low) + low
        crop = _random_crop(width, height, area_range, aspect, rng)
        if crop is not None and _covers(crop, rects, covered):
            return crop[1], crop[0], crop[3] - crop[1], crop[2] - crop[0]
    return 0, 0, height, width


def train_window(height: int, width: int, boxes, rng: random.Random,
                 area_range: Sequence[float] = (0.05, 1.0),
                 aspect_ratio_range: Sequence[float] = (0.75, 1.33),
                 min_object_covered: float = 0.1) -> Window:
    """preprocessing.random_crop_window: an area range starting at 1 means
    the whole image, else sample_window."""
    if area_range[0] >= 1.0:
        return 0, 0, height, width
    return sample_window(height, width, boxes, rng, area_range,
                         aspect_ratio_range, min_object_covered)


def center_window(height: int, width: int, image_size: int,
                  crop_padding: int = 32) -> Window:
    """preprocessing.center_crop_window: the central square of
    image_size / (image_size + crop_padding) of the short side."""
    fraction = f32(image_size / (image_size + crop_padding))
    crop = max(int(fraction * f32(min(height, width))), 1)
    return (height - crop + 1) // 2, (width - crop + 1) // 2, crop, crop


def clip_boxes(ymin, xmin, ymax, xmax) -> list:
    """The record's boxes as the TensorFlow path keeps them
    (record_guard._boxes): sides paired up to the shortest list, clipped
    to 0..1, empty ones dropped; (ymin, xmin, ymax, xmax) each."""
    n = min(len(ymin), len(xmin), len(ymax), len(xmax))
    out = []
    for box in zip(ymin[:n], xmin[:n], ymax[:n], xmax[:n]):
        y0, x0, y1, x1 = (min(max(float(v), 0.0), 1.0) for v in box)
        if y1 > y0 and x1 > x0:
            out.append((y0, x0, y1, x1))
    return out
