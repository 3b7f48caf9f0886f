"""official-bench-compare on two sets of finished runs and with its A/B
runner (real trainer processes on a tiny CPU model), and the verdict rule
(judge/verdict.py) it shares with the run history."""

import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

from official_bench.contracts import exit_status
from official_bench.contracts.throughput import Interval
from official_bench.judge import compare, verdict
from support import logkit
from support.helpers import (
    REPO,
    TINY_OVERRIDE,
    cli_env,
    sigint_as_at_a_terminal,
)
from support.line_gaps import MAX_SILENCE, timed_lines


def _speeds(rng, mean, spread, n):
    """n interval rates around ``mean`` with a relative sd of ``spread``."""
    return [rng.gauss(mean, mean * spread) for _ in range(n)]


def _tree(root, mean, spread, seed, runs=5, case="1n1g"):
    """A log tree (run scripts' layout) of ``runs`` runs of 7 intervals:
    the first (warm-up, steps 0-100) slow, then steps 100-700."""
    rng = random.Random(seed)
    for index in range(1, runs + 1):
        run_mean = rng.gauss(mean, mean * spread)  # run-to-run spread too
        logkit.write_run(root, case, [mean / 3] + _speeds(
            rng, run_mean, spread, 6), index=index)
    return str(root)


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "official_bench.judge.compare", *args],
        cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=600)


def test_ten_percent_faster_with_one_percent_spread(tmp_path):
    a = _tree(tmp_path / "a", 1000.0, 0.01, seed=1)
    b = _tree(tmp_path / "b", 1100.0, 0.01, seed=2)
    out = _cli("--a", a, "--b", b, "--json")
    assert out.returncode == exit_status.OK, out.stderr
    (case,) = json.loads(out.stdout)["cases"]
    assert case["case"] == "1n1g b128 fp32"
    assert case["verdict"] == verdict.FASTER
    assert 1.0 < case["low"] < case["ratio"] < case["high"]
    assert case["ratio"] == pytest.approx(1.10, abs=0.02)
    assert case["runs_a"] == case["runs_b"] == 5
    # The warm-up interval (steps 0-100) is outside DLPerf's 100-600.
    assert case["intervals_a"] == 25
    assert case["images_per_second_over_window_a"] <= case["median_a"] * 1.001
    # Reversed, the same difference is "slower".
    out = _cli("--a", b, "--b", a)
    assert out.returncode == exit_status.OK, out.stderr
    assert verdict.SLOWER in out.stdout and "5/5" in out.stdout


def test_same_distribution_gives_no_difference(tmp_path):
    a = _tree(tmp_path / "a", 1000.0, 0.01, seed=3)
    b = _tree(tmp_path / "b", 1000.0, 0.01, seed=4)
    out = _cli("--a", a, "--b", b)
    assert out.returncode == exit_status.OK, out.stderr
    assert verdict.NO_DIFFERENCE in out.stdout, out.stdout


def test_no_difference_is_the_usual_answer_for_equal_sides():
    """Over many pairs of draws from one distribution the 95% interval
    holds 1.0 in most of them (an honest interval, not a lucky seed)."""
    rng = random.Random(7)
    hits = 0
    for _ in range(40):
        sides = [[_speeds(rng, rng.gauss(500, 5), 0.01, 5) for _ in range(5)]
                 for _ in range(2)]
        v = verdict.compare_runs(*sides, resamples=500)
        hits += v.verdict == verdict.NO_DIFFERENCE
    assert hits >= 32, hits


def test_verdict_is_deterministic_and_one_run_a_side_is_too_few():
    """One run against one run is too few to judge however many intervals
    each has (before, its intervals alone gave this pair 'slower'); one
    run against two or more borrows their spread and is judged."""
    a, b = [[100.0, 101.0, 99.0, 100.5]], [[90.0, 90.5, 89.5, 90.2]]
    first = verdict.compare_runs(a, b)
    assert first.as_dict() == verdict.compare_runs(a, b).as_dict()
    assert first.verdict == verdict.TOO_FEW
    assert first.describe().startswith("B/A 0.899, no interval: too few")
    two = verdict.compare_runs(a + [[100.2, 100.4, 99.8, 100.1]], b)
    assert two == verdict.compare_runs(a + [[100.2, 100.4, 99.8, 100.1]], b)
    assert two.verdict == verdict.SLOWER and two.high < 1.0
    assert two.describe().startswith("B/A 0.89") and "[" in two.describe()
    with pytest.raises(ValueError, match="side A has no run"):
        verdict.compare_runs([], b)


