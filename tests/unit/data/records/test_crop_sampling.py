"""The TensorFlow-free crop windows (data/records/crop_sampling.py) are
the TensorFlow path's: the eval centre crop exactly, and the train crop
drawn from the same distribution as tf.image.sample_distorted_bounding_box
(crop area and aspect over 3,000 draws each: two-sample Kolmogorov-Smirnov
and a chi-square test of their 20-bin histograms, both at the 0.1% level),
tests that reject a sampler uniform in area instead of in side, and a wrong
area range."""

import math
import random

import numpy as np
import pytest

from official_bench.data import preprocessing
from official_bench.data.records import crop_sampling
from official_bench.runtime.keras_setup import tf

DRAWS = 3000
AREA, ASPECT = (0.05, 1.0), (0.75, 1.33)


def ks_statistic(a, b):
    """The largest gap between the two samples' empirical CDFs."""
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    gaps = np.abs(np.searchsorted(a, grid, "right") / len(a)
                  - np.searchsorted(b, grid, "right") / len(b))
    return float(gaps.max())


def ks_limit(n, m, alpha=0.001):
    return math.sqrt(-math.log(alpha / 2) / 2) * math.sqrt((n + m) / (n * m))


def tf_windows(height, width, boxes, area=AREA, aspect=ASPECT, covered=0.1):
    boxes = tf.constant(np.reshape(boxes, (-1, 4)), tf.float32)

    @tf.function
    def draw(seeds):
        def one(seed):
            return preprocessing.random_crop_window(
                tf.constant([height, width, 3]), boxes, seed, area, aspect,
                covered)
        return tf.map_fn(one, seeds, fn_output_signature=tf.int32)
    seeds = tf.stack([tf.range(DRAWS, dtype=tf.int64),
                      tf.fill([DRAWS], tf.constant(7, tf.int64))], 1)
    return draw(seeds).numpy()


def our_windows(height, width, boxes, area=AREA, aspect=ASPECT, covered=0.1,
                sampler=crop_sampling.train_window):
    rng = random.Random(1234)
    return np.array([sampler(height, width, boxes, rng, area, aspect,
                             covered) for _ in range(DRAWS)])


def stats(windows, height, width):
    """(area fraction, aspect w/h) of each window."""
    h, w = windows[:, 2].astype(float), windows[:, 3].astype(float)
    return h * w / (height * width), w / h


def chi_square(a, b, bins=20):
    """(statistic, limit at 0.1%) of the two samples' histograms over the
    bins of their common range (bins with fewer than 10 draws in both
    merged into their neighbour)."""
    edges = np.linspace(min(a.min(), b.min()), max(a.max(), b.max()),
                        bins + 1)
    ca, cb = np.histogram(a, edges)[0], np.histogram(b, edges)[0]
    merged, pa, pb = [], 0, 0
    for x, y in zip(ca, cb):
        pa, pb = pa + x, pb + y
        if pa + pb >= 10:
            merged.append((pa, pb))
            pa = pb = 0
    if pa + pb:
        merged[-1] = (merged[-1][0] + pa, merged[-1][1] + pb)
    ka, kb = math.sqrt(len(b) / len(a)), math.sqrt(len(a) / len(b))
    stat = sum((ka * x - kb * y) ** 2 / (x + y) for x, y in merged)
    df = len(merged) - 1  # Wilson-Hilferty: the 99.9% point of chi2(df)
    limit = df * (1 - 2 / (9 * df) + 3.09 * math.sqrt(2 / (9 * df))) ** 3
    return stat, limit


def mismatches(ours, theirs, name):
    """What tells the samples apart: the KS test or the histograms."""
    out = []
    if ks_statistic(ours, theirs) >= ks_limit(len(ours), len(theirs)):
        out.append(f"{name} distribution (KS)")
    stat, limit = chi_square(ours, theirs)
    if stat >= limit:
        out.append(f"{name} histogram (chi-square {stat:.0f} >= "
                   f"{limit:.0f})")
    return out


def uniform_in_area(height, width, boxes, rng, area, aspect, covered):
    """A wrong sampler: the area fraction uniform, not the side."""
    for _ in range(100):
        a = rng.uniform(*area) * height * width
        r = rng.uniform(*aspect)
        h, w = round(math.sqrt(a / r)), round(math.sqrt(a * r))
        if 0 < h <= height and 0 < w <= width:
            return 0, 0, h, w
    return 0, 0, height, width


