"""resume.decide: the rule every node applies to every node's survey (the
barrier carries them); move_aside, which never deletes; runs beyond
TEST_NUM; OVERWRITE's staging, swapped in only after a sweep that ended ok
(the last tests drive the run script with a stand-in trainer)."""

import json
import os
import pathlib
import shlex
import sys
import types

from official_bench.contracts import exit_status, run_status
from official_bench.launch import one_run, resume
from official_bench.measure import host_env
from support.helpers import free_ports
from support.launch_cli import SCRIPTS, clean_env, run_together, script
from support.log_tree_runs import snapshot
from support.run_scripts import RUN_DEFAULTS
from support.small_disk import PAGE, leave_free, small_tmpfs

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


# The command a _tree_run's log header names, and its run's plan.
COMMAND = ("python -m official_bench.classifier_trainer --model_dir=/m/{i} "
           "'--params_override={{\"train\": {{\"steps\": 30}}}}'")


def _run(folder, i):
    log = folder / f"rn50_b4_fp32_{i}.log"
    worker = types.SimpleNamespace(
        log_path=str(log), json_path=str(log.with_suffix(".json")),
        command=shlex.split(COMMAND.format(i=f"new{i}")))
    return types.SimpleNamespace(name=f"1n1g run {i}", case="1n1g",
                                 log_path=str(log), workers=[worker])


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


# -- more runs than TEST_NUM, and an OVERWRITE that fails (issue 40 §2, §9) --


