"""What makes a verdict hard to read, said beside it (walk_aa F4, F5):
verdict.setting_notes (versions, host, CPU, oneDNN differing between the
sides or mixed within one, a load average above the CPU count, the
trainer's CPU share 1.5x apart), as official-bench-compare prints them
(stderr and --json notes), the history (latest vs earlier, from the rows'
environment) and the A/B runner, whose rows also get the by-round ratios."""

import json
import random

from official_bench.contracts import exit_status, history_db, utilisation as U
from official_bench.contracts.history_row import row_from_result
from official_bench.judge import ab, compare, history, verdict
from support import logkit

S = verdict.RunSetting


def test_notes_name_each_difference_and_each_mix():
    env = {"tensorflow": "2.21.0", "hostname": "vm", "cpu_model": "AMD EPYC",
           "cpu_count": 2, "onednn_enabled": True, "python": "3.11.7"}
    other = dict(env, tensorflow="2.16.1", onednn_enabled=False,
                 python="3.10.12")
    assert verdict.setting_notes([S(env)] * 3, [S(env)] * 2) == []
    notes = verdict.setting_notes([S(env)] * 3, [S(other)] * 2)
    # python is not one of the keys; absent (an older file) is not "other"
    assert notes == ["A and B differ in tensorflow: A 2.21.0, B 2.16.1",
                     "A and B differ in onednn_enabled: A True, B False"]
    assert verdict.setting_notes([S(env), S({})], [S({})]) == []
    notes = verdict.setting_notes(
        [S(env), S(dict(env, hostname="n2")), S(env)], [S(env)],
        ("earlier", "latest"))
    assert notes == ["earlier mixes hostname: vm (2 runs), n2 (1 run)"]


def test_notes_on_load_and_cpu_share():
    quiet, busy = S(load=(1.5, 2), cpu_share=0.45), S(load=(12.46, 2),
                                                      cpu_share=0.44)
    assert verdict.setting_notes([quiet] * 2, [quiet] * 2) == []
    (note,) = verdict.setting_notes([quiet, quiet], [quiet, busy])
    assert note.startswith("B ran with the load average above the CPU "
                           "count: load 12.46 on 2 CPUs (in 1 of 2 runs")
    # the walk's JAX A/A runs 4 and 6: 41% and 23% of the cores, 2x apart
    (note,) = verdict.setting_notes([S(cpu_share=0.41)], [S(cpu_share=0.23)])
    assert note.startswith("the trainer's CPU share differs 1.8x: A 41%, "
                           "B 23% of its cores")
    assert verdict.setting_notes([S(cpu_share=0.41)],
                                 [S(cpu_share=0.30)]) == []  # 1.37x


def test_load_item_reading():
    record = U.load_record(5.27, 6.41)
    assert record["start"] == 5.27 and record["end"] == 6.41
    assert record["cpu_count"] >= 1
    assert U.highest_load({U.LOAD_KEY: record}) == (6.41,
                                                   record["cpu_count"])
    assert U.highest_load({U.LOAD_KEY: U.load_record(None, None)}) is None
    assert U.highest_load({}) is None and U.highest_load(None) is None
    assert U.process_cpu_share(
        {"process": {"cpu_utilisation": {"mean": 0.4}}}) == 0.4
    assert U.process_cpu_share({"process": {}}) is None
    assert isinstance(U.load_now(), float)


def _write_side(root, mean, env, load, share, seed):
    rng = random.Random(seed)
    for k in range(3):
        data = logkit.result_json(
            [(0, 10, mean / 3)] + [(s, s + 10, rng.gauss(mean, 1.0))
                                   for s in range(10, 60, 10)], 8, 1,
            logkit.environment(num_replicas=1, num_workers=1, dtype="fp32",
                               **env))
        data["stats"]["warmup_steps"] = 10
        data[U.KEY] = {"process": {"cpu_utilisation": {"mean": share}},
                       U.LOAD_KEY: {"start": load, "end": load,
                                    "cpu_count": 2}}
        d = root / f"run{k}"
        d.mkdir(parents=True)
        logkit.write_json(str(d / "result.json"), data)