@pytest.mark.parametrize("height,width,boxes", [
    (375, 500, []),
    (500, 375, []),
    (400, 400, [(0.1, 0.2, 0.4, 0.5)]),  # a small object: min covered bites
])
def test_train_crops_follow_tensorflows_distribution(height, width, boxes):
    theirs = stats(tf_windows(height, width, boxes), height, width)
    mine = our_windows(height, width, boxes)
    assert (mine[:, 0] >= 0).all() and (mine[:, 1] >= 0).all()
    assert (mine[:, 0] + mine[:, 2] <= height).all()
    assert (mine[:, 1] + mine[:, 3] <= width).all()
    ours = stats(mine, height, width)
    assert mismatches(ours[0], theirs[0], "area") == []
    assert mismatches(ours[1], theirs[1], "aspect") == []
    # The position too: the crop's top edge over the room it has.
    room = lambda w: w[:, 0] / np.maximum(height - w[:, 2], 1)  # noqa: E731
    assert ks_statistic(room(mine), room(tf_windows(height, width, boxes))
                        ) < ks_limit(DRAWS, DRAWS)


def test_the_statistic_rejects_a_wrong_distribution_or_range():
    height, width = 375, 500
    theirs = stats(tf_windows(height, width, []), height, width)[0]
    wrong_shape = stats(our_windows(height, width, [],
                                    sampler=uniform_in_area), height, width)
    assert len(mismatches(wrong_shape[0], theirs, "area")) == 2
    # (With no boxes min_object_covered 0.1 makes 0.1 the smallest area:
    # a range from 0.08 would draw the same crops.)
    for area in ((0.15, 1.0), (0.05, 0.9)):
        wrong_range = stats(our_windows(height, width, [], area=area),
                            height, width)
        assert any("histogram" in m for m in mismatches(
            wrong_range[0], theirs, "area")), area
    aspects = stats(tf_windows(height, width, []), height, width)[1]
    wrong_aspect = stats(our_windows(height, width, [], aspect=(0.7, 1.4)),
                         height, width)[1]
    assert mismatches(wrong_aspect, aspects, "aspect")


def test_a_full_area_range_keeps_the_whole_image():
    assert crop_sampling.train_window(30, 40, [], random.Random(0),
                                      (1.0, 1.0)) == (0, 0, 30, 40)


def test_a_box_that_cannot_be_covered_gives_the_whole_image():
    # A one-pixel-wide box: no crop of the range covers any of it... unless
    # it lands on it; min_object_covered 1 with a zero-area box: never.
    rng = random.Random(0)
    window = crop_sampling.sample_window(100, 100, [(0.5, 0.5, 0.5, 0.6)],
                                         rng, min_object_covered=1.0)
    assert window == (0, 0, 100, 100)


@pytest.mark.parametrize("size,padding", [(224, 32), (224, 0), (8, 32),
                                          (299, 32)])
def test_centre_crop_is_tensorflows(size, padding):
    rng = np.random.default_rng(0)
    shapes = [(375, 500), (500, 375), (1, 1), (7, 3), (224, 224)] + [
        tuple(int(v) for v in rng.integers(1, 2000, 2)) for _ in range(40)]
    for h, w in shapes:
        expected = preprocessing.center_crop_window(
            tf.constant([h, w, 3]), size, padding).numpy().tolist()
        assert list(crop_sampling.center_window(h, w, size, padding)) == \
            expected, (h, w)


def test_attempts_match_the_tensorflow_path():
    assert crop_sampling.MAX_ATTEMPTS == preprocessing.MAX_ATTEMPTS


def test_boxes_are_kept_as_the_tensorflow_path_keeps_them():
    assert crop_sampling.clip_boxes(
        [0.1, -0.5, 0.5, 0.2], [0.2, 0.0, 0.1], [0.9, 0.5, 0.5, 0.8],
        [1.5, 0.4, 0.05]) == [(0.1, 0.2, 0.9, 1.0), (0.0, 0.0, 0.5, 0.4)]
