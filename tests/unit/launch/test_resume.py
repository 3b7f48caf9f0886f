"""resume.decide: the rule every node applies to every node's survey (the
barrier carries them), and move_aside, which never deletes."""

import types

from official_bench.launch import resume

NAMES = ["1n1g run 1", "1n1g run 2", "1n1g run 3"]


def test_nothing_there_runs_everything():
    d = resume.decide(False, False, NAMES, {0: {}, 1: {}}, 0, "T")
    assert (d.reuse, d.replace, d.problem) == ([], [], None)


def test_without_a_knob_any_node_with_runs_refuses_on_every_node():
    surveys = {0: {}, 1: {"1n1g run 1": "ok"}}
    for me in (0, 1):
        d = resume.decide(False, False, NAMES, surveys, me, "T")
        assert d.problem.startswith("T already holds runs of this sweep: "
                                    "node 1: 1n1g run 1 (ok); nothing was "
                                    "touched. Re-run with RESUME=1")


def test_resume_reuses_runs_ok_on_every_node_only():
    surveys = {0: {"1n1g run 1": "ok", "1n1g run 2": "ok"},
               1: {"1n1g run 1": "ok", "1n1g run 2": resume.UNFINISHED}}
    decisions = [resume.decide(True, False, NAMES, surveys, me, "T")
                 for me in (0, 1)]
    assert [d.reuse for d in decisions] == [["1n1g run 1"]] * 2
    # each node moves aside its own files of the runs that run again
    assert [d.replace for d in decisions] == [["1n1g run 2"]] * 2


def test_overwrite_replaces_all_of_this_nodes_runs():
    surveys = {0: {"1n1g run 1": "ok", "1n1g run 3": "failed"}}
    d = resume.decide(False, True, NAMES, surveys, 0, "T")
    assert (d.reuse, d.replace) == ([], ["1n1g run 1", "1n1g run 3"])


def _run(folder, i):
    log = folder / f"rn50_b4_fp32_{i}.log"
    worker = types.SimpleNamespace(log_path=str(log),
                                   json_path=str(log.with_suffix(".json")))
    return types.SimpleNamespace(name=f"1n1g run {i}", workers=[worker])


def test_move_aside_renames_into_a_fresh_dated_dot_folder(tmp_path):
    runs = [_run(tmp_path, i) for i in (1, 2)]
    for i in (1, 2):
        (tmp_path / f"rn50_b4_fp32_{i}.log").write_text(f"log {i}")
    (tmp_path / "rn50_b4_fp32_1.log.status.json").write_text("{}")
    found = resume.survey(runs)
    assert list(found) == ["1n1g run 1", "1n1g run 2"]
    assert found["1n1g run 2"] == resume.UNFINISHED
    first = resume.move_aside(runs, ["1n1g run 1"], "20261125-210000")
    assert first == [str(tmp_path / ".replaced-20261125-210000")]
    assert sorted(p.name for p in (tmp_path / ".replaced-20261125-210000")
                  .iterdir()) == ["rn50_b4_fp32_1.log",
                                  "rn50_b4_fp32_1.log.status.json"]
    second = resume.move_aside(runs, ["1n1g run 2"], "20261125-210000")
    assert second == [str(tmp_path / ".replaced-20261125-210000-2")]
    assert (tmp_path / ".replaced-20261125-210000-2" / "rn50_b4_fp32_2.log"
            ).read_text() == "log 2"