def test_one_run_a_side_is_too_few_to_judge():
    """1 run against 1 run (no run-to-run spread on either side): no
    interval, no faster/slower, the ratio kept; two runs on a side judge."""
    for a, b in (([[100.0]], [[59.0]]), ([[100.0]], [[59.0, 60.0]]),
                 ([[100.0, 99.0]], [[59.0, 60.0]])):
        v = verdict.compare_runs(a, b)
        assert v.verdict == verdict.TOO_FEW and v.ratio < 0.61
        assert v.as_dict()["low"] is None and v.as_dict()["high"] is None
        text = v.describe()
        assert text.startswith("B/A 0.59") and ", no interval: too few " \
            "to judge (1 vs 1 runs)" in text and "[" not in text
        assert text.endswith("compare two or more runs a side"), text
    assert verdict.compare_runs([[100.0], [101.0]], [[59.0], [60.0]]
                                ).verdict == verdict.SLOWER
    assert verdict.compare_runs([[100.0], [101.0]], [[59.0]]
                                ).verdict == verdict.SLOWER
    one = verdict.round_ratios([[100.0]], [[59.0]])
    assert one.describe() == ("B/A by round: 0.590; one round, no interval "
                              "(two or more rounds give one)")


# An A/A pair: the same setup (resnet_cifar20, 32x32, batch 64, 80 steps,
# TensorFlow) run twice on a shared 2-core machine, load 5.3-6.5; each
# run's 7 counted intervals (img/s, warm-up dropped) from its result.json.
# Their intervals alone gave 0.849 [0.727, 0.965], "slower" (0.848 from
# these rounded rates).
AA_TF_RUN1 = [294.0, 279.0, 302.0, 305.0, 318.0, 312.0, 305.0]
AA_TF_RUN2 = [294.0, 295.0, 211.0, 166.0, 241.0, 304.0, 283.0]


def test_an_aa_pair_of_one_run_a_side_is_too_few_not_slower():
    v = verdict.compare_runs([AA_TF_RUN1], [AA_TF_RUN2])
    assert v.verdict == verdict.TOO_FEW, v
    assert v.ratio == pytest.approx(0.848, abs=0.001)
    assert v.describe().startswith("B/A 0.848, no interval: too few")


def test_round_ratios_cancel_a_drift_both_sides_share():
    """Rounds whose machine speed drifts by 15% while B is 3% faster in
    each: the unpaired interval holds 1.0, the paired one excludes it."""
    rng = random.Random(11)
    a, b = [], []
    for k in range(6):
        machine = 100.0 * (1 + 0.15 * (k % 3) / 2)  # 100, 107.5, 115, ...
        a.append(_speeds(rng, machine, 0.003, 4))
        b.append(_speeds(rng, machine * 1.03, 0.003, 4))
    assert verdict.compare_runs(a, b).verdict == verdict.NO_DIFFERENCE
    paired = verdict.round_ratios(a, b)
    assert len(paired.ratios) == 6
    assert 1.0 < paired.low <= paired.median <= paired.high < 1.06
    assert min(paired.ratios) > 1.0
    line = paired.describe("MG", "ours")
    assert line.startswith("ours/MG by round: 1.0") and "(95%, paired)" in line
    with pytest.raises(ValueError, match="side A has 6 rounds, side B 5"):
        verdict.round_ratios(a, b[:5])


