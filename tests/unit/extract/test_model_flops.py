"""Model FLOPs and MFU per case (issue 29 §2) and images / time over the
counted window beside the mean of rates (issue 29 §6), on synthetic trees;
DLPerf's table stays as it is with or without result JSONs."""

import csv
import io
import json

import pytest

from official_bench.contracts import flops as flops_contract, throughput
from official_bench.contracts.throughput import Interval
from official_bench.extract import (
    extractor as extract,
    model_flops,
    plot,
    tables,
)
from support import logkit as kit

GFLOP = 24.54  # ResNet-50 v1.5 at 224: 3 x 2 x 4.09 G multiply-adds


def flops(devices, peak=312.0, source="datasheet: A100 bf16 dense",
          device="NVIDIA A100-SXM4-40GB"):
    return {"gflop_per_image": GFLOP, "devices": devices, "device": device,
            "precision": "bf16", "peak_tflops_per_device": peak,
            "peak_source": source}


def tree(root, with_json=True, flops_of=flops, speeds=None):
    """1n1g at 300 img/s and 1n2g at 590 (2 runs each, warm-up 50)."""
    logs = root / "bz128"
    for case, rate in (("1n1g", 300.0), ("1n2g", 590.0)):
        devices = kit.devices(case)
        for index in (1, 2):
            rates = speeds or [50.0] + [rate] * 5
            path = kit.write_run(logs, case, rates, index=index)
            if not with_json:
                continue
            data = kit.result_json([(k * 100, k * 100 + 100, e)
                                    for k, e in enumerate(rates)],
                                   128 * devices, devices)
            if flops_of is not None:
                data["flops"] = flops_of(devices)
            kit.write_json(path[:-4] + ".json", data)
    return str(logs)


def test_mfu_per_case_from_the_case_median_and_its_devices(tmp_path):
    out = extract.extract(tree(tmp_path))
    for case, median, devices in (("1n1g", 300.0, 1), ("1n2g", 590.0, 2)):
        entry = out.result["rn50"][case]
        assert entry["median_speed"] == median
        got = entry[model_flops.KEY]
        achieved = median * GFLOP / 1000
        assert got["achieved_tflops"] == round(achieved, 4)
        assert got["achieved_tflops_per_device"] == round(achieved / devices,
                                                          4)
        assert got["mfu"] == round(flops_contract.mfu(
            median, GFLOP, 312.0, devices), 4)
        assert got["mfu"] == round(achieved / (312.0 * devices), 4)
        assert got["mfu_note"] is None
    assert not [w for w in out.warnings if "flops" in w]


def test_dlperfs_table_is_the_same_with_and_without_result_json(tmp_path):
    plain = extract.extract(tree(tmp_path / "a", with_json=False)).result
    rich = extract.extract(tree(tmp_path / "b")).result
    assert tables.markdown_table(rich["rn50"]) == \
        tables.markdown_table(plain["rn50"])
    for case in ("1n1g", "1n2g"):
        for key in ("average_speed", "median_speed", "speedup",
                    "batch_size_per_device"):
            assert rich["rn50"][case][key] == plain["rn50"][case][key]
    assert "Model FLOPs" not in tables.markdown_report(plain, "bz128")
    assert "Model FLOPs" not in tables.markdown_report(
        extract.extract(tree(tmp_path / "c", flops_of=None)).result, "bz128")