def _tree_run(folder, i, status="ok", local=False):
    """Run i's files as a finished launcher leaves them."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"rn50_b4_fp32_{i}.log"
    log.write_text(f"# command: {COMMAND.format(i=i)}\nold log {i}\n")
    (folder / f"rn50_b4_fp32_{i}.json").write_text("{}")
    run_status.write_status(str(log), status=status, rc=0, reason="",
                            started=0.0, ended=1.0, node=0, host="h")
    if local:
        (folder / f"rn50_b4_fp32_{i}.log.local1").write_text("l")


def test_runs_beyond_test_num_are_surveyed_and_moved(tmp_path):
    _tree_run(tmp_path, 1)
    _tree_run(tmp_path, 2, local=True)
    _tree_run(tmp_path, 12)  # not run 1's prefix: rn50_b4_fp32_1.
    (tmp_path / "rn50_b8_fp32_3.log").write_text("another batch")
    (tmp_path / "rn50_b4_fp16_3.log").write_text("another dtype")
    runs = [_run(tmp_path, 1)]
    assert resume.survey(runs) == {
        "1n1g run 1": "ok", "1n1g run 12": "ok, beyond TEST_NUM",
        "1n1g run 2": "ok, beyond TEST_NUM"}
    d = resume.decide(False, True, ["1n1g run 1"], {0: resume.survey(runs)},
                      0, "T")
    folders = resume.move_aside(runs, d.replace, "20261126-120000")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".replaced-20261126-120000", "rn50_b4_fp16_3.log",
        "rn50_b8_fp32_3.log"]
    assert len(list(pathlib.Path(folders[0]).iterdir())) == 10


def test_refusal_and_resume_name_the_runs_beyond_test_num():
    surveys = {0: {"1n1g run 1": "ok", "1n1g run 2": "ok, beyond TEST_NUM"}}
    d = resume.decide(False, False, ["1n1g run 1"], surveys, 0, "T")
    assert "T already holds runs of this sweep: 1n1g run 1 (ok), 1n1g run " \
        "2 (ok, beyond TEST_NUM); nothing was touched" in d.problem
    d = resume.decide(True, False, ["1n1g run 1"], surveys, 0, "T")
    assert (d.reuse, d.replace) == (["1n1g run 1"], ["1n1g run 2"])


def test_stage_then_swap_in_leaves_exactly_the_new_sweep(tmp_path):
    _tree_run(tmp_path, 1)
    _tree_run(tmp_path, 2)
    runs = [_run(tmp_path, 1)]
    names = list(resume.survey(runs))
    [staging] = resume.stage(runs, "20261126-120000")
    assert runs[0].workers[0].log_path == os.path.join(
        staging, "rn50_b4_fp32_1.log")
    pathlib.Path(runs[0].workers[0].log_path).write_text("new log")
    pathlib.Path(runs[0].workers[0].json_path).write_text("new json")
    [aside] = resume.swap_in(runs, names, "20261126-120000")
    assert runs[0].workers[0].log_path == str(tmp_path /
                                              "rn50_b4_fp32_1.log")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".replaced-20261126-120000", "rn50_b4_fp32_1.json",
        "rn50_b4_fp32_1.log"]
    assert (tmp_path / "rn50_b4_fp32_1.log").read_text() == "new log"
    assert sorted(p.name for p in pathlib.Path(aside).iterdir()) == sorted(
        f"rn50_b4_fp32_{i}{s}" for i in (1, 2)
        for s in (".json", ".log", ".log.status.json"))


# A trainer's stand-in (the launcher's --python): ok writes the result file
# the launcher waits for (node 0's, node 1's), fail exits 1 with an error
# line.
FAKE = """#!/bin/sh
for a in "$@"; do case "$a" in --model_dir=*) md="${a#--model_dir=}";; esac
done
[ "%s" = fail ] && { echo "error: fake trainer failed" >&2; exit 1; }
mkdir -p "$md" && for f in result result_worker1; do echo '{}' > "$md/$f.json"
done && echo "fake trainer ok"
"""


def _fake(tmp_path, kind):
    path = tmp_path / f"fake_{kind}"
    path.write_text(FAKE % kind)
    path.chmod(0o755)
    return str(path)


def _sweep(tmp_path, kind="ok", test_num="1", **knobs):
    return script("single", tmp_path, "4", "fp32", test_num, "--python",
                  _fake(tmp_path, kind), timeout=120, **dict(
                      RUN_DEFAULTS, **knobs))


def _old_tree(tmp_path):
    case = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4" / "1n1g"
    for i in (1, 2):
        _tree_run(case, i)
    return case, snapshot(case)


def _visible(case):
    return sorted(p.name for p in case.iterdir()
                  if not p.name.startswith("."))


def test_sweep_over_more_runs_than_test_num(tmp_path):
    """Runs 1-2 in the tree, TEST_NUM=1: refused (exit 6) with both named
    and nothing touched; RESUME=1 keeps run 1 and moves run 2 aside."""
    assert _sweep(tmp_path, test_num="2").returncode == 0
    case = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4" / "1n1g"
    before = snapshot(case)
    kept_log = (case / "rn50_b4_fp32_1.log").read_text()
    out = _sweep(tmp_path)
    assert out.returncode == exit_status.LOGS_IN_USE, out.stdout + out.stderr
    assert "1n1g run 1 (ok), 1n1g run 2 (ok, beyond TEST_NUM); nothing was " \
        "touched" in out.stderr
    assert snapshot(case) == before
    out = _sweep(tmp_path, RESUME="1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "RESUME=1: moved the files of 1n1g run 2 aside into" in out.stdout
    assert _visible(case) == ["rn50_b4_fp32_1.json", "rn50_b4_fp32_1.log",
                              "rn50_b4_fp32_1.log.status.json"]
    assert (case / "rn50_b4_fp32_1.log").read_text() == kept_log


def test_resume_refuses_runs_made_with_another_setup(tmp_path):
    """Runs 1-2 of STEPS=6 on 16 px images, then RESUME=1 TEST_NUM=3 with
    STEPS=12 and 32 px images: refused (exit 6) naming each kept run and
    what differs, nothing touched; a changed PEER_TIMEOUT is not another
    setup (nor the model_dir: a fresh one per run)."""
    assert _sweep(tmp_path, test_num="2").returncode == 0
    case = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4" / "1n1g"
    before = snapshot(case)
    other = RUN_DEFAULTS["PARAMS_OVERRIDE"].replace(
        "train_dataset.image_size=16", "train_dataset.image_size=32")
    out = _sweep(tmp_path, test_num="3", RESUME="1", STEPS="12",
                 PARAMS_OVERRIDE=other)
    assert out.returncode == exit_status.LOGS_IN_USE, out.stdout + out.stderr
    assert "holds runs of this sweep made with another setup (kept run -> " \
        "this sweep): 1n1g run 1: train.steps 6 -> 12, train_dataset." \
        "image_size 16 -> 32; 1n1g run 2: train.steps 6 -> 12" in out.stderr
    assert snapshot(case) == before
    out = _sweep(tmp_path, test_num="3", RESUME="1", PEER_TIMEOUT="77")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "RESUME=1: keeping 1n1g run 1, 1n1g run 2" in out.stdout


def test_command_difference_leaves_out_what_each_run_has_its_own():
    def argv(model_dir, hosts, steps, timeout=30, config="a.yaml"):
        over = {"train": {"steps": steps}, "runtime": {
            "worker_hosts": hosts, "task_index": 0,
            "peer_timeout_seconds": timeout}}
        return ["py", "-m", "t", f"--config_file={config}",
                f"--model_dir={model_dir}",
                "--params_override=" + json.dumps(over)]
    kept = argv("/m/1.20261125-1", "h1:5000,h2:5000", 30)
    same = argv("/m/1.20261129-2-2", "h1:6000,h2:6000", 30, timeout=99)
    assert resume.command_difference(kept, same) is None
    assert resume.command_difference(
        kept, argv("/m/1", "h1:5000,h3:5000", 60, config="b.yaml")) == (
        'runtime.worker_hosts "h1,h2" -> "h1,h3", train.steps 30 -> 60, '
        "command --config_file=a.yaml -> --config_file=b.yaml")


def test_the_same_venv_through_another_path_is_the_same_python(tmp_path):
    """The kept run's interpreter is compared by its folder's real path:
    a symlinked or `..` spelling of the same venv is no difference; the
    python of another venv of the same base interpreter is one."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    (tmp_path / "link").symlink_to(tmp_path / "venv")
    other = tmp_path / "other" / "bin"
    other.mkdir(parents=True)
    (other / "python").symlink_to(sys.executable)
    run = ["-m", "official_bench.classifier_trainer", "--config_file=a.yaml"]
    kept = [str(venv / "python")] + run
    for same in (tmp_path / "link" / "bin" / "python",
                 venv / ".." / "bin" / "python"):
        assert resume.command_difference(kept, [str(same)] + run) is None
    assert resume.command_difference(kept, [str(other / "python")] + run) \
        == f"command {venv / 'python'} -> {other / 'python'}"


