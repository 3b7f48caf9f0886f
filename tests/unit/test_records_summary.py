"""scripts/records_summary.py, the table gpu_records_check.sh writes into
BENCHMARKS.md: img/s from the extractor's 1n1g medians where it wrote them
(else the runs' own images/time over their window, and the row says
which), real/synthetic from those, the median input wait, the workers'
decode rate and what the workers' cores could decode against the GPU,
host busy cores from /proc/stat lines; a usage line and exit 2 without
OUT_DIR, exit 1 when no run is found."""

import json

import pytest

from support.helpers import load_script


@pytest.fixture(scope="module")
def summary():
    return load_script("scripts", "records_summary.py")


def _run(root, data, dtype, index, over_window, wait=None, per_core=None,
         workers=15, decode="cpu", decoder="simplejpeg", share=None):
    path = (root / f"logs_{data}" / "jax" / "resnet50" / "bz256" / "1n1g" /
            f"rn50_b256_{dtype}_{index}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    result = {"stats": {"images_per_second_over_window": over_window}}
    if data.startswith("real"):
        result["input"] = {"decode": decode, "decoder": decoder,
                           "num_workers": workers,
                           "decode_images_per_cpu_second": per_core}
        if share is not None:
            result["input"]["worker_decode_share"] = share
        result["input_wait"] = {"fraction": wait}
    path.write_text(json.dumps(result))


def _extracted(root, data, medians):
    folder = root / f"result_{data}"
    folder.mkdir(parents=True)
    tables = {f"rn50_{dtype}": {"1n1g": {
        "dtype": dtype, "median_speed": round(value),
        "median_speed_unrounded": value}}
        for dtype, value in medians.items()}
    (folder / "bz256_result.json").write_text(json.dumps(tables))


def test_the_extractors_medians_come_first(tmp_path, summary, capsys):
    for i, (rate, wait, per_core) in enumerate(
            [(5400.0, 0.52, 320.0), (5600.0, 0.48, 330.0),
             (5500.0, 0.50, 325.0)], 1):
        _run(tmp_path, "real", "fp16", i, rate, wait, per_core)
        _run(tmp_path, "synthetic", "fp16", i, 6800.0 + i)
        _run(tmp_path, "real", "bf16", i, 5900.0 + i, 0.5, 300.0)
        _run(tmp_path, "synthetic", "bf16", i, 6400.0 + i)
    _extracted(tmp_path, "real", {"fp16": 5492.58})
    _extracted(tmp_path, "synthetic", {"fp16": 6808.09})
    cores = tmp_path / "cpu_real_fp16"
    cores.write_text("cpu  100 0 100 800 0 0 0 0 0 0\n"
                     "cpu  1100 0 1100 1800 0 0 0 0 0 0\n")
    (tmp_path / "cpu_real_fp16.cores").write_text("16\n")

    assert summary.main([str(tmp_path)]) == 0
    rows = {r["dtype"]: r for r in json.loads(
        (tmp_path / "records_summary.json").read_text())}
    fp16, bf16 = rows["fp16"], rows["bf16"]
    assert (fp16["real_img_s"], fp16["synthetic_img_s"]) == (5492.58,
                                                             6808.09)
    assert fp16["real_img_s_from"] == fp16["synthetic_img_s_from"] == \
        "extractor"
    assert fp16["real_over_synthetic"] == pytest.approx(5492.58 / 6808.09)
    assert fp16["input_wait_fraction"] == 0.50
    assert fp16["decode_img_s_per_core"] == 325.0
    assert fp16["cores_x_per_core_over_synthetic"] == pytest.approx(
        15 * 325.0 / 6808.09)
    # 2,000 of 3,000 jiffies busy on 16 cores
    assert fp16["host_busy_cores_real"] == pytest.approx(16 * 2 / 3)
    # no extractor table for bf16: the runs' medians, said so
    assert (bf16["real_img_s"], bf16["synthetic_img_s"]) == (5902.0,
                                                             6402.0)
    assert bf16["real_img_s_from"] == "result.json"
    assert bf16["host_busy_cores_real"] is None
    table = (tmp_path / "records_summary.md").read_text()
    assert "| fp16 | - | 5,493 | 6,808 | 0.807 | 50.0% | 10.7 | cpu | " \
        "simplejpeg | 15 | 325 | 0.72 |" in table
    assert table in capsys.readouterr().out


def test_a_worker_sweep_is_a_row_per_case(tmp_path, summary, capsys):
    """gpu_records_check.sh's WORKERS="8 15" and MPS=1: logs_real_w8,
    logs_real_w15 and logs_real_w15_mps, each a row against the one
    synthetic case, by worker count and MPS after, with its own extractor
    table and CPU lines."""
    for name, workers, rate in (("real_w15_mps", 15, 5600.0),
                                ("real_w15", 15, 5155.0),
                                ("real_w8", 8, 4800.0)):
        _run(tmp_path, name, "fp16", 1, rate, 0.3, 400.0, workers)
    _run(tmp_path, "synthetic", "fp16", 1, 6800.0)
    _extracted(tmp_path, "real_w8", {"fp16": 4801.0})
    (tmp_path / "cpu_real_w15_mps_fp16").write_text(
        "cpu  100 0 100 800 0 0 0 0 0 0\ncpu  1100 0 1100 1800 0 0 0 0 0 0\n")
    (tmp_path / "cpu_real_w15_mps_fp16.cores").write_text("16\n")

    assert summary.main([str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "records_summary.json").read_text())
    assert [(r["case"], r["workers"], r["mps"], r["real_img_s"],
             r["real_img_s_from"]) for r in rows] == [
        ("w8", 8, False, 4801.0, "extractor"),
        ("w15", 15, False, 5155.0, "result.json"),
        ("w15 mps", 15, True, 5600.0, "result.json")]
    assert all(r["synthetic_img_s"] == 6800.0 for r in rows)
    assert [r["host_busy_cores_real"] for r in rows] == [
        None, None, pytest.approx(16 * 2 / 3)]
    table = (tmp_path / "records_summary.md").read_text()
    assert "| fp16 | w15 mps | 5,600 | 6,800 | 0.824 | 30.0% | 10.7 | " \
        "cpu | simplejpeg | 15 | 400 | 0.88 |" in table


def test_a_decode_sweep_names_each_cases_decode(tmp_path, summary):
    """gpu_records_check.sh's DECODES="gpu_trainer gpu": the decode in each
    case's name, its label and its column."""
    for name, decode in (("real_gpu_w15", "gpu"),
                         ("real_gpu_trainer_w15", "gpu_trainer"),
                         ("real_gpu_w15_mps", "gpu"),
                         ("real_cpu_window_w15", "cpu_window")):
        _run(tmp_path, name, "fp16", 1, 5000.0, decode=decode,
             decoder="nvimgcodec")
    _run(tmp_path, "synthetic", "fp16", 1, 6800.0)
    assert summary.main([str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "records_summary.json").read_text())
    assert [(r["case"], r["decode"], r["mps"]) for r in rows] == [
        ("cpu_window w15", "cpu_window", False),
        ("gpu_trainer w15", "gpu_trainer", False), ("gpu w15", "gpu", False),
        ("gpu w15 mps", "gpu", True)]
    table = (tmp_path / "records_summary.md").read_text()
    assert "| fp16 | gpu_trainer w15 | 5,000 | 6,800 | 0.735 | - | - | " \
        "gpu_trainer | nvimgcodec | 15 | - | - |" in table


def test_a_gpu_trainer_share_is_a_row_of_its_own(tmp_path, summary):
    """gpu_records_check.sh's DECODES="gpu_trainer gpu_trainer:0.5": the
    share in the case's label and beside its decode."""
    for name, share in (("real_gpu_trainer_w15", 0.0),
                        ("real_gpu_trainer_s50_w15", 0.5)):
        _run(tmp_path, name, "fp16", 1, 5000.0 + 1000 * share,
             decode="gpu_trainer", decoder="nvimgcodec", share=share)
    _run(tmp_path, "synthetic", "fp16", 1, 6800.0)
    assert summary.main([str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "records_summary.json").read_text())
    assert [(r["case"], r["decode"], r["worker_decode_share"],
             r["real_img_s"]) for r in rows] == [
        ("gpu_trainer s50 w15", "gpu_trainer", 0.5, 5500.0),
        ("gpu_trainer w15", "gpu_trainer", 0.0, 5000.0)]
    table = (tmp_path / "records_summary.md").read_text()
    assert "| fp16 | gpu_trainer s50 w15 | 5,500 | 6,800 | 0.809 | - | - " \
        "| gpu_trainer (workers 0.5) | nvimgcodec | 15 | - | - |" in table
    assert "| gpu_trainer | nvimgcodec |" in table


def test_usage_and_nothing_found(tmp_path, summary, capsys):
    assert summary.main([]) == 2
    assert "records_summary.py OUT_DIR" in capsys.readouterr().err
    assert summary.main([str(tmp_path)]) == 1
