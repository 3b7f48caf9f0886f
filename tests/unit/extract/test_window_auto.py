"""--window auto: short runs (a CPU try) are counted over the longest window
every run covers after its warm-up interval, the choice is printed, and
DLPerf's defaults and numbers do not move when it is not asked for."""

import pytest

from official_bench.extract import extractor as extract, tables
from official_bench.extract.errors import ExtractError
from support import logkit as kit


def _short_tree(root):
    """Three 1n1g runs of log_steps 10: 0-60, 0-50 and a crash at step 20."""
    logs = root / "bz16"
    kit.write_run(logs, "1n1g", [5.0] + [100.0] * 5, batch=16, index=1,
                  log_steps=10)
    kit.write_run(logs, "1n1g", [6.0] + [90.0] * 4, batch=16, index=2,
                  log_steps=10)
    kit.write_run(logs, "1n1g", [7.0, 80.0], batch=16, index=3, log_steps=10,
                  finished=False, exception="RuntimeError: boom")
    return str(logs)


def test_auto_picks_the_longest_common_window_after_warm_up(tmp_path):
    out = extract.extract(_short_tree(tmp_path), window="auto")
    # run 2 ends at 50; the crashed run does not shorten the window
    assert out.chosen_window == (10, 50)
    case = out.result["rn50"]["1n1g"]
    assert (case["warmup_batches"], case["train_batches"]) == (10, 50)
    assert case["runs"] == [100.0, 90.0]  # warm-up intervals 5.0/6.0 left out
    assert [e["index"] for e in case["excluded"]] == [3]


def test_cli_prints_the_window_it_chose(tmp_path, capsys):
    status = extract.main(["--log_dir", _short_tree(tmp_path), "--window",
                           "auto", "--output_dir", str(tmp_path / "out"),
                           "--no_plot"])
    err = capsys.readouterr().err
    assert status == 0
    assert ("note: --window auto: counting steps 10-50, the longest window "
            "every run covers after its first (warm-up) interval "
            "(= --warmup_batches 10 --train_batches 50)") in err


def test_auto_with_explicit_window_flags_is_a_usage_error(tmp_path, capsys):
    status = extract.main(["--log_dir", _short_tree(tmp_path), "--window",
                           "auto", "--train_batches", "40"])
    assert status == 2
    assert "give one or the other" in capsys.readouterr().err


def test_without_auto_the_defaults_are_dlperfs(tmp_path, capsys):
    with pytest.raises(ExtractError, match=r"inside steps \[100, 600\]"):
        extract.extract(_short_tree(tmp_path))
    logs = tmp_path / "long"
    kit.write_run(logs, "1n1g", [50.0] + [300.0] * 5 + [999.0] * 3)
    # long runs: the defaults count 100-600 only; auto would count to 900
    default = extract.main(["--log_dir", str(logs), "--output_dir",
                            str(tmp_path / "o"), "--no_plot"])
    assert default == 0 and "--window auto" not in capsys.readouterr().err
    assert extract.extract(str(logs)).result["rn50"]["1n1g"]["runs"] == [300.0]
    auto = extract.extract(str(logs), window="auto")
    assert auto.chosen_window == (100, 900)


def test_runs_without_a_common_window(tmp_path):
    logs = tmp_path / "bz16"
    kit.write_run(logs, "1n1g", [5.0, 100.0], batch=16, index=1, log_steps=10)
    kit.write_run(logs, "1n1g", [5.0], batch=16, index=2, log_steps=10,
                  first_step=40)
    with pytest.raises(ExtractError, match="share no steps after their first"):
        extract.extract(str(logs), window="auto")


def test_runs_that_all_failed_are_no_usable_run_not_a_window(tmp_path):
    """Every run failed for the launcher (a sweep whose decoder was
    missing): the error names each run's failure, as without --window,
    rather than blaming the window."""
    from official_bench.contracts import run_status
    logs = tmp_path / "bz16"
    times = dict(started=1.0, ended=2.0, node=0, host="h")
    for index in (1, 2):
        path = kit.write_run(logs, "1n1g", [], batch=16, index=index,
                             log_steps=10, finished=False,
                             exception="ConfigError: no decoder")
        run_status.write_status(path, status="failed", rc=2,
                                reason="bad configuration", **times)
    with pytest.raises(ExtractError) as e:
        extract.extract(str(logs), window="auto")
    assert str(e.value).startswith("no usable run under "), str(e.value)
    assert "share no steps" not in str(e.value)
    assert str(e.value).count("the launcher saw this run failed") == 2


