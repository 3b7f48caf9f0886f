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
    # The reason is said once, before the checks (skipped_line), not on
    # every skipped row; the JSON keeps it whole.
    assert NO_GPU not in text
    assert lines[3].endswith("SKIP    " + report.NO_GPU_SHORT)
    assert report.skipped_line(NO_GPU) == f"GPU checks skipped: {NO_GPU}"
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


def test_rows_fit_100_columns_and_wrap_under_their_column():
    detail = ("loss 2.369; 743.1 img/s; float32; replicas 2; devices "
              "CPU:0,CPU:1; 371.5 img/s per device = 57% of 1-device 647.6 "
              "(not judged: logical CPU devices share the cores)")
    rows = [report.CheckResult("cpu-mirrored-2dev", "mirrored", "cpu",
                               report.FAIL, detail, fix="x " * 80),
            report.CheckResult("1gpu-fp32-channels_last-xla_off", "single",
                               "gpu", report.SKIP, "bf16 needs compute 8.0")]
    lines = report.table(rows).splitlines()
    assert max(len(line) for line in lines) <= report.COLUMNS == 100
    column = lines[0].index("detail")
    first = lines.index(next(l for l in lines if l.startswith("cpu-mirr")))
    more = lines[first + 1]
    assert more[:column].strip() == "" and more[column] != " "
    shown = " ".join(l[column:].strip() for l in lines[first:first + 3]
                     if not l.startswith("1gpu"))
    assert detail in shown
    # Another reason to skip is shown as it is.
    assert any(l.endswith("SKIP    bf16 needs compute 8.0") for l in lines)
