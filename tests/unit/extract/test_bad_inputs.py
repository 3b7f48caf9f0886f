"""The extractor on inputs a user meets by mistake: flags its mode would
ignore, a result JSON with fields of the wrong type, a report that cannot
be made after others were; each is one line or a warning, never a
traceback, and a failed set of outputs leaves the previous set whole."""

import json
import os

import pytest

from official_bench.contracts import exit_status, result_json
from official_bench.extract import extractor as extract, html_report
from support import logkit


def _cli(capsys, *argv):
    status = extract.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def _tree(root, env=None):
    """One 1n1g run of 7 intervals with its result JSON beside the log."""
    log = logkit.write_run(root, "1n1g", [300.0] + [1000.0] * 6)
    data = logkit.result_json([(k * 100, k * 100 + 100, 1000.0)
                               for k in range(7)], 128, 1,
                              logkit.environment(num_replicas=1, **env or {}))
    logkit.write_json(log[:-len(".log")] + ".json", data)
    return str(root)


@pytest.mark.parametrize("argv, named", [
    (["--log_dir", "L", "--history", "h.sqlite", "--no_html"], "--history"),
    (["--log_dir", "L", "--history", "h.sqlite", "--no_markdown"],
     "--history"),
    (["--compare", "a.json", "b.json", "--window", "auto"], "--window"),
    (["--compare", "a.json", "b.json", "--log_dir", "L"], "--log_dir"),
    (["--log_dir", "L", "--spread_warn", "nan"], "spread_warn is nan"),
])
def test_flags_the_mode_would_ignore_are_bad_usage(tmp_path, capsys, argv,
                                                    named, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, out, err = _cli(capsys, *argv)
    assert status == exit_status.CONFIG and out == ""
    (line,) = err.splitlines()
    assert named in line and line.endswith("; see --help")
    assert os.listdir(tmp_path) == []  # nothing read, nothing written


def test_environment_fields_of_another_type(tmp_path, capsys):
    """A hostname that is a number is shown as text; a device list that is
    not a list makes the JSON unusable, by name, and the log lines count."""
    log_dir = _tree(tmp_path / "a", {"hostname": 3})
    status, _, err = _cli(capsys, "--log_dir", log_dir, "--output_dir",
                          tmp_path / "out", "--no_plot")
    assert status == exit_status.OK, err
    with open(tmp_path / "out" / "a_result.html", encoding="utf-8") as f:
        assert "<td>3</td>" in f.read()
    log_dir = _tree(tmp_path / "b", {"gpu_names": 2})
    status, _, err = _cli(capsys, "--log_dir", log_dir, "--output_dir",
                          tmp_path / "out", "--no_plot")
    assert status == exit_status.OK, err
    assert "unusable result JSON (environment.gpu_names is 2, expected a " \
           "list of strings); using the log lines" in err
    found, problem = result_json.read_run_json(os.path.join(
        log_dir, "1n1g", "rn50_b128_fp32_1.json"))
    assert found is None and not problem.endswith("using the log lines")


def test_a_report_that_fails_leaves_the_previous_set(tmp_path, capsys,
                                                     monkeypatch):
    log_dir = _tree(tmp_path / "bz128")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    old = {name: f"old {name}" for name in (
        "bz128_result.json", "bz128_result.md", "bz128_result.csv")}
    for name, text in old.items():
        (out_dir / name).write_text(text)

    def broken(*args, **kwargs):
        raise RuntimeError("renderer died")

    monkeypatch.setattr(html_report, "html_report", broken)
    with pytest.raises(RuntimeError):
        extract.main(["--log_dir", log_dir, "--output_dir", str(out_dir),
                      "--no_plot"])
    assert {p: (out_dir / p).read_text() for p in os.listdir(out_dir)} == old
    monkeypatch.undo()
    status, _, err = _cli(capsys, "--log_dir", log_dir, "--output_dir",
                          out_dir, "--no_plot")
    assert status == exit_status.OK, err
    assert "1n1g" in json.loads((out_dir / "bz128_result.json").read_text(
    ))["rn50"]


def test_compare_shows_a_dtype_of_another_type(tmp_path, capsys):
    entry = {"median_speed": 100.0, "average_speed": 100.0, "speedup": 1.0,
             "batch_size_per_device": 128}
    a = logkit.write_json(str(tmp_path / "a_result.json"),
                          {"rn50": {"1n1g": dict(entry, dtype="fp32")}})
    b = logkit.write_json(str(tmp_path / "b_result.json"),
                          {"rn50": {"1n1g": dict(entry, dtype=16)}})
    status, out, err = _cli(capsys, "--compare", a, b, "--output_dir",
                            tmp_path / "c")
    assert status == exit_status.OK, err
    assert "rn50 (16, batch 128 per device)" in out


def test_a_run_cut_in_a_line_does_not_shorten_window_auto(tmp_path, capsys):
    """A run killed while writing a TimeHistory line (no finish line, no
    status record, as in a DLPerf tree) is excluded whatever the window;
    --window auto counted only the steps it reached in every other run."""
    log_dir = tmp_path / "bz128"
    logkit.write_run(log_dir, "1n1g", [300.0] + [1000.0] * 6, index=1)
    lines = logkit.run_lines([300.0] + [1000.0] * 6, finished=False)
    cut = next(k for k, line in enumerate(lines) if "steps 400 and" in line)
    logkit.write_lines(logkit.log_path(log_dir, "1n1g", index=2),
                       lines[:cut] + [lines[cut][:90]])
    status, out, err = _cli(capsys, "--log_dir", log_dir, "--window", "auto",
                            "--output_dir", tmp_path / "out", "--no_plot")
    assert status == exit_status.OK, err
    assert "counting steps 100-700" in err
    assert "rn50_b128_fp32_2.log: excluded: truncated" in err
    entry = json.loads((tmp_path / "out" / "bz128_result.json").read_text(
    ))["rn50"]["1n1g"]
    assert entry["num_runs"] == 1 and entry["train_batches"] == 700


def test_runs_of_two_backends_in_one_log_dir_are_refused(tmp_path, capsys):
    """A JAX run copied into a TensorFlow tree was averaged with it, with a
    warning only: one line naming which runs are which, exit 2, nothing
    written."""
    log_dir = _tree(tmp_path / "bz128")
    jax = logkit.write_run(log_dir, "1n1g", [300.0] + [900.0] * 6, index=2)
    data = logkit.result_json([(k * 100, k * 100 + 100, 900.0)
                               for k in range(7)], 128, 1,
                              logkit.environment(num_replicas=1,
                                                 backend="jax"))
    logkit.write_json(jax[:-len(".log")] + ".json", data)
    status, out, err = _cli(capsys, "--log_dir", log_dir, "--output_dir",
                            tmp_path / "out", "--no_plot")
    assert status == exit_status.CONFIG and out == ""
    line = err.splitlines()[-1]
    assert line == (
        f"error: {log_dir} holds runs of 2 backends, which one result would "
        "average: tensorflow: 1n1g/rn50_b128_fp32_1.log; jax: "
        "1n1g/rn50_b128_fp32_2.log; give each backend's runs their own "
        "folder, and extract each with its own --log_dir and --output_dir")
    assert not (tmp_path / "out").exists()