def test_result_json_folders(tmp_path):
    """Folders of the trainer's result.json files (any depth), each run's
    own warm-up left out, worker files ignored."""
    rng = random.Random(5)
    for side, mean in (("a", 200.0), ("b", 180.0)):
        for k in range(3):
            intervals = [(0, 10, 20.0)] + [
                (s, s + 10, rng.gauss(mean, 2.0)) for s in range(10, 60, 10)]
            data = logkit.result_json(intervals, 8, 1, logkit.environment(
                num_replicas=1, num_workers=1, dtype="fp32"))
            data["stats"]["warmup_steps"] = 10
            d = tmp_path / side / f"run{k}"
            d.mkdir(parents=True)
            logkit.write_json(str(d / "result.json"), data)
            logkit.write_json(str(d / "result_worker1.json"), "not json")
    rows, notes = compare.compare_sides(
        compare.read_side(str(tmp_path / "a")),
        compare.read_side(str(tmp_path / "b")))
    (row,) = rows
    assert row.case == compare.Case(1, 1, 8, "fp32") and not notes
    assert row.verdict.verdict == verdict.SLOWER
    assert row.verdict.intervals_a == 15


def test_one_run_a_side_and_a_run_that_counted_its_warm_up(tmp_path,
                                                             capsys):
    """result.json folders of one usable run each (the walk's notebook
    runs): the table says too few to judge, with no interval, exit 0; a
    run whose trainer counted its warm-up (stats.warmup_excluded false) is
    left out with a note naming it."""
    for side, runs in (("a", [[(0, 10, 20.0), (10, 20, 100.0)]]),
                       ("b", [[(0, 10, 20.0), (10, 20, 59.0)],
                              [(0, 10, 5.0)]])):
        for k, intervals in enumerate(runs):
            data = logkit.result_json(intervals, 8, 1, logkit.environment(
                num_replicas=1, num_workers=1, dtype="fp32"))
            data["stats"]["warmup_steps"] = 10
            data["stats"]["warmup_excluded"] = len(intervals) > 1
            # the trainer's mean: its one counted interval, the last
            data["stats"]["average_examples_per_second"] = intervals[-1][2]
            d = tmp_path / side / f"run{k}"
            d.mkdir(parents=True)
            logkit.write_json(str(d / "result.json"), data)
    code = compare.main(["--a", str(tmp_path / "a"),
                         "--b", str(tmp_path / "b")])
    out, err = capsys.readouterr()
    assert code == exit_status.OK, err
    row, reason = out.splitlines()[2:4]
    assert row.split() == ["1n1g", "b8", "fp32", "100.00", "59.00", "0.590",
                           "none", "1/1", "too", "few", "to", "judge"]
    assert reason.startswith("1n1g b8 fp32: too few to judge: A and B are "
                             "one run each")
    assert reason.endswith("compare two or more runs a side")
    assert err == (f"note: {tmp_path / 'b' / 'run1' / 'result.json'}: "
                   "excluded: its counted intervals include the warm-up "
                   "(stats.warmup_excluded false: no interval after its "
                   "warmup_steps 10); run more steps\n")
    note = compare.warmup_counted_note(
        "r.json", {"warmup_steps": 50},
        [Interval(0, 10, 1.0, 5.0), Interval(10, 20, 1.0, 9.0)])
    assert note.endswith("run more steps, or count it after its first "
                         "interval: --warmup_batches 10")


def test_errors_name_the_directory(tmp_path):
    out = _cli("--a", str(tmp_path / "missing"), "--b", str(tmp_path))
    assert out.returncode == exit_status.FAILED
    assert out.stderr.strip() == (f"error: {tmp_path / 'missing'} does not "
                                  "exist or is not a directory")
    empty = tmp_path / "empty"
    empty.mkdir()
    out = _cli("--a", str(empty), "--b", str(empty))
    assert out.returncode == exit_status.FAILED
    assert str(empty) in out.stderr and "result.json" in out.stderr
    a = _tree(tmp_path / "a", 100.0, 0.01, seed=1, runs=2, case="1n1g")
    b = _tree(tmp_path / "b", 100.0, 0.01, seed=1, runs=2, case="1n2g")
    out = _cli("--a", a, "--b", b)
    assert out.returncode == exit_status.FAILED
    assert "no case in both" in out.stderr and "1n2g b128 fp32" in out.stderr
    # ... and points to the runner, with the overrides that differ.
    assert ("run both with the A/B runner: official-bench-compare --config "
            "FILE --a-override runtime.num_gpus=1 --b-override "
            "runtime.num_gpus=2 --pairs 3") in out.stderr


