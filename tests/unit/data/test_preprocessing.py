"""Section 2: crop windows, fused decode, boxes, flip, normalisation."""

import numpy as np
import pytest

from official_bench.config import DatasetConfig
from official_bench.contracts.imagenet import (
    IMAGENET_MEAN_RGB,
    IMAGENET_STD_RGB,
)
from official_bench.data import preprocessing as pp
from official_bench.data.build.example_proto import classic_example
from official_bench.data.records import pipeline
from official_bench.runtime.keras_setup import tf

NO_BOXES = tf.zeros([0, 4])


def encode(pixels, fmt="jpeg"):
    pixels = tf.constant(pixels, tf.uint8)
    if fmt == "png":
        return tf.io.encode_png(pixels).numpy()
    return tf.io.encode_jpeg(pixels, quality=100).numpy()


def gradient(height, width):
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([x * 255 // max(width - 1, 1),
                     y * 255 // max(height - 1, 1),
                     np.full_like(x, 128)], -1).astype(np.uint8)


def test_center_crop_window_matches_r23_arithmetic():
    # 224 / (224 + 32) of the short side, centred.
    window = pp.center_crop_window(tf.constant([375, 500, 3]), 224).numpy()
    crop = int(224 / 256 * 375)
    assert window.tolist() == [(375 - crop + 1) // 2, (500 - crop + 1) // 2,
                               crop, crop]
    # Padding 0 keeps the whole short side: a 32x32 image stays whole.
    assert pp.center_crop_window(tf.constant([32, 32, 3]), 32,
                                 0).numpy().tolist() == [0, 0, 32, 32]


def test_random_crop_respects_area_and_aspect_ranges():
    shape = tf.constant([300, 400, 3])
    areas, ratios = [], []
    for i in range(40):
        y, x, h, w = pp.random_crop_window(
            shape, NO_BOXES, tf.constant([i, 7], tf.int64)).numpy()
        assert 0 <= y and y + h <= 300 and 0 <= x and x + w <= 400
        areas.append(h * w / (300 * 400))
        ratios.append(w / h)
    assert min(areas) >= 0.05 - 0.01 and max(areas) <= 1.0
    assert len(set(areas)) > 10  # really random
    # Inside the range unless the 100 attempts failed (then: whole image).
    assert all(0.74 <= r <= 1.34 or a == 1.0 for r, a in zip(ratios, areas))
    # Area range starting at 1: no crop at all.
    assert pp.random_crop_window(shape, NO_BOXES, tf.constant([1, 2]),
                                 area_range=(1.0, 1.0)).numpy().tolist() == \
        [0, 0, 300, 400]


def test_boxes_steer_the_crop():
    # Box = the top-left quarter; min_object_covered 1 forces crops to hold it.
    box = tf.constant([[0.0, 0.0, 0.25, 0.25]])
    for i in range(20):
        y, x, h, w = pp.random_crop_window(
            tf.constant([200, 200, 3]), box, tf.constant([i, 3], tf.int64),
            area_range=(0.05, 0.2), min_object_covered=1.0).numpy()
        assert y <= 1 and x <= 1 and y + h >= 49 and x + w >= 49


def test_boxes_from_records_reach_the_train_crop(tmp_path):
    # A white top-left quarter on black; the record's box marks it.
    pixels = np.zeros((64, 64, 3), np.uint8)
    pixels[:32, :32] = 255
    data = encode(pixels)
    with tf.io.TFRecordWriter(str(tmp_path / "train-00000-of-00001")) as w:
        w.write(classic_example(data, 1, 64, 64,
                                boxes=[(0.0, 0.0, 0.5, 0.5)]))
    ds = DatasetConfig(data_dir=str(tmp_path), image_size=16, num_classes=1,
                       batch_size=32, shuffle_buffer_size=1, one_hot=False,
                       min_object_covered=0.8, crop_area_range=[0.2, 0.35])
    images, _ = next(iter(pipeline.records_dataset(ds, records_ctx(), 32,
                                                  True)))
    # Most crops sit on the box (a failed sampling falls back to the whole
    # image, a quarter white); crops of that size anywhere would average
    # about a quarter white too.
    assert float(tf.reduce_mean(images)) > 150
    without = DatasetConfig(**{**ds.__dict__, "crop_area_range": [1.0, 1.0]})
    whole, _ = next(iter(pipeline.records_dataset(without, records_ctx(), 32,
                                                 True)))
    assert 40 < float(tf.reduce_mean(whole)) < 90