def test_failed_overwrite_leaves_the_old_runs_in_place(tmp_path):
    """OVERWRITE=1 whose trainer fails every run: the old runs 1-2 stay
    where the extractor reads them, byte for byte; the new files are in
    the staging folder, which the line names."""
    case, before = _old_tree(tmp_path)
    out = _sweep(tmp_path, "fail", "2", OVERWRITE="1")
    assert out.returncode == exit_status.FAILED, out.stdout + out.stderr
    kept = {k: v for k, v in snapshot(case).items()
            if not k.startswith(".overwrite-")}
    assert kept == before
    [staging] = [p for p in case.iterdir() if p.name.startswith(".")]
    assert staging.name.startswith(".overwrite-")
    assert (staging / "rn50_b4_fp32_2.log.status.json").exists()
    assert "OVERWRITE=1: the sweep did not end ok, so the old runs (1n1g " \
        "run 1, 1n1g run 2) stay where the extractor reads them; this " \
        f"sweep's files are in {staging}" in out.stderr


def test_overwrite_that_ends_ok_holds_exactly_the_new_sweep(tmp_path):
    case, before = _old_tree(tmp_path)
    out = _sweep(tmp_path, "ok", "1", OVERWRITE="1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert _visible(case) == ["rn50_b4_fp32_1.json", "rn50_b4_fp32_1.log",
                              "rn50_b4_fp32_1.log.status.json"]
    assert "fake trainer ok" in (case / "rn50_b4_fp32_1.log").read_text()
    [aside] = [p for p in case.iterdir() if p.name.startswith(".")]
    assert aside.name.startswith(".replaced-")
    assert snapshot(aside) == before  # renamed: bytes and times kept
    assert f"OVERWRITE=1: every run ok: moved the files of 1n1g run 1, 1n1g " \
        f"run 2 aside into {aside}" in out.stdout


def _two_nodes(tmp_path, kinds, ports):
    """Both launchers of a loopback two-node OVERWRITE=1 sweep, node k's
    trainer a stand-in of kinds[k]: ([rc], [output])."""
    w0, w1, b = ports
    commands = []
    for k, kind in enumerate(kinds):
        env = clean_env(tmp_path, **dict(
            RUN_DEFAULTS, NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}",
            BARRIER_PORT=b, TASK_INDEX=k, BARRIER_TIMEOUT=60,
            OVERWRITE="1"))
        commands.append((["bash", SCRIPTS["two"], "4", "fp32", "1",
                          "--python", _fake(tmp_path, kind)], env))
    return run_together(commands, tmp_path, 120)