def test_markdown_csv_and_html_carry_tflops_and_mfu(tmp_path):
    extraction = extract.extract(tree(tmp_path))
    markdown = tables.markdown_report(extraction.result, "bz128")
    section = markdown[markdown.index("### Model FLOPs utilisation"):]
    assert "| " + " | ".join(tables.FLOPS_COLUMNS) + " |" in section
    # 590 x 24.54 / 1000 = 14.479 TFLOP/s over 2 x 312: 2.32%
    assert "| 1 | 2 | 590.00 | 24.54 | 14.479 | 7.239 | 312 | 2.32% |" \
        in section
    rows = list(csv.DictReader(
        io.StringIO(tables.csv_text(extraction.result))))
    assert [r["mfu"] for r in rows] == ["0.0236", "0.0232"]
    assert rows[1]["achieved_tflops"] == "14.4786"
    assert rows[1]["gflop_per_image"] == str(GFLOP)
    written, _ = extract.write_outputs(extraction, str(tmp_path / "out"),
                                       plot=False)
    page = open(next(p for p in written if p.endswith(".html"))).read()
    assert "<h3>Model FLOPs utilisation</h3>" in page
    assert "<td>2.32%</td>" in page
    data = json.loads(open(next(p for p in written
                                if p.endswith(".json"))).read())
    assert data["rn50"]["1n2g"]["model_flops"]["mfu"] == 0.0232


def test_unknown_peak_gives_na_naming_why(tmp_path):
    def no_peak(devices):
        return flops(devices, peak=None, device="Some GPU",
                     source="peak unknown: 'Some GPU' is not in the table")
    extraction = extract.extract(tree(tmp_path, flops_of=no_peak))
    got = extraction.result["rn50"]["1n1g"][model_flops.KEY]
    assert got["mfu"] is None
    assert got["achieved_tflops"] == round(300 * GFLOP / 1000, 4)
    (row, _) = tables.flops_rows(extraction.result["rn50"])
    assert row[-1] == ("n/a (peak unknown for Some GPU: peak unknown: "
                       "'Some GPU' is not in the table)")
    assert model_flops.why_no_mfu(flops_contract.FlopsRecord(GFLOP)) == (
        "peak unknown for the device (result.json has no peak; set "
        "runtime.peak_tflops)")


def test_devices_that_disagree_with_the_case_warn(tmp_path):
    extraction = extract.extract(tree(tmp_path, flops_of=lambda d: flops(4)))
    warned = [w for w in extraction.warnings if "flops.devices" in w]
    assert warned == [
        "rn50 1n1g: result.json's flops.devices is 4 but the case has 1 "
        "device(s); MFU is counted over 1 device(s)",
        "rn50 1n2g: result.json's flops.devices is 4 but the case has 2 "
        "device(s); MFU is counted over 2 device(s)"]
    assert extraction.result["rn50"]["1n2g"][model_flops.KEY]["mfu"] == \
        round(590 * GFLOP / 1000 / (312 * 2), 4)


def cpu_tree(root):
    """1n1g at 30 img/s and 1n2g (two logical CPU devices, CPU_DEVICES=1,2)
    at 29 on one CPU, with the trainer's records: one device, the CPU's
    whole peak (measure/mfu.py run_devices)."""
    logs = root / "bz8"
    for case, rate in (("1n1g", 30.0), ("1n2g", 29.0)):
        replicas = kit.devices(case)
        rates = [5.0] + [rate] * 5
        path = kit.write_run(logs, case, rates, batch=8)
        env = kit.environment(
            gpu_names=[], num_replicas=replicas,
            devices=[f"/job:localhost/replica:0/task:0/device:CPU:{i}"
                     for i in range(replicas)])
        data = kit.result_json([(k * 100, k * 100 + 100, e)
                                for k, e in enumerate(rates)],
                               8 * replicas, replicas, env=env)
        data["flops"] = flops(1, peak=1.5, device="AMD EPYC",
                              source="CPU fp32 peak at 2.60 GHz")
        kit.write_json(path[:-4] + ".json", data)
    return str(logs)


def test_a_cpu_case_of_logical_devices_has_the_trainers_mfu(tmp_path):
    # the trainer divides by one CPU; so must the extractor, silently
    extraction = extract.extract(cpu_tree(tmp_path))
    for case, rate in (("1n1g", 30.0), ("1n2g", 29.0)):
        got = extraction.result["rn50"][case][model_flops.KEY]
        trainers = flops_contract.FlopsRecord(
            GFLOP, devices=1, peak_tflops_per_device=1.5).mfu_at(rate)
        assert got["mfu"] == round(trainers, 4)
        assert got["achieved_tflops_per_device"] == got["achieved_tflops"]
    assert not [w for w in extraction.warnings if "flops" in w]