def records_ctx():
    return tf.distribute.InputContext()


def test_fused_decode_equals_decode_then_crop():
    data = encode(gradient(48, 64))
    seed = tf.constant([3, 4], tf.int64)
    fused = pp.preprocess_for_train(data, NO_BOXES, seed, image_size=24)
    unfused = pp.decode_then_random_crop(data, seed, image_size=24)
    np.testing.assert_allclose(fused.numpy(), unfused.numpy(), atol=1e-3)


def test_png_inside_a_record_takes_the_generic_path():
    pixels = gradient(20, 30)
    png, jpg = encode(pixels, "png"), encode(pixels)
    out_png = pp.preprocess_for_eval(png, image_size=20, crop_padding=0)
    out_jpg = pp.preprocess_for_eval(jpg, image_size=20, crop_padding=0)
    assert out_png.shape == (20, 20, 3)
    assert float(tf.reduce_mean(tf.abs(out_png - out_jpg))) < 3.0
    seed = tf.constant([1, 1], tf.int64)
    assert pp.preprocess_for_train(png, NO_BOXES, seed,
                                   image_size=12).shape == (12, 12, 3)


def test_grayscale_input_and_one_channel_output():
    gray = tf.io.encode_jpeg(tf.fill([10, 10, 1], tf.constant(
        77, tf.uint8))).numpy()
    rgb = pp.preprocess_for_eval(gray, image_size=10, crop_padding=0)
    assert rgb.shape == (10, 10, 3)
    np.testing.assert_allclose(rgb.numpy(), 77, atol=2)
    one = pp.preprocess_for_eval(gray, image_size=10, channels=1,
                                 crop_padding=0)
    assert one.shape == (10, 10, 1)


def test_flip_is_random_per_image_and_can_be_off():
    data = encode(gradient(16, 16))
    outs = [pp.preprocess_for_train(data, NO_BOXES,
                                    tf.constant([i, 0], tf.int64),
                                    image_size=16, area_range=(1.0, 1.0))
            .numpy() for i in range(12)]
    left_bright = [o[:, 0, 0].mean() > o[:, -1, 0].mean() for o in outs]
    assert 0 < sum(left_bright) < 12  # both orientations occur
    no_flip = [pp.preprocess_for_train(data, NO_BOXES,
                                       tf.constant([i, 0], tf.int64),
                                       image_size=16, area_range=(1.0, 1.0),
                                       random_flip=False).numpy()
               for i in range(6)]
    assert all(o[:, 0, 0].mean() < o[:, -1, 0].mean() for o in no_flip)


def test_normalisation_uses_the_imagenet_constants_and_dtype():
    data = encode(np.full((8, 8, 3), 200, np.uint8))
    raw = pp.preprocess_for_eval(data, image_size=8, crop_padding=0)
    mean = np.array(IMAGENET_MEAN_RGB, np.float32)
    std = np.array(IMAGENET_STD_RGB, np.float32)
    sub = pp.preprocess_for_eval(data, image_size=8, crop_padding=0,
                                 mean_subtract=True)
    both = pp.preprocess_for_eval(data, image_size=8, crop_padding=0,
                                  mean_subtract=True, standardize=True,
                                  dtype="bfloat16")
    np.testing.assert_allclose(sub.numpy(), raw.numpy() - mean, atol=1e-3)
    assert both.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(both, tf.float32).numpy(),
                               (raw.numpy() - mean) / std, atol=0.05)
    u8 = pp.preprocess_for_eval(data, image_size=8, crop_padding=0,
                                mean_subtract=True, transfer_uint8=True)
    assert u8.dtype == tf.uint8
    # On the device: normalize() on the uint8 batch gives the same numbers.
    np.testing.assert_allclose(
        pp.normalize(u8[tf.newaxis], True, False).numpy()[0],
        sub.numpy(), atol=0.51)


@pytest.mark.parametrize("size", [8, 17])
def test_outputs_have_static_shapes(size):
    data = encode(gradient(30, 20))
    train = tf.function(lambda b: pp.preprocess_for_train(
        b, NO_BOXES, tf.constant([1, 2], tf.int64), image_size=size))
    spec = train.get_concrete_function(
        tf.TensorSpec([], tf.string)).structured_outputs
    assert spec.shape.as_list() == [size, size, 3]
    assert train(data).shape == (size, size, 3)