def test_two_nodes_agree_to_keep_or_replace_their_old_runs(tmp_path):
    """Node 1's run fails: both nodes keep their old runs; then both ok:
    both hold exactly the new sweep (each node moves its own tree, on the
    sweep's status, which the barrier gives both alike)."""
    root = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4" / "2n1g"
    cases = [root, root / "node1"]
    before = []
    for case in cases:
        for i in (1, 2):
            _tree_run(case, i)
        before.append({k: v for k, v in snapshot(case).items()
                       if not k.startswith("node1/")})
    ports = free_ports(3)
    codes, outs = _two_nodes(tmp_path, ["ok", "fail"], ports)
    assert codes == [exit_status.FAILED] * 2, outs
    for case, was, out in zip(cases, before, outs):
        assert "the sweep did not end ok, so the old runs (2n1g run 1, " \
            "2n1g run 2) stay" in out, out
        assert {k: v for k, v in snapshot(case).items()
                if not k.startswith((".overwrite-", "node1/"))} == was
    codes, outs = _two_nodes(tmp_path, ["ok", "ok"], free_ports(3))
    assert codes == [0, 0], outs
    for case in cases:
        assert _visible(case) == [
            n for n in ["node1", "rn50_b4_fp32_1.json", "rn50_b4_fp32_1.log",
                        "rn50_b4_fp32_1.log.status.json"]
            if n != "node1" or case == root]
        assert "fake trainer ok" in (case / "rn50_b4_fp32_1.log").read_text()


def test_overwrite_into_a_full_disk_leaves_the_old_runs(tmp_path):
    """OVERWRITE=1 on a log tree whose file system is full: the sweep stops
    (exit 5, the line names the path) and the old runs stay where the
    extractor reads them, byte for byte."""
    logs = tmp_path / "logs"
    with small_tmpfs(logs, 64 * PAGE):
        case, before = _old_tree(tmp_path)
        leave_free(str(logs), 0)
        out = _sweep(tmp_path, "ok", "2", OVERWRITE="1")
        assert out.returncode == exit_status.NOT_WRITABLE, \
            out.stdout + out.stderr
        assert "no space left on the device" in out.stderr, out.stderr
        assert {k: v for k, v in snapshot(case).items()
                if not k.startswith(".overwrite-")} == before
        assert "Traceback" not in out.stdout + out.stderr


def test_a_run_set_up_otherwise_on_one_node_refuses_resume_on_every_node():
    other = f"ok, {resume.OTHER_SETUP}: train.steps 30 -> 60"
    surveys = {0: {"2n1g run 1": "ok"}, 1: {"2n1g run 1": other}}
    for me in (0, 1):
        d = resume.decide(True, False, ["2n1g run 1"], surveys, me, "T")
        assert (d.reuse, d.replace) == ([], [])
        assert d.problem.startswith(
            "RESUME=1: T holds runs of this sweep made with another setup "
            "(kept run -> this sweep): node 1: 2n1g run 1: train.steps 30 "
            "-> 60; keeping them would mix")


def test_an_ok_run_whose_log_names_no_command_is_not_kept(tmp_path):
    _tree_run(tmp_path, 1)
    (tmp_path / "rn50_b4_fp32_1.log").write_text("a log without header\n")
    assert resume.survey([_run(tmp_path, 1)])["1n1g run 1"].startswith(
        f"ok, {resume.OTHER_SETUP}: its log ")


def test_a_node_started_alone_says_its_tree_refuses_before_waiting(
        tmp_path):
    """Node 0 of a two-node re-run, started alone, with its run 1 ok in
    its tree and neither RESUME nor OVERWRITE: before waiting at the
    barrier it says that the meeting will refuse the sweep (exit 6)."""
    _tree_run(tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4" /
              "2n1g", 1)
    w0, w1, barrier = free_ports(3)
    out = script("two", tmp_path, "4", "fp32", "1", "--python",
                 _fake(tmp_path, "ok"), timeout=60, **dict(
                     RUN_DEFAULTS, NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}",
                     TASK_INDEX="0", BARRIER_PORT=str(barrier),
                     BARRIER_TIMEOUT="2"))
    assert out.returncode == exit_status.BARRIER_TIMEOUT, out.stderr
    note, _, rest = out.stdout.partition("note: this node's log tree "
                                         "already refuses the sweep")
    assert rest.startswith(f" (exit {exit_status.LOGS_IN_USE} once the "
                           "nodes meet): "), out.stdout
    assert "already holds runs of this sweep: 2n1g run 1 (ok" in rest, rest


