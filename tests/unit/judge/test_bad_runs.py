"""official-bench-compare and official-bench-history on runs that cannot
be compared as they are: a result.json whose window or case keys have the
wrong type, a run with a 0 examples/second interval in its window. Each is
left out with a note naming its file (or history row) and why; the other
runs are still compared, and nothing ends in a traceback."""

import os

import pytest

from official_bench.contracts import exit_status
from official_bench.judge import compare, history, verdict
from support import logkit


def _result_folder(root, runs, edit=None):
    """``runs`` result.json files under ``root`` (a MODEL_DIR-like tree),
    ``edit(k, data)`` applied to each before it is written."""
    for k in range(runs):
        data = logkit.result_json(
            [(0, 10, 30.0)] + [(s, s + 10, 100.0 + k + s / 100)
                               for s in range(10, 50, 10)], 8, 1,
            logkit.environment(num_replicas=1, num_workers=1, dtype="fp32"))
        data["stats"]["warmup_steps"] = 10
        if edit:
            edit(k, data)
        folder = os.path.join(str(root), f"run{k}")
        os.makedirs(folder)
        logkit.write_json(os.path.join(folder, "result.json"), data)
    return str(root)


def test_result_json_keys_of_the_wrong_type_skip_that_run_by_name(
        tmp_path, capsys):
    def spoil(k, data):
        if k == 1:
            data["stats"]["warmup_steps"] = "ten"
        if k == 2:
            data["environment"]["num_workers"] = "1"
        if k == 3:
            data["stats"]["excluded_steps"] = [1, 2, 3]

    a = _result_folder(tmp_path / "a", 3)
    b = _result_folder(tmp_path / "b", 4, spoil)
    assert compare.main(["--a", a, "--b", b]) == exit_status.OK
    out, err = capsys.readouterr()
    assert "3/1" in out  # B's one sound run is compared
    for k, key in ((1, "stats.warmup_steps is 'ten'"),
                   (2, "environment.num_workers is '1'"),
                   (3, "stats.excluded_steps is [1, 2, 3]")):
        path = os.path.join(b, f"run{k}", "result.json")
        assert f"note: {path}: unusable result JSON ({key}, expected" in err
    assert "using the log lines" not in err  # there are none to use
    assert err.count("; skipped") == 3


def test_worker_and_replica_counts_that_contradict_skip_that_run(
        tmp_path, capsys):
    """num_workers 4 with num_replicas 1 made a '4n1g' case of one
    device."""
    def spoil(k, data):
        if k == 1:
            data["environment"]["num_workers"] = 4
        if k == 2:
            data["environment"]["num_workers"] = 2
            data["stats"]["num_replicas"] = 3

    a = _result_folder(tmp_path / "a", 3)
    b = _result_folder(tmp_path / "b", 3, spoil)
    assert compare.main(["--a", a, "--b", b]) == exit_status.OK
    out, err = capsys.readouterr()
    assert "3/1" in out and "4n1g" not in out + err
    path = os.path.join(b, "run1", "result.json")
    assert (f"note: {path}: environment.num_workers is 4 but "
            "stats.num_replicas is 1, not a multiple of it") in err
    path = os.path.join(b, "run2", "result.json")
    assert (f"note: {path}: environment.num_workers is 2 but "
            "stats.num_replicas is 3, not a multiple of it") in err


