"""measure/mfu.py and the trainer: result.json's flops object, the summary
line's MFU, runtime.peak_tflops, and a real CPU run's MFU in (0, 1]."""

import json

import pytest

from official_bench import config as C, trainer
from official_bench.contracts import flops as contract
from official_bench.contracts.result_json import load_run_json
from official_bench.host import peaks
from official_bench.measure import mfu
from tests.support.helpers import tiny

COUNTED = mfu.ModelFlops(4.09, "test", 8.19, 0.5)
GPU = mfu.RunDevices("NVIDIA A100-SXM4-80GB", 8, "fp16",
                     peaks.Peak(312.0, "A100 datasheet", "A100 SXM fp16 peak"))


def test_record_follows_the_contract():
    item = mfu.record(COUNTED, GPU, 2400.0)
    assert item["gflop_per_image"] == pytest.approx(24.54)
    assert item["tf_cost_analysis_gflop_per_image"] == pytest.approx(24.57)
    assert item["achieved_tflops_total"] == pytest.approx(2400 * 24.54 / 1e3)
    assert item["achieved_tflops_per_device"] == pytest.approx(
        item["achieved_tflops_total"] / 8)
    assert item["mfu"] == pytest.approx(2400 * 24.54 / 1e3 / (8 * 312))
    fields = {line.split()[0].split(".", 1)[1]
              for line in contract.__doc__.splitlines()
              if line.strip().startswith("flops.")}
    assert set(item) == fields
    read = contract.read_record({"flops": item})
    assert read.mfu_at(2400.0) == pytest.approx(item["mfu"])
    assert (read.device, read.precision, read.devices) == (
        "NVIDIA A100-SXM4-80GB", "fp16", 8)


def test_summary_text_names_the_peak_or_says_it_is_unknown():
    item = mfu.record(COUNTED, GPU, 2400.0)
    text = mfu.summary_text(item, GPU.peak)
    assert text.startswith("; 24.5 GFLOP/img, 7.36 TFLOP/s per device "
                           "(58.9 over 8), MFU 2.4% of 312 TFLOP/s "
                           "(A100 SXM fp16 peak)")
    unknown = mfu.RunDevices("NVIDIA B200", 1, "bf16", None)
    item = mfu.record(COUNTED, unknown, 100.0)
    assert item["mfu"] is None and item["peak_tflops_per_device"] is None
    assert "peak unknown for NVIDIA B200 bf16 (set runtime.peak_tflops)" in \
        mfu.summary_text(item, None)
    assert mfu.summary_text(None, None) == ""


def test_cpu_devices_are_the_workers_and_the_override_wins():
    devices = mfu.run_devices(num_gpus=0, gpu_names=[], num_workers=2,
                              num_replicas=4, dtype="float32",
                              peak_override=None)
    assert devices.devices == 2 and devices.precision == "fp32"
    forced = mfu.run_devices(num_gpus=0, gpu_names=[], num_workers=1,
                             num_replicas=1, dtype="mixed_bfloat16",
                             peak_override=0.5)
    assert forced.precision == "bf16"
    assert forced.peak == peaks.Peak(0.5, "runtime.peak_tflops",
                                     "runtime.peak_tflops")


def test_the_cross_check_warns_only_when_the_counts_disagree(
        absl_messages):
    """4.09 G multiply-adds are 8.18 forward GFLOP: TensorFlow's 8.19
    agrees; 10.0 is 22% off, past the 5% tolerance."""
    mfu._check(mfu.ModelFlops(4.09, "test", 8.19, 0.5))
    assert not [m for m in absl_messages if "MFU uses" in m]
    mfu._check(mfu.ModelFlops(4.09, "test", 10.0, 0.5))
    assert [m for m in absl_messages if "MFU uses" in m] == [
        "official_bench: FLOPs: 8.180 GFLOP forward from the layer shapes "
        "but 10.000 from TensorFlow's profiler; MFU uses the former"]


@pytest.mark.parametrize("value", ["-1", "inf", "abc"])
def test_peak_tflops_must_be_a_non_negative_number(value):
    with pytest.raises(C.ConfigError, match="runtime.peak_tflops"):
        C.load_config(params_override=f"runtime.peak_tflops={value}")


def test_peak_tflops_accepts_null_zero_and_numbers():
    for value, want in (("null", None), ("0", 0), ("312", 312)):
        cfg = C.load_config(params_override=f"runtime.peak_tflops={value}")
        assert cfg.runtime.peak_tflops == want


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("mfu")
    return trainer.run(tiny(), model_dir=str(model_dir))


def test_a_cpu_run_s_mfu_lies_in_zero_one(cpu_run):
    assert 0 < cpu_run.mfu <= 1
    with open(cpu_run.result_path) as f:
        item = json.load(f)["flops"]
    assert item["mfu"] == cpu_run.mfu
    assert item["devices"] == 1 and item["precision"] == "fp32"
    assert item["peak_source"].startswith("CPU fp32 peak")
    assert item["tf_cost_analysis_gflop_per_image"] == pytest.approx(
        item["gflop_per_image"], rel=0.01)
    # MFU from images / time over the counted window
    rate = cpu_run.images_per_second_over_window
    assert item["achieved_tflops_total"] == pytest.approx(
        contract.achieved_tflops(rate, item["gflop_per_image"]))
    # the extractor's reader takes it as written
    read, warning = load_run_json(cpu_run.result_path)
    assert warning is None and read.flops.mfu_at(rate) == pytest.approx(
        cpu_run.mfu)


def test_images_over_time_is_recorded_and_never_above_the_mean(cpu_run):
    stats = cpu_run.stats
    with open(cpu_run.result_path) as f:
        recorded = json.load(f)["stats"]
    assert recorded["images_per_second_over_window"] == \
        stats.images_per_second_over_window
    assert 0 < stats.images_per_second_over_window <= \
        stats.average_examples_per_second * (1 + 1e-12)