def _short_tree(root, mean, seed, batch=128):
    """3 runs of 4 intervals of 10 steps: shorter than DLPerf's window."""
    rng = random.Random(seed)
    for index in range(1, 4):
        logkit.write_run(root, "1n1g",
                         [mean / 3] + _speeds(rng, mean, 0.01, 3),
                         batch=batch, index=index, log_steps=10)
    return str(root)


def test_short_trees_window_auto_and_sides_named_by_what_differs(tmp_path):
    a = _short_tree(tmp_path / "before" / "t" / "bz16", 100.0, 1)
    b = _short_tree(tmp_path / "after" / "t" / "bz16", 110.0, 2)
    out = _cli("--a", a, "--b", b)
    assert out.returncode == exit_status.FAILED
    assert f"no usable run in {a}" in out.stderr
    assert ("count them with --warmup_batches 10 --train_batches 40 (or "
            "--window auto)") in out.stderr
    out = _cli("--a", a, "--b", b, "--window", "auto")
    assert out.returncode == exit_status.OK, out.stderr
    assert "--window auto: counting steps 10-40" in out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "A: before, B: after"
    assert lines[2].startswith("1n1g b128 fp32") and "faster" in lines[2]
    out = _cli("--a", a, "--b", b, "--window", "auto", "--train_batches", "9")
    assert out.returncode == exit_status.CONFIG
    assert (out.stderr.count("\n") == 1
            and "--window auto chooses" in out.stderr)


def test_side_labels_name_what_differs():
    assert compare.differing_parts("x/before/t/bz128", "x/after/t/bz128") == (
        "before", "after")
    assert compare.differing_parts("logs/bz16", "logs/bz32") == (
        "bz16", "bz32")
    args = compare.build_parser().parse_args([
        "--config", "c.yaml", "--a-override", "train.steps=9,runtime.x=1",
        "--b-override", "train.steps=9,runtime.x=2"])
    assert compare.side_labels(args) == ("runtime.x=1", "runtime.x=2")
    args = compare.build_parser().parse_args([
        "--config", "c.yaml", "--b-override", "runtime.enable_xla=true"])
    assert compare.side_labels(args) == ("as configured",
                                         "runtime.enable_xla=true")
    args = compare.build_parser().parse_args([
        "--a-config", "d/before.yaml", "--b-config", "d/after.yaml"])
    assert compare.side_labels(args) == ("before.yaml", "after.yaml")
    # The runner's one row is named by both sides.
    runs = {compare.RUNNER_CASE: [[compare.ReadInterval(0, 10, 1.0, 100.0),
                                   compare.ReadInterval(10, 20, 1.0, 99.0)]]}
    rows, _ = compare.compare_sides(
        compare.SideRuns("A", "runner", runs, label="bz16"),
        compare.SideRuns("B", "runner", runs, label="bz32"))
    assert rows[0].label == "bz16 vs bz32"
    assert compare.table(rows, "bz16", "bz32").splitlines()[2].startswith(
        "bz16 vs bz32 ")


def test_usage_errors_and_help_width():
    out = _cli("--a", "x")
    assert out.returncode == exit_status.CONFIG
    assert "give both --a DIR and --b DIR" in out.stderr
    out = _cli("--a", "x", "--b", "y", "--b-override", "train.steps=4")
    assert out.returncode == exit_status.CONFIG
    for extra, flags in ((["--logs", "kept"], "--logs goes"),
                         (["--pairs", "5", "--python", "py"],
                          "--pairs, --python go")):
        out = _cli("--a", "x", "--b", "y", *extra)
        assert out.returncode == exit_status.CONFIG
        assert out.stderr.endswith(
            f"{flags} with the A/B runner; --a/--b read finished runs where "
            "they are; see --help\n"), out.stderr
    out = _cli("--a-config", "nope_a.yaml", "--b-config", "nope_b.yaml")
    assert out.returncode == exit_status.FAILED
    assert out.stderr == "error: --a-config nope_a.yaml: no such file\n"
    out = _cli("--help")
    assert out.returncode == exit_status.OK
    assert max(len(line) for line in out.stdout.splitlines()) <= 80


