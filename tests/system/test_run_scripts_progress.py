"""run_single_node.sh shows the run (issue 28 §2): progress lines while it
trains, the trainer's stage lines before its first step, each run's img/s
when it ends, and a summary that ends with the extractor command, which,
run as printed, counts every run; never silent for more than 10 s
(issue 40)."""

import json
import re
import shlex
import subprocess

import pytest

from support.helpers import REPO
from support.line_gaps import MAX_SILENCE, timed_lines
from support.run_scripts import clean_env, failures

PROGRESS = re.compile(r"^\[1n1g run (\d)/2\] step (\d+)/6, \d+\.\d img/s"
                      r"(, ETA \d+s)?$", re.M)
RESULT = re.compile(r"^\[launch\] 1n1g run (\d): ok, (\d+\.\d) img/s \(median "
                    r"of 2 intervals after the first, steps 2-6\)$", re.M)


STAGES = ("loading TensorFlow ...", "building the model ...",
          "tracing and compiling the first step ...")


@pytest.mark.slow
def test_progress_result_lines_and_the_extractor_command(tmp_path):
    out = timed_lines(
        ["bash", f"{REPO}/run_single_node.sh", "4", "fp32", "2"],
        cwd=tmp_path, env=clean_env(tmp_path), separate=True, timeout=600)
    assert out.returncode == 0, failures(tmp_path, out.stdout + out.stderr)
    assert out.longest_gap() <= MAX_SILENCE, out.describe_gap()
    text = out.stdout
    for run in ("1", "2"):
        for stage in STAGES:  # said before the first step, in order
            assert f"[1n1g run {run}/2] {stage}\n" in text, text
        starts = [text.index(f"[1n1g run {run}/2] {s}\n") for s in STAGES]
        assert starts == sorted(starts), text
    shown = PROGRESS.findall(text)
    # rate-limited, but the last interval (step 6) of each run is shown
    assert [run for run, step, _ in shown if step == "6"] == ["1", "2"], text
    results = RESULT.findall(text)
    assert [run for run, _ in results] == ["1", "2"], text
    summary = text.split("[launch] done: 2 of 2 run(s) ok", 1)[1]
    for run, rate in results:
        assert f"1n1g run {run}: ok, {rate} img/s" in summary
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("[launch] extract: "), last
    argv = shlex.split(last.split("extract: ", 1)[1])
    assert argv[-4:] == ["--warmup_batches", "2", "--train_batches", "6"]
    assert argv[1].endswith("extract_tensorflow_logs.py")
    extracted = subprocess.run(
        argv + ["--output_dir", str(tmp_path / "result"), "--no_plot"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert extracted.returncode == 0, extracted.stderr
    table = json.loads((tmp_path / "result" / "bz4_result.json")
                       .read_text())["rn50"]
    assert table["1n1g"]["num_runs"] == 2
    assert table["1n1g"]["excluded"] == []


@pytest.mark.slow
def test_quiet_drops_progress_lines_only(tmp_path):
    out = subprocess.run(
        ["bash", f"{REPO}/run_single_node.sh", "4", "fp32", "1"],
        cwd=tmp_path, env=clean_env(tmp_path, QUIET="1"),
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, failures(tmp_path, out.stdout + out.stderr)
    assert "[1n1g run 1/1]" not in out.stdout  # no stage lines either
    assert re.search(r"1n1g run 1: ok, \d+\.\d img/s", out.stdout)
    assert "[launch] extract: " in out.stdout