def test_compare_prints_the_notes_and_lists_them_in_json(tmp_path, capsys):
    _write_side(tmp_path / "a", 200.0, {}, 1.0, 0.45, 1)
    _write_side(tmp_path / "b", 200.0, {"hostname": "other-host",
                                        "cpu_model": "Intel Xeon"},
                9.5, 0.25, 2)
    args = ["--a", str(tmp_path / "a"), "--b", str(tmp_path / "b")]
    assert compare.main(args) == exit_status.OK
    case = "1n1g b8 fp32"
    err = [line for line in capsys.readouterr().err.splitlines()
           if line.startswith(f"note: {case}: ")]  # not the recount notes
    assert err == [
        f"note: {case}: A and B differ in hostname: A node1, B other-host",
        f"note: {case}: B ran with the load average above the CPU count: "
        "load 9.50 on 2 CPUs (in 3 of 3 runs, at the timed loop's start or "
        "end): its runs waited for cores",
        f"note: {case}: the trainer's CPU share differs 1.8x: A 45%, B 25% "
        "of its cores (utilisation.process.cpu_utilisation, median of the "
        "runs): the machine gave one side more"], err
    err_case = err
    assert compare.main(args + ["--json"]) == exit_status.OK
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["notes"] == [line[len("note: "):] for line in
                             err.splitlines()]
    assert [n for n in data["notes"] if n.startswith(case)] == \
        [line[len("note: "):] for line in err_case]
    assert data["cases"][0]["paired"] is None


def _record(side, round_no, speed, load):
    rates = [compare.ReadInterval(0, 10, 1.0, speed + d)
             for d in (-1.0, 0.0, 1.0)]
    return ab.RunRecord(side, round_no, rates, 30.0, load, load, None,
                        cpu_count=2)


def test_runner_rows_get_the_by_round_ratios_and_the_load_warning():
    """The walk's A/B: rounds of 266.97/244.79, 333.34/226.41 and
    295.97/177.41 img/s at loads of 10-19 on 2 CPUs."""
    speeds = [(266.97, 244.79), (333.34, 226.41), (295.97, 177.41)]
    records = {name: [_record(name, k + 1, pair[i], 12.46)
                      for k, pair in enumerate(speeds)]
               for i, name in enumerate("AB")}
    line = ab.describe_run(records["B"][0])
    assert line == ("round 1: B 244.79 img/s over 3 interval(s) (30 s, load "
                    "12.46->12.46, above the 2 CPUs)")
    assert "above" not in ab.describe_run(_record("A", 1, 100.0, 1.9))
    sides = [compare.SideRuns(
        name, "runner", {compare.RUNNER_CASE: [r.intervals for r in recs]},
        settings={compare.RUNNER_CASE: [ab.setting(r) for r in recs]})
        for name, recs in records.items()]
    rows, notes = compare.compare_sides(*sides)
    (row,) = rows
    assert row.paired.describe() == (
        "B/A by round: 0.917 0.679 0.599; median 0.679 [0.599, 0.917] "
        "(95%, paired), lowest 0.599")
    assert "B/A by round: 0.917 0.679 0.599" in compare.table(rows)
    assert [n.split(" ran with")[0] for n in notes] == ["runner: A",
                                                        "runner: B"]
    case = json.loads(compare.as_json(rows, *sides, notes))["cases"][0]
    assert case["paired"]["ratios"] == list(row.paired.ratios)
    assert case["paired"]["low"] == row.paired.low
    one = verdict.round_ratios([[100.0]], [[59.0]]).as_dict()
    assert one["low"] is None and one["high"] is None


def _row(rates, when, **env):
    intervals = [(0, 10, 5.0)] + [(10 + 10 * k, 20 + 10 * k, r)
                                  for k, r in enumerate(rates)]
    data = logkit.result_json(intervals, 8, 1, logkit.environment(
        num_replicas=1, num_workers=1, dtype="fp32", **env))
    data["stats"]["warmup_steps"] = 10
    return row_from_result(data, "trainer", "/tmp/x", when)


def test_history_notes_what_the_latest_run_changed(tmp_path, capsys):
    db = str(tmp_path / "h.sqlite")
    history_db.append(db, [
        _row([100.0, 101.0, 99.0], 1e9), _row([100.5, 99.5, 100.0], 2e9),
        _row([100.2, 99.8, 100.1], 3e9, tensorflow="2.22.0",
             hostname="node7")])
    assert history.main(["--db", db]) == exit_status.OK
    out, err = capsys.readouterr()
    label = out.split(": latest/earlier")[0]
    assert err.splitlines() == [
        f"note: {label}: earlier and latest differ in tensorflow: earlier "
        "2.21.0, latest 2.22.0",
        f"note: {label}: earlier and latest differ in hostname: earlier "
        "node1, latest node7"], err
    assert history.main(["--db", db, "--json"]) == exit_status.OK
    (check,) = json.loads(capsys.readouterr().out)
    assert check["notes"] == [line[len("note: "):]
                              for line in err.splitlines()]
