"""The doctor's report (doctor/report.py): table, JSON, exit status."""

import os

from official_bench.doctor import report
from support.doctor_facts import NO_GPU


def test_report_table_json_and_exit_status(tmp_path):
    rows = [report.CheckResult("tensorflow", "tensorflow", "none",
                               report.PASS, "TensorFlow 2.21.0"),
            report.CheckResult("1gpu-fp32-channels_last-xla_off", "single",
                               "gpu", report.SKIP, NO_GPU)]
    assert report.exit_status(rows) == 0
    text = report.table(rows, NO_GPU)
    lines = text.splitlines()
    assert lines[0].split() == ["check", "result", "detail"]
    assert lines[3].split()[:2] == ["1gpu-fp32-channels_last-xla_off",
                                    "SKIP"]
    assert "1 passed, 0 failed, 1 skipped" in text
    assert f"GPU checks skipped: {NO_GPU}" in text
    rows.append(report.CheckResult("cpu-x", "single", "cpu", report.FAIL,
                                   "loss not finite", fix="lower the LR"))
    assert report.exit_status(rows) == 1
    assert "fix cpu-x: lower the LR" in report.table(rows)
    path = tmp_path / "d" / "doctor.json"
    report.write(str(path), report.document(rows, {"a": 1}, "t0", "t1",
                                            NO_GPU))
    doc = report.load(str(path))
    assert doc["complete"] and doc["exit_status"] == 1
    assert doc["summary"] == {"PASS": 1, "FAIL": 1, "SKIP": 1}
    assert doc["checks"][2]["fix"] == "lower the LR"
    assert os.listdir(path.parent) == ["doctor.json"]  # no temp file left
    partial = report.document(rows, {}, "t0", None, None)
    assert partial["complete"] is False and partial["exit_status"] is None