def test_a_zero_rate_run_is_left_out_with_its_log_named(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    for index in (1, 2):
        logkit.write_run(a, "1n1g", [300.0] + [1000.0 + index] * 6,
                         index=index)
        logkit.write_run(b, "1n1g", [300.0] + [1010.0 + index] * 6,
                         index=index)
    zero = logkit.write_run(b, "1n1g", [300.0, 1000.0, 0.01, 1000.0, 1000.0,
                                        1000.0, 1000.0], index=3)
    with open(zero, encoding="utf-8") as f:  # "0.01" printed as "0.00"
        text = f.read().replace("0.01 examples/second", "0.00 "
                                "examples/second")
    with open(zero, "w", encoding="utf-8") as f:
        f.write(text)
    assert compare.main(["--a", str(a), "--b", str(b)]) == exit_status.OK
    out, err = capsys.readouterr()
    assert "2/2" in out
    assert (f"note: {zero}: excluded: counted interval 2 of 5 (steps "
            "200-300) has a rate of 0 examples/second (a ratio needs rates "
            "> 0)") in err


def test_history_leaves_a_zero_rate_run_out_by_its_id(tmp_path, capsys):
    tree = tmp_path / "logs"
    for index in (1, 2, 3):
        logkit.write_run(tree, "1n1g", [300.0] + [1000.0 + index] * 6,
                         index=index)  # different runs: stored once each
    zero = logkit.log_path(tree, "1n1g", index=2)
    with open(zero, encoding="utf-8") as f:
        text = f.read().replace("1002.00 examples/second between steps "
                                "300", "0.00 examples/second between "
                                "steps 300")
    with open(zero, "w", encoding="utf-8") as f:
        f.write(text)
    db = str(tmp_path / "h.sqlite")
    assert history.main(["--db", db, "--import", str(tree)]) == \
        exit_status.OK
    capsys.readouterr()
    assert history.main(["--db", db]) == exit_status.OK
    out, err = capsys.readouterr()
    assert "latest/earlier 1.002" in out and "(1 vs 1 runs)" in out
    assert f"run 2 ({zero}) left out of the comparison: counted interval " \
           "3 of 5 has a rate of 0 examples/second" in err
    assert history.main(["--db", db, "--json"]) == exit_status.OK
    assert "left out of the comparison" in capsys.readouterr().out


def test_run_problem_names_the_interval():
    assert verdict.run_problem([1.0, 2.0]) is None
    assert verdict.run_problem([]) == "no counted interval"
    assert verdict.run_problem([1.0, float("nan")]).startswith(
        "counted interval 2 of 2 has a rate of nan")
    assert verdict.run_problem([0.0], ["0-10"]).startswith(
        "counted interval 1 of 1 (steps 0-10) has a rate of 0")


@pytest.mark.parametrize("argv, line", [
    (["--warmup_batches", "-5", "--train_batches", "30"],
     "warmup_batches is -5, must be >= 0"),
    (["--warmup_batches", "30", "--train_batches", "10"],
     "train_batches (10) must be greater than warmup_batches (30)"),
    # One flag alone keeps DLPerf's other bound (100), in every command:
    # this passed the check, then counted nothing.
    (["--train_batches", "50"],
     "train_batches (50) must be greater than warmup_batches (100, "
     "DLPerf's default: give --warmup_batches)"),
    (["--warmup_batches", "700"],
     "train_batches (600, DLPerf's default: give --train_batches) must be "
     "greater than warmup_batches (700)"),
])
def test_window_values_that_count_nothing_are_bad_usage(tmp_path, capsys,
                                                        argv, line):
    """compare and history --import refuse them as the extractor does
    (compare counted the warm-up interval at --warmup_batches -5)."""
    tree = str(tmp_path / "logs")
    logkit.write_run(tree, "1n1g", [300.0] + [1000.0] * 6)
    db = str(tmp_path / "h.sqlite")
    for main, args in ((compare.main, ["--a", tree, "--b", tree]),
                       (history.main, ["--db", db, "--import", tree])):
        assert main(args + argv) == exit_status.CONFIG
        err = capsys.readouterr().err
        assert f"error: {line}; see --help" in err
    assert not os.path.exists(db)


def test_one_window_flag_on_result_files_keeps_dlperfs_other_bound(
        tmp_path, capsys):
    """--train_batches alone counts from step 100 on a folder of
    result.json files too, as on a log tree (it counted from step 0)."""
    def slow_start(k, data):
        data["stats"]["intervals"] = [
            {"start_step": s, "end_step": s + 50, "seconds": 4.0,
             "examples_per_second": 100.0 if s < 100 else 200.0 + k}
            for s in range(0, 400, 50)]

    a = _result_folder(tmp_path / "a", 3, slow_start)
    assert compare.main(["--a", a, "--b", a, "--train_batches", "300"]) \
        == exit_status.OK
    assert "1n1g b8 fp32        201.00    201.00" in capsys.readouterr().out


@pytest.mark.parametrize("flags, named", [
    (["--train_batches", "300"], "--train_batches goes"),
    (["--warmup_batches", "10", "--train_batches", "300"],
     "--warmup_batches, --train_batches go"),
])
def test_the_runner_refuses_the_step_window_it_would_ignore(capsys, flags,
                                                            named):
    """The A/B runner leaves out --warmup_intervals; --warmup_batches and
    --train_batches were ignored there without a word."""
    assert compare.main(["--config", "c.yaml", *flags]) == \
        exit_status.CONFIG
    assert (f"error: {named} with --a/--b; the runner's window is "
            "--warmup_intervals; see --help") in capsys.readouterr().err


def test_history_window_flags_without_import_are_bad_usage(tmp_path,
                                                           capsys):
    db = str(tmp_path / "h.sqlite")
    assert history.main(["--db", db, "--warmup_batches", "5"]) == \
        exit_status.CONFIG
    assert "--warmup_batches goes with --import LOG_DIR" in \
        capsys.readouterr().err
    assert history.main(["--db", db, "--window", "auto"]) == \
        exit_status.CONFIG