def _stand_in(tmp_path, started):
    """A 'python' for the runner's trainer that writes its pid to
    ``started``, then sleeps (a run that trains for a long time)."""
    path = tmp_path / "python.sh"
    path.write_text(f"#!/bin/bash\necho $$ > {started}\nexec sleep 60\n")
    path.chmod(0o755)
    return str(path)


def _runner_args(tmp_path, started, *more):
    config = tmp_path / "c.yaml"
    config.write_text("{}\n")
    return ["--config", str(config), "--b-override", "train.steps=4",
            "--python", _stand_in(tmp_path, started), *more]


def test_logs_that_cannot_be_a_folder_are_refused_before_any_run(
        tmp_path, capsys):
    """--logs a file (or under one): one line naming it, before side A's
    first run (it trained, then failed with FileExistsError)."""
    started = tmp_path / "started"
    afile = tmp_path / "afile"
    afile.write_text("keep")
    under = afile / "x"
    for logs, status, line in (
            (afile, exit_status.FAILED,
             f"logs folder {afile} is a file, not a folder"),
            (under, exit_status.NOT_WRITABLE,
             f"cannot write the A/B runs' logs to {under}: a part of the "
             "path is a file, not a folder")):
        assert compare.main(_runner_args(tmp_path, started, "--logs",
                                         str(logs))) == status
        assert capsys.readouterr().err == f"error: {line}\n"
    assert not started.exists()
    assert afile.read_text() == "keep"


def test_ctrl_c_during_a_run_is_one_line_and_interrupted(tmp_path):
    """SIGINT to the process group while a run trains: the trainer and the
    runner's work folder are gone, one error line, exit INTERRUPTED (a
    KeyboardInterrupt traceback before)."""
    started, tmp = tmp_path / "started", tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "official_bench.judge.compare",
         *_runner_args(tmp_path, started, "--logs", str(tmp_path / "logs"))],
        cwd=REPO, env=cli_env({"TMPDIR": str(tmp)}), start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=sigint_as_at_a_terminal)
    deadline = time.monotonic() + 120
    while not started.exists() or not started.read_text().strip():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == exit_status.INTERRUPTED, err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        "error: interrupted (SIGINT); nothing compared; the runs' logs so "
        f"far are in {tmp_path / 'logs'}")
    assert out == ""
    assert os.listdir(tmp) == []  # the runner's temporary folder
    with pytest.raises(ProcessLookupError):
        os.kill(int(started.read_text()), 0)


@pytest.mark.slow
def test_runner_says_slower_when_b_trains_larger_images(tmp_path):
    """Real trainer processes, alternated: B's 128x128 images have 64x
    the pixels of A's 16x16 ones (B at 0.11-0.17 of A's rate under a load
    of 3 busy loops; with 64x64, 0.45, and in two full suites A's spread
    hid it: 'no difference measurable')."""
    steps = "train.steps=12,train.time_history.log_steps=2"
    base = TINY_OVERRIDE.replace("train.steps=6,", "").replace(
        "train.time_history.log_steps=2,", "") + "," + steps
    slow = base.replace("train_dataset.image_size=16",
                        "train_dataset.image_size=128")
    out = timed_lines(
        [sys.executable, "-m", "official_bench.judge.compare",
         "--a-override", base, "--b-override", slow, "--pairs", "2",
         "--logs", str(tmp_path / "logs"), "--json"],
        cwd=REPO, env=cli_env(), separate=True, timeout=600)
    assert out.returncode == exit_status.OK, out.stderr[-3000:]
    # Each run's progress as it trains (issue 40): stage lines, then
    # intervals with the length the training stage gave; no long silence.
    assert out.longest_gap() <= MAX_SILENCE, out.describe_gap()
    for label in ("A round 1/2", "B round 1/2", "B round 2/2", "A round 2/2"):
        assert f"[{label}] tracing and compiling the first step ..." in \
            out.stderr.splitlines(), out.stderr
        assert re.search(rf"^\[{label}\] step 12/12, \d+\.\d img/s$",
                         out.stderr, re.M), out.stderr
    (case,) = json.loads(out.stdout)["cases"]
    assert case["case"] == ("train_dataset.image_size=16 vs "
                            "train_dataset.image_size=128")
    assert case["verdict"] == verdict.SLOWER, case
    assert case["runs_a"] == case["runs_b"] == 2
    assert case["high"] < 1.0
    # B/A round by round: each round's two runs, close in time
    paired = case["paired"]
    assert len(paired["ratios"]) == 2 and max(paired["ratios"]) < 1.0
    assert paired["low"] <= paired["median"] <= paired["high"] < 1.0
    assert 0 < case["images_per_second_over_window_b"] < \
        case["images_per_second_over_window_a"]
    # Rounds alternate: A B, then B A.
    order = [line.split()[2] for line in out.stderr.splitlines()
             if line.startswith("round ")]
    assert order == ["A", "B", "B", "A"], out.stderr
    assert sorted(os.listdir(tmp_path / "logs")) == [
        "A_1.log", "A_2.log", "B_1.log", "B_2.log"]