def test_runs_of_other_log_steps_sharing_steps_but_no_interval(tmp_path):
    """Steps 10-12 are every run's, but no interval of the log_steps-3 run
    lies inside them: one error naming it, not a window that counts
    nothing and a hint to pass --window auto (official-bench-compare of
    two trees of other LOG_STEPS)."""
    logs = tmp_path / "bz16"
    kit.write_run(logs, "1n1g", [5.0] + [100.0] * 3, batch=16, index=1,
                  log_steps=3)
    kit.write_run(logs, "1n1g", [5.0] + [90.0] * 3, batch=16, index=2,
                  log_steps=10)
    with pytest.raises(ExtractError, match=r"covers steps 10-12 .* no whole "
                       r"interval of .*rn50_b16_fp32_1\.log .*intervals: "
                       r"0-3, 3-6, 6-9, 9-12"):
        extract.extract(str(logs), window="auto")


def test_help_lists_window_auto(capsys):
    assert extract.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--window {auto}" in out and "default: 100, DLPerf's" in out


def _window_actions(parser):
    return {a.option_strings[0]: (a.help, a.default, a.choices, a.type)
            for a in parser._actions
            if a.option_strings and a.option_strings[0] in (
                "--warmup_batches", "--train_batches", "--window")}


def test_every_command_takes_the_one_definition_of_the_window_flags():
    """The extractor, official-bench-compare and official-bench-history
    have the three flags from windows.add_flags, word for word; no module
    defines them itself."""
    import argparse
    import ast
    import os

    from official_bench.extract import windows
    from official_bench.judge import compare, history
    from support.helpers import REPO
    one = argparse.ArgumentParser()
    windows.add_flags(one)
    expected = _window_actions(one)
    assert len(expected) == 3
    for module in (extract, compare, history):
        assert _window_actions(module.build_parser()) == expected, module
    for folder, _, files in os.walk(os.path.join(REPO, "official_bench")):
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py") or path == windows.__file__:
                continue
            tree = ast.parse(open(path, encoding="utf-8").read())
            defined = [n.lineno for n in ast.walk(tree)
                       if isinstance(n, ast.Call)
                       and getattr(n.func, "attr", "") == "add_argument"
                       and any(getattr(a, "value", None) in expected
                               for a in n.args)]
            assert not defined, (path, defined)


def test_a_run_excluded_whatever_the_window_does_not_choose_it(tmp_path):
    """measure_run's window-free rules decide which runs choose the window
    (speeds.window_free_problem): a log whose steps go backward (a restart
    in one log) shortened it to its last steps, 10-20."""
    logs = tmp_path / "bz16"
    for index in (1, 2):
        kit.write_run(logs, "1n1g", [5.0] + [100.0] * 5, batch=16,
                      index=index, log_steps=10)
    restarted = kit.run_lines([5.0, 100.0, 100.0], log_steps=10,
                              global_batch=16, finished=False) + \
        kit.run_lines([5.0, 100.0], log_steps=10, global_batch=16)
    kit.write_lines(kit.log_path(logs, "1n1g", batch=16, index=3), restarted)
    out = extract.extract(str(logs), window="auto")
    assert out.chosen_window == (10, 60)
    (excluded,) = out.result["rn50"]["1n1g"]["excluded"]
    assert excluded["index"] == 3 and "steps go backward" in \
        excluded["reason"]


def test_an_explicit_window_past_the_runs_end_notes_the_steps_counted(
        tmp_path):
    logs = tmp_path / "bz16"
    for index in (1, 2):
        kit.write_run(logs, "1n1g", [5.0] + [100.0] * 2, batch=16,
                      index=index, log_steps=10)
    result = extract.extract(str(logs), 10, 600).result
    assert ("samples/s: median over runs of the per-run mean interval "
            "throughput, steps 10-30 (the window asked was 10-600)"
            in tables.notes(result["rn50"]))
    within = extract.extract(str(logs), 10, 30).result
    assert ("samples/s: median over runs of the per-run mean interval "
            "throughput, steps 10-30" in tables.notes(within["rn50"]))
