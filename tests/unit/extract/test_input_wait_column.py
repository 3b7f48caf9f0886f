"""The extractor's input-wait column (issue 13 §3): the mean of the runs'
`input_wait.fraction` from their result JSONs, per case (no TensorFlow)."""

import csv
import io

import pytest

from official_bench.extract import extractor as extract, tables  # noqa: E402
from support import logkit as kit

SPEEDS = [90.0] + [100.0] * 6  # steps 0..700: warm-up, then 100 img/s


def _run(log_dir, case, index, fraction=None, raw=None):
    """A run's log and, with `fraction` or `raw`, its result JSON."""
    path = kit.write_run(log_dir, case, SPEEDS, index=index)
    data = kit.result_json([(k * 100, k * 100 + 100, s)
                            for k, s in enumerate(SPEEDS)], 128, 1)
    if raw is not None:
        data["input_wait"] = raw
    elif fraction is not None:
        data["input_wait"] = {"fraction": fraction, "mean_wait_ms": 1.0}
    kit.write_json(path[:-4] + ".json", data)


def test_input_wait_column_is_the_mean_fraction_per_case(tmp_path):
    log_dir = tmp_path / "bz128"
    _run(log_dir, "1n1g", 1, 0.02)
    _run(log_dir, "1n1g", 2, 0.30)
    _run(log_dir, "1n2g", 1)  # result JSON without input_wait (horovod)
    result = extract.extract(str(log_dir)).result["rn50"]
    assert result["1n1g"]["input_wait"] == pytest.approx(0.16)
    assert result["1n2g"]["input_wait"] is None
    column = tables.MARKDOWN_COLUMNS.index("input wait")
    assert [r[column] for r in tables.table_rows(result)] == ["16.00%", "n/a"]
    rows = list(csv.DictReader(io.StringIO(tables.csv_text(
        {"rn50": result}))))
    assert [r["input_wait"] for r in rows] == ["0.16", ""]


def test_a_malformed_input_wait_makes_the_json_unusable(tmp_path):
    """Like any schema error: the log is used instead, with a warning."""
    log_dir = tmp_path / "bz128"
    _run(log_dir, "1n1g", 1, raw={"fraction": "a lot"})
    out = extract.extract(str(log_dir))
    assert out.result["rn50"]["1n1g"]["input_wait"] is None
    assert any("input_wait.fraction" in w for w in out.warnings), out.warnings