def test_a_dry_run_notes_what_a_real_run_does_with_the_old_runs(tmp_path):
    """A tree holding this sweep's runs: the dry run exits 0 and notes
    that a real run stops with exit 6 (naming RESUME=1 and OVERWRITE=1),
    or what RESUME=1 keeps / OVERWRITE=1 replaces; nothing is touched."""
    assert _sweep(tmp_path, test_num="2").returncode == 0
    case = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4" / "1n1g"
    before = snapshot(case)
    notes = {}
    for knob in ("", "RESUME", "OVERWRITE"):
        out = _sweep(tmp_path, test_num="2", DRY_RUN="1",
                     **({knob: "1"} if knob else {}))
        assert out.returncode == 0, out.stdout + out.stderr
        notes[knob] = [line for line in out.stdout.splitlines()
                       if "a real run" in line]
    (refused,) = notes[""]
    assert "already holds runs of this sweep: 1n1g run 1 (ok), 1n1g run 2 " \
        "(ok); nothing was touched. Re-run with RESUME=1" in refused
    assert "or OVERWRITE=1" in refused
    assert refused.endswith("; a real run stops here (exit 6)")
    assert notes["RESUME"] == ["[launch] note: RESUME=1: a real run keeps "
                               "1n1g run 1, 1n1g run 2 (status ok) and "
                               "nothing to run"]
    assert notes["OVERWRITE"] == ["[launch] note: OVERWRITE=1: a real run "
                                  "replaces 1n1g run 1, 1n1g run 2 once "
                                  "every run is ok"]
    assert snapshot(case) == before


# -- the suite's version, and a config file by its contents (F2, F7) --


def _versioned_run(folder, i, suite):
    """_tree_run whose log header names the suite that made it (None: an
    old log, written before the header named it)."""
    _tree_run(folder, i)
    if suite is not None:
        log = folder / f"rn50_b4_fp32_{i}.log"
        log.write_text(f"# command: {COMMAND.format(i=i)}\n"
                       f"# official_bench: {suite}\nold log {i}\n")
    return _run(folder, i)


def test_a_run_kept_from_another_suite_version_is_another_setup(
        tmp_path, monkeypatch):
    monkeypatch.setattr(host_env, "suite", lambda: "0.2.0 (git bbbbbbb)")
    runs = [_versioned_run(tmp_path, 1, "0.1.0 (git aaaaaaa)"),
            _versioned_run(tmp_path, 2, "0.2.0 (git bbbbbbb)")]
    survey = resume.survey(runs)
    assert survey == {
        "1n1g run 1": f"ok, {resume.OTHER_SETUP}: official_bench 0.1.0 "
                      "(git aaaaaaa) -> 0.2.0 (git bbbbbbb)",
        "1n1g run 2": "ok"}
    d = resume.decide(True, False, ["1n1g run 1", "1n1g run 2"],
                      {0: survey}, 0, "T")
    assert d.problem.startswith(
        "RESUME=1: T holds runs of this sweep made with another setup (kept "
        "run -> this sweep): 1n1g run 1: official_bench 0.1.0 (git aaaaaaa) "
        "-> 0.2.0 (git bbbbbbb); keeping them would mix two setups")
    assert "Re-run with the settings (and the official_bench version) of " \
        "those runs, with OVERWRITE=1" in d.problem
    assert resume.version_notes(runs, ["1n1g run 2"]) == []


def test_a_run_whose_log_names_no_version_is_kept_with_a_note(
        tmp_path, monkeypatch):
    monkeypatch.setattr(host_env, "suite", lambda: "0.2.0 (git bbbbbbb)")
    runs = [_versioned_run(tmp_path, 1, None),
            _versioned_run(tmp_path, 2, "0.2.0 (git bbbbbbb)")]
    assert resume.survey(runs) == {"1n1g run 1": "ok", "1n1g run 2": "ok"}
    assert resume.version_notes(runs, ["1n1g run 1", "1n1g run 2"]) == [
        "RESUME=1 keeps 1n1g run 1, made by official_bench unknown (before "
        "the log header named the suite's version); this sweep runs "
        "official_bench 0.2.0 (git bbbbbbb): if the suite changed since, "
        "the case mixes two versions (OVERWRITE=1 runs them all again)"]
    monkeypatch.setattr(host_env, "suite", lambda: "0.2.0 (git bbb+dirty)")
    dirty = _versioned_run(tmp_path / "d", 3, "0.2.0 (git bbb+dirty)")
    assert resume.survey([dirty]) == {"1n1g run 3": "ok"}
    assert resume.version_notes([dirty], ["1n1g run 3"]) == [
        "RESUME=1 keeps 1n1g run 3, made by official_bench 0.2.0 (git "
        "bbb+dirty) as this sweep is: uncommitted changes on both sides, "
        "which may differ"]