def test_peak_devices_count_gpus_or_one_cpu_per_node():
    assert model_flops.peak_devices(2, 16, "gpu") == 16
    assert model_flops.peak_devices(2, 16, None) == 16
    assert model_flops.peak_devices(1, 2, "cpu") == 1
    assert model_flops.peak_devices(2, 4, "cpu") == 2


def test_mfu_is_drawn_beside_the_speedup(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    result = extract.extract(tree(tmp_path)).result
    fig = plot.figure(result, "bz128")
    speed, speedup, mfu = fig.axes
    assert (speedup.get_ylabel(), mfu.get_ylabel()) == ("speedup", "MFU (%)")
    (line,) = mfu.lines
    assert list(line.get_xdata()) == [1, 2]
    assert [round(y, 2) for y in line.get_ydata()] == [2.36, 2.32]
    without = extract.extract(tree(tmp_path / "plain", with_json=False)).result
    assert len(plot.figure(without, "bz128").axes) == 2


def test_images_per_second_over_the_window_beside_the_mean_of_rates(tmp_path):
    # counted intervals alternate 300 and 600 img/s: the mean of the rates
    # is 450, images / time their harmonic mean 400
    rates = [50.0, 300.0, 600.0, 300.0, 600.0, 300.0, 600.0]
    logs = tree(tmp_path, speeds=rates)
    extraction = extract.extract(logs, train_batches=700)
    entry = extraction.result["rn50"]["1n1g"]
    assert entry["median_speed"] == 450.0
    assert entry["images_per_second_over_window"] == 400.0
    run = entry["run_details"][0]
    counted = [Interval(k * 100, k * 100 + 100, 128 * 100 / e, e)
               for k, e in enumerate(rates) if k]
    assert run["images_per_second_over_window"] == pytest.approx(
        throughput.images_per_second_over_window(counted))
    csv_rows = tables.csv_rows(extraction.result)
    assert csv_rows[0]["images_per_second_over_window"] == 400.0


def test_mfu_is_at_images_over_time_as_the_trainers_is(tmp_path):
    # counted intervals alternate 300 and 600 img/s: the mean of the rates
    # (median_speed) is 450, images / time 400; the trainer's MFU for these
    # runs is at 400 (docs/mfu.md), so the table's must be too
    rates = [50.0, 300.0, 600.0, 300.0, 600.0, 300.0, 600.0]
    extraction = extract.extract(tree(tmp_path, speeds=rates),
                                 train_batches=700)
    entry = extraction.result["rn50"]["1n1g"]
    assert entry["median_speed"] == 450.0
    got = entry[model_flops.KEY]
    assert got["images_per_second"] == 400.0
    assert got["achieved_tflops"] == round(400.0 * GFLOP / 1000, 4)
    assert got["mfu"] == round(400.0 * GFLOP / 1000 / 312.0, 4)
    (row, _) = tables.flops_rows(extraction.result["rn50"])
    assert row[2] == "400.00"


def test_mfu_is_from_the_unrounded_rate_as_the_trainers(tmp_path):
    # 7.2144 img/s prints as 7.21; MFU from that would read 0.4998 where
    # the trainer (and the history) give 0.5001
    logs = tree(tmp_path, speeds=[5.0] + [7.2144] * 5,
                flops_of=lambda d: flops(d, peak=0.354))
    entry = extract.extract(logs).result["rn50"]["1n1g"]
    exact = entry["run_details"][0]["images_per_second_over_window"]
    assert round(exact, 4) == 7.2144
    got = entry[model_flops.KEY]
    assert got["mfu"] == round(flops_contract.mfu(exact, GFLOP, 0.354, 1), 4)
    assert got["mfu"] == 0.5001
    assert got["images_per_second"] == 7.21
