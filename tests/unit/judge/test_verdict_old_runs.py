"""Runs made before official_bench recorded its version or the load average
(walk_upgrade2 U4): a side whose runs lack what the other runs record gets
a note saying the verdict cannot rule out that difference, one per side and
fact, from verdict.setting_notes, official-bench-compare and the history."""

import random

from official_bench.contracts import exit_status, history_db, utilisation as U
from official_bench.contracts.history_row import row_from_result
from official_bench.judge import compare, history, verdict
from support import logkit

S = verdict.RunSetting
NEW = {"tensorflow": "2.21.0", "official_bench": "0.1.0 (git 2ef1efc)"}
OLD = {"tensorflow": "2.21.0"}
VERSION = ("made before official_bench recorded its version (or read "
           "without their result.json): the verdict cannot rule out a code "
           "difference")
LOAD = ("made before official_bench recorded the load average (or read "
        "without their result.json): the verdict cannot rule out a load "
        "difference")


def test_a_side_without_the_version_or_the_load_is_named():
    old, new = S(OLD), S(NEW, load=(1.0, 2))
    assert verdict.setting_notes([old] * 2, [new] * 2) == [
        f"A: 2 of 2 run(s) {VERSION}", f"A: 2 of 2 run(s) {LOAD}"]
    assert verdict.setting_notes([new] * 2, [old, new]) == [
        f"B: 1 of 2 run(s) {VERSION}", f"B: 1 of 2 run(s) {LOAD}"]
    # nothing where no run records it (the history keeps no load; the
    # A/B runner's runs no environment), nor where every run does
    assert verdict.setting_notes([S(OLD)] * 2, [S(OLD)]) == []
    assert verdict.setting_notes([S(load=(1.0, 2))], [S(load=(1.5, 2))]) \
        == []
    assert verdict.setting_notes([new], [new]) == []


def _side(root, env, load, seed):
    rng = random.Random(seed)
    for k in range(2):
        data = logkit.result_json(
            [(0, 10, 60.0)] + [(s, s + 10, rng.gauss(200.0, 1.0))
                               for s in range(10, 60, 10)], 8, 1,
            logkit.environment(num_replicas=1, num_workers=1, dtype="fp32",
                               **env))
        data["stats"]["warmup_steps"] = 10
        if load is not None:
            data[U.KEY] = {U.LOAD_KEY: {"start": load, "end": load,
                                        "cpu_count": 2}}
        d = root / f"run{k}"
        d.mkdir(parents=True)
        logkit.write_json(str(d / "result.json"), data)


def test_compare_notes_an_old_side(tmp_path, capsys):
    _side(tmp_path / "a", {}, None, 1)
    _side(tmp_path / "b", {"official_bench": "0.1.0 (git 2ef1efc)"}, 1.0, 2)
    assert compare.main(["--a", str(tmp_path / "a"), "--b",
                         str(tmp_path / "b")]) == exit_status.OK
    case = "1n1g b8 fp32"
    err = [line for line in capsys.readouterr().err.splitlines()
           if line.startswith(f"note: {case}: ")]
    assert err == [f"note: {case}: A: 2 of 2 run(s) {VERSION}",
                   f"note: {case}: A: 2 of 2 run(s) {LOAD}"], err


def _row(rates, when, **env):
    data = logkit.history_result(rates)
    data["environment"].update(env)
    return row_from_result(data, "trainer", "/runs/x", when)


def test_history_notes_earlier_runs_without_the_version(tmp_path, capsys):
    db = str(tmp_path / "h.sqlite")
    history_db.append(db, [
        _row([100.0, 101.0], 1e9), _row([100.5, 99.5], 2e9),
        _row([100.2, 99.8], 3e9, official_bench="0.1.0 (git 2ef1efc)")])
    assert history.main(["--db", db]) == exit_status.OK
    out, err = capsys.readouterr()
    label = out.split(": latest/earlier")[0]
    assert err.splitlines() == [f"note: {label}: earlier: 2 of 2 run(s) "
                                f"{VERSION}"], err