def _backend_results(root, backend, mean, seed, runs=3):
    """result.json files as a sweep of ``backend`` leaves them under
    MODEL_DIR ``root`` (model_dir tree, config.runtime.backend)."""
    from official_bench.contracts import log_tree
    rng = random.Random(seed)
    for index in range(1, runs + 1):
        data = logkit.result_json(
            [(0, 10, mean / 3)] + [(s, s + 10, rng.gauss(mean, 1.0))
                                   for s in range(10, 60, 10)], 8, 1,
            logkit.environment(num_replicas=1, num_workers=1, dtype="fp32"))
        data["stats"]["warmup_steps"] = 10
        data["config"]["runtime"] = {"backend": backend}
        md = log_tree.ModelDir(str(root), 8, "1n1g",
                               log_tree.run_stem(8, "fp32", index),
                               "20261126-120000", backend=backend)
        os.makedirs(md.path)
        logkit.write_json(os.path.join(md.path, "result.json"), data)


def test_two_backends_are_named_as_what_differs(tmp_path):
    """A TensorFlow tree against a JAX one: compared case by case, the
    first line naming each side's backend; a side holding both backends
    keeps them apart (a case each), so their runs are never mixed."""
    a = _tree(tmp_path / "before", 1000.0, 0.01, seed=1)
    b = _tree(tmp_path / "after" / "jax" / "resnet50" / "bz128", 1100.0,
              0.01, seed=2)
    out = _cli("--a", a, "--b", b)
    assert out.returncode == exit_status.OK, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == ("A: before (tensorflow), B: after/jax/resnet50/bz128"
                        ), lines[0]
    assert lines[2].startswith("1n1g b128 fp32 ") and "faster" in lines[2]
    # One MODEL_DIR holding both backends' runs against a TensorFlow one.
    both = tmp_path / "both"
    _backend_results(both, "tensorflow", 200.0, 3)
    _backend_results(both, "jax", 150.0, 4)
    tf_only = tmp_path / "tf_only"
    _backend_results(tf_only, "tensorflow", 200.0, 5)
    out = _cli("--a", str(tf_only), "--b", str(both), "--json")
    assert out.returncode == exit_status.OK, out.stderr
    doc = json.loads(out.stdout)
    assert [c["case"] for c in doc["cases"]] == ["1n1g b8 fp32 tensorflow"]
    assert doc["cases"][0]["runs_b"] == 3  # the JAX runs are not among them
    assert "1n1g b8 fp32 jax: only in B" in out.stderr
    assert (doc["a_backend"], doc["b_backend"]) == ("tensorflow", "mixed")
    assert (doc["cases"][0]["a_backend"], doc["cases"][0]["b_backend"]) \
        == ("tensorflow", "tensorflow")
    # Sides of one backend each: the cases pair by setup, the labels say
    # which backend each side ran.
    jax_only = tmp_path / "jax_only"
    _backend_results(jax_only, "jax", 150.0, 6)
    out = _cli("--a", str(tf_only), "--b", str(jax_only))
    assert out.returncode == exit_status.OK, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "A: tf_only (tensorflow), B: jax_only (jax)"
    assert lines[2].startswith("1n1g b8 fp32 ") and "slower" in lines[2]
    doc = json.loads(_cli("--a", str(tf_only), "--b", str(jax_only),
                          "--json").stdout)
    assert (doc["a_backend"], doc["b_backend"]) == ("tensorflow", "jax")
    assert [(c["case"], c["a_backend"], c["b_backend"])
            for c in doc["cases"]] == [("1n1g b8 fp32", "tensorflow", "jax")]


