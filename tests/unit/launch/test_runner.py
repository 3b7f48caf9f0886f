"""launch/runner.py: the sweep on this node, made with all it needs (plan,
link to the other nodes, the runs RESUME=1 keeps, what to do at the end)
and run with stand-in trainers (real processes): ON_FAILURE, reused runs,
the end callback, a node that cannot write, a node whose peers' launcher
went away while it ran, and two nodes meeting through a real barrier on
127.0.0.1 (each launcher a thread here; the run scripts' tests run them
as processes)."""

import os

import pytest

from official_bench.contracts import exit_status as es
from official_bench.launch.barrier import BarrierError
from official_bench.launch.runner import Runner
from support.launch_stand_in import two_launchers
from support.small_disk import PAGE, leave_free, small_tmpfs


def _logs(plan):
    return [os.path.exists(r.log_path) for r in plan.runs]


def test_every_run_ok_ends_ok_and_says_so(plan_of, capsys):
    plan = plan_of("ok", test_num=2)
    ended = []
    runner = Runner(plan, on_end=ended.append)
    assert runner.run_all() == es.OK
    assert ended == [True]
    assert _logs(plan) == [True, True]
    assert [v.ok for _, v in runner.report.results] == [True, True]
    out = capsys.readouterr().out
    assert "[launch] 1n1g run 2: ok" in out
    assert "done: 2 of 2 run(s) ok on every node (2 planned)" in out


def test_on_failure_stop_ends_the_sweep_after_the_failed_run(plan_of,
                                                              capsys):
    plan = plan_of("fail", test_num=3, on_failure="stop")
    ended = []
    assert Runner(plan, on_end=ended.append).run_all() == es.FAILED
    assert ended == [False]
    assert _logs(plan) == [True, False, False]
    out = capsys.readouterr().out
    assert "1n1g run 1: FAILED (exit 1): error: stand-in trainer failed" \
        in out
    assert "ON_FAILURE=stop: stopping after 1n1g run 1 (on every node)" in out


class _GoneAfterStart:
    """A link whose other launcher went away during the run: the start
    round met, the end round's wait given up."""

    def meet(self, round_name, payload, timeout, stale_after=None):
        if round_name.startswith("end "):
            raise BarrierError("node 0 (127.0.0.1) stopped answering",
                               missing=[0])
        return {}

    lost_after = 32.0

    def peek(self, round_name):
        return None

    def lost(self, round_name):
        return None


def test_a_peer_launcher_gone_after_the_run_leaves_this_nodes_line(
        plan_of, capsys):
    plan = plan_of("fail", test_num=2)
    runner = Runner(plan, link=_GoneAfterStart())
    with pytest.raises(BarrierError):
        runner.run_all()
    out = capsys.readouterr().out
    assert "1n1g run 1: FAILED (exit 1): error: stand-in trainer failed" \
        in out
    assert [run.name for run, _ in runner.report.results] == ["1n1g run 1"]
    assert _logs(plan) == [True, False]


def test_on_failure_continue_runs_the_others(plan_of):
    plan = plan_of("fail", test_num=3)
    assert Runner(plan).run_all() == es.FAILED
    assert _logs(plan) == [True, True, True]


def test_reused_runs_are_kept_not_run(plan_of, capsys):
    plan = plan_of("ok", test_num=2)
    runner = Runner(plan, reused=frozenset({"1n1g run 1"}))
    assert runner.run_all() == es.OK
    assert _logs(plan) == [False, True]  # run 1 was not started
    out = capsys.readouterr().out
    assert "1n1g run 1: ok (reused: kept from the log tree)" in out
    assert "reused (RESUME=1, status ok): 1n1g run 1" in out
    assert "1n1g run 1: starting" not in out


def test_a_node_that_cannot_write_stops_the_sweep_not_writable(
        tmp_path, plan_of, capsys):
    with small_tmpfs(tmp_path / "logs", 16 * PAGE):
        leave_free(str(tmp_path / "logs"), 0)
        plan = plan_of("ok", test_num=2)
        ended = []
        assert Runner(plan, on_end=ended.append).run_all() == \
            es.NOT_WRITABLE
    assert ended == [False]
    out = capsys.readouterr()
    assert "stopping the sweep after 1n1g run 1 (on every node): this node " \
        "cannot write its files" in out.out
    assert "1n1g run 2: starting" not in out.out
    last = out.err.strip().splitlines()[-1]
    assert last.startswith("[launch] error: cannot write") and \
        "no space left on the device" in last


def test_two_nodes_share_each_runs_verdict_through_the_barrier(tmp_path):
    """Node 1's trainer fails; node 0's, still running, is stopped as
    aborted (its runner peeks at the "end" round); both sweeps end FAILED
    with the same verdict."""
    results, runners = two_launchers(tmp_path, ("sleep", "fail"))
    assert results == {0: es.FAILED, 1: es.FAILED}
    verdicts = [runners[k].report.results[0][1] for k in (0, 1)]
    assert verdicts[0] == verdicts[1]
    mine, theirs = verdicts[0].outcomes[0], verdicts[0].outcomes[1]
    assert mine.status.value == "aborted"
    assert mine.reason.startswith("stopped because node 1 (127.0.0.1:")
    assert theirs.status.value == "failed" and theirs.rc == es.FAILED
