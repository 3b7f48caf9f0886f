"""extract/cases.py: a case whose counted runs were made by different
versions of the suite (result.json's environment.official_bench), or
mix runs with and without it, is warned about once, naming the runs and
the versions, like the launcher's RESUME=1 note (walk_upgrade2 U4)."""

from official_bench.extract import cases, extractor as extract, speeds
from official_bench.extract.logparse import RunId
from support import logkit as kit

NEW = "0.1.0 (git 2ef1efc)"


def tree(root, versions, crashed=()):
    """A 2n1g case with one run per entry of ``versions`` (None: a
    result.json from before the suite recorded its version); the runs in
    ``crashed`` end in a traceback before their last intervals."""
    logs = root / "bz16"
    for index, version in enumerate(versions, start=1):
        rates = [5.0] + [16.0] * 5
        path = kit.write_run(logs, "2n1g", rates[:2] if index in crashed
                             else rates, batch=16, index=index,
                             finished=index not in crashed,
                             exception="RuntimeError: boom"
                             if index in crashed else None)
        env = kit.environment(num_workers=2)
        if version is not None:
            env["official_bench"] = version
        data = kit.result_json([(k * 100, k * 100 + 100, e)
                                for k, e in enumerate(rates)], 32, 2,
                               env=env)
        kit.write_json(path[:-4] + ".json", data)
    return str(logs)


def versions_warnings(extraction):
    return [w for w in extraction.warnings if "suite" in w
            or "environments" in w]


def test_an_old_run_beside_a_new_one_is_named_with_both_versions(tmp_path):
    extraction = extract.extract(tree(tmp_path, [None, NEW]))
    line = ("rn50 2n1g: the case mixes suite versions: run 1 made before "
            f"the suite recorded its version, run 2 by official_bench {NEW}")
    assert versions_warnings(extraction) == [line]
    assert extraction.result["rn50"]["2n1g"]["warnings"].count(line) == 1


def test_runs_of_each_version_are_grouped_in_run_order(tmp_path):
    extraction = extract.extract(tree(tmp_path, [None, NEW, None, "0.1.1"]))
    assert versions_warnings(extraction) == [
        "rn50 2n1g: the case mixes suite versions: runs 1, 3 made before "
        f"the suite recorded its version, run 2 by official_bench {NEW}, "
        "run 4 by official_bench 0.1.1"]


def test_one_version_or_none_recorded_is_quiet(tmp_path):
    assert versions_warnings(extract.extract(
        tree(tmp_path / "a", [NEW, NEW]))) == []
    assert versions_warnings(extract.extract(
        tree(tmp_path / "b", [None, None]))) == []


def test_an_excluded_run_does_not_mix_the_case(tmp_path):
    # run 2 crashed: not counted, so its version is not in the numbers
    extraction = extract.extract(tree(tmp_path, [NEW, None, NEW],
                                      crashed={2}))
    assert extraction.result["rn50"]["2n1g"]["num_runs"] == 2
    assert versions_warnings(extraction) == []


def test_the_version_is_left_out_of_the_environments_warning():
    a = kit.environment(official_bench="x", tensorflow="2.18.1")
    b = kit.environment(official_bench="y")
    assert cases.environment_differences(
        cases._compared_environment(_outcome(a)),
        cases._compared_environment(_outcome(b))) == ["tensorflow"]


def _outcome(env):
    return speeds.RunOutcome(RunId(1, 1, 16, "fp32", 1), "x.log", speed=1.0,
                             counted_steps=(1, 2), num_intervals=1,
                             global_batch_size=16, environment=env)