def test_a_config_file_is_compared_by_its_contents(tmp_path):
    """The same YAML at another path (a new checkout beside the old one)
    is the same setup; other contents are named as such; a file that is
    gone is compared by its path."""
    old, new, other = (tmp_path / n for n in ("old.yaml", "new.yaml",
                                               "other.yaml"))
    old.write_text("train:\n  steps: 30\n")
    new.write_text("train:\n  steps: 30\n")
    other.write_text("train:\n  steps: 60\n")

    def argv(config):
        return ["py", "-m", "t", f"--config_file={config}", "--model_dir=m"]
    assert resume.command_difference(argv(old), argv(new)) is None
    assert resume.command_difference(argv(old), argv(other)) == (
        f"command --config_file={old} -> --config_file={other} (its "
        "contents differ)")
    gone = tmp_path / "gone.yaml"
    assert resume.command_difference(argv(gone), argv(new)) == (
        f"command --config_file={gone} -> --config_file={new}")
    assert resume.command_difference(argv(gone), argv(gone)) is None


def test_resume_refuses_a_run_of_another_suite_version_and_notes_an_old_log(
        tmp_path):
    """The launcher's header names the suite; a kept run whose header names
    another version stops RESUME=1 (exit 6) naming both, nothing touched;
    one whose header names none (an older launcher) is kept, with a
    note naming this sweep's version."""
    assert _sweep(tmp_path, test_num="2").returncode == 0
    case = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4" / "1n1g"
    first, second = (case / f"rn50_b4_fp32_{i}.log" for i in (1, 2))
    lines = first.read_text().splitlines(keepends=True)
    (suite_line,) = [x for x in lines if x.startswith("# official_bench: ")]
    now = suite_line[len("# official_bench: "):].strip()
    assert now == host_env.suite()
    first.write_text("".join(x if x != suite_line else
                             "# official_bench: 0.0.1 (git 0000000)\n"
                             for x in lines))
    before = snapshot(case)
    out = _sweep(tmp_path, test_num="2", RESUME="1")
    assert out.returncode == exit_status.LOGS_IN_USE, out.stdout + out.stderr
    assert "(kept run -> this sweep): 1n1g run 1: official_bench 0.0.1 " \
        f"(git 0000000) -> {now}; keeping them would mix" in out.stderr
    assert snapshot(case) == before
    first.write_text("".join(x for x in lines if x != suite_line))
    out = _sweep(tmp_path, test_num="3", RESUME="1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[launch] note: RESUME=1 keeps 1n1g run 1, made by " \
        f"official_bench {resume.UNVERSIONED}; this sweep runs " \
        f"official_bench {now}: if the suite" in out.stdout
    assert "keeps 1n1g run 2" not in out.stdout or now.endswith("+dirty)")
    assert suite_line in second.read_text()


def test_a_config_file_edited_in_place_since_the_run_is_another_setup(
        tmp_path):
    """The header records the --config_file's sha256 as the run started:
    the same path with other contents now is another setup, named; the
    same contents (or a log from before the header recorded it) pass."""
    config = tmp_path / "c.yaml"
    config.write_text("train:\n  steps: 30\n")
    argv = ["py", "-m", "t", f"--config_file={config}", "--model_dir=m"]
    log = tmp_path / "run.log"
    log.write_text(f"# command: {' '.join(argv)}\n"
                   f"{one_run.CONFIG_LINE}{one_run.config_digest(argv)}\n")
    assert resume.config_edited(str(log), argv) is None
    before = one_run.config_digest(argv)
    config.write_text("train:\n  steps: 60\n")
    assert resume.config_edited(str(log), argv) == (
        f"--config_file {config}: its contents changed since the kept run "
        f"started (sha256 {before[:12]} -> "
        f"{one_run.config_digest(argv)[:12]})")
    log.write_text(f"# command: {' '.join(argv)}\n")  # an older header
    assert resume.config_edited(str(log), argv) is None
