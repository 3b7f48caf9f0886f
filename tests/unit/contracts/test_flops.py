"""The FLOPs/MFU contract: formulas and the result.json reader."""

import json

import pytest

from official_bench.contracts import flops
from official_bench.contracts.result_json import SCHEMA, load_run_json
from official_bench.contracts.throughput import (
    Interval,
    images_per_second_over_window,
)


def test_training_flops_are_three_forwards_of_two_flops_per_mac():
    # ResNet-50 v1.5 at 224: 4.09 G multiply-adds forward -> 24.54 GFLOP.
    assert flops.training_gflop_per_image(4.09) == pytest.approx(24.54)


def test_mfu_divides_by_every_device_and_needs_a_peak():
    # 2,375 img/s x 24.54 GFLOP on one A100 (312 TFLOP/s): about 19%.
    assert flops.mfu(2375, 24.54, 312, 1) == pytest.approx(0.1868, abs=1e-3)
    assert flops.mfu(2 * 2375, 24.54, 312, 2) == pytest.approx(
        flops.mfu(2375, 24.54, 312, 1))
    assert flops.mfu(2375, 24.54, None, 1) is None


def _write(tmp_path, extra):
    record = {"schema": SCHEMA, "stats": {"intervals": [
        {"start_step": 0, "end_step": 10, "seconds": 1.0,
         "examples_per_second": 80.0}]}}
    record.update(extra)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(record))
    return str(path)


def test_reader_returns_the_record_and_rejects_a_bad_peak(tmp_path):
    good = _write(tmp_path, {"flops": {
        "gflop_per_image": 24.5, "devices": 8, "device": "A100-SXM4-80GB",
        "precision": "fp16", "peak_tflops_per_device": 312.0,
        "peak_source": "datasheet", "mfu": 0.2}})
    result, warning = load_run_json(good)
    assert warning is None
    assert result.flops.devices == 8
    assert result.flops.mfu_at(1000) == pytest.approx(
        1000 * 24.5 / 1000 / (312 * 8))
    bad = _write(tmp_path, {"flops": {"gflop_per_image": 24.5,
                                      "peak_tflops_per_device": -1}})
    result, warning = load_run_json(bad)
    assert result is None and "flops.peak_tflops_per_device" in warning


def test_reader_without_flops_is_none(tmp_path):
    result, _ = load_run_json(_write(tmp_path, {}))
    assert result.flops is None


def test_images_over_time_is_never_above_the_mean_of_rates():
    intervals = [Interval(0, 10, 1.0, 100.0), Interval(10, 20, 2.0, 50.0)]
    over_time = images_per_second_over_window(intervals)
    # 200 images in 3 s; the mean of rates is 75.
    assert over_time == pytest.approx(200 / 3)
    assert over_time < sum(i.examples_per_second for i in intervals) / 2
    assert images_per_second_over_window([]) is None