def _resumed_result(folder, average):
    """A resumed run's result.json (intervals from its checkpoint's step
    20, the first holding the tracing) whose stats average over
    ``average``'s window: "all" as the trainer before the warm-up rule
    counted from the run's first step wrote it, "last" as this one does."""
    intervals = [(20, 30, 9.0), (30, 40, 23.5)]
    data = logkit.result_json(intervals, 16, 1, logkit.environment(
        num_replicas=1, num_workers=1, dtype="fp32"))
    stats = data["stats"]
    stats.update(warmup_steps=10, warmup_excluded=True, log_steps=10)
    counted = [Interval(a, b, 16 * (b - a) / r, r)
               for a, b, r in intervals[-1 if average == "last" else 0:]]
    stats["average_examples_per_second"] = sum(
        i.examples_per_second for i in counted) / len(counted)
    stats["images_per_second_over_window"] = \
        compare.images_per_second_over_window(counted)
    folder.mkdir(parents=True)
    logkit.write_json(str(folder / "result.json"), data)
    return str(folder / "result.json")


def test_an_older_trainers_window_is_named_beside_the_recount(tmp_path,
                                                              capsys):
    """A resumed run's result.json from a trainer that counted the warm-up
    from step 0 (its stats say 16.25 over steps 20-40): compare counts it
    by this version's rule (steps 30-40, 23.50) and says so, naming the
    file's own window, on stderr and in --json's notes; a file of this
    version's trainer gets no note; a window given by the flags none."""
    _resumed_result(tmp_path / "a" / "run1", "last")
    old = _resumed_result(tmp_path / "b" / "run1", "all")
    args = ["--a", str(tmp_path / "a"), "--b", str(tmp_path / "b")]
    assert compare.main(args + ["--json"]) == exit_status.OK
    out, err = capsys.readouterr()
    note = (f"{old}: counted steps 30-40 (23.50 img/s) by this "
            "official_bench's warm-up rule (stats.warmup_steps 10 after the "
            "run's first step, 20); the file's own window, steps 20-40, says "
            "16.25 (stats.average_examples_per_second; --warmup_batches 20 "
            "--train_batches 40 counts it)")
    assert err == f"note: {note}\n"
    doc = json.loads(out)
    assert doc["notes"] == [note]
    assert doc["cases"][0]["median_b"] == 23.5  # what is counted: unchanged
    assert compare.main(args) == exit_status.OK
    assert capsys.readouterr().err == f"note: {note}\n"
    # The flags the note names count the file's own window, with no note.
    assert compare.main(args + ["--warmup_batches", "20", "--train_batches",
                                "40", "--json"]) == exit_status.OK
    out, err = capsys.readouterr()
    assert json.loads(out)["cases"][0]["median_b"] == pytest.approx(16.25)
    assert json.loads(out)["notes"] == [] and err == ""
    # A mean no run of consecutive intervals gives: named without steps.
    ivs = [Interval(20, 30, 10.0, 16.0), Interval(30, 40, 10.0, 23.5)]
    assert compare.recount_note(
        "r.json", {"warmup_steps": 10, "average_examples_per_second": 99.0},
        ivs, ivs[1:]).endswith(
            "; the file's own stats.average_examples_per_second says 99.00")
    assert compare.recount_note(
        "r.json", {"warmup_steps": 10, "average_examples_per_second": 23.5},
        ivs, ivs[1:]) is None
