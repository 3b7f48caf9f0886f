"""A two-node sweep where one node's launcher is stopped by a signal while
the other's trainer runs (a stand-in trainer, a real process; the stopped
node runs the launcher's own sweep code, sweep_start.run_with_claims, its
signal raised where its trainer would run). The stopped launcher tells the
barrier it leaves, so the other node stops its trainer at its next peek
and ends with one line naming that node and the signal, exit 75, within
seconds. Before, it waited 30 s + KILL_AFTER of silence."""

import signal
import threading
import time

import pytest

from official_bench.contracts import exit_status as es
from official_bench.launch import barrier as barrier_lib, sweep_start
from official_bench.launch.barrier import BarrierError
from official_bench.launch.claims import Claims
from official_bench.launch.node_link import NodeLink
from official_bench.launch.runner import Interrupted, Runner
from support.launch_stand_in import session_stamp, two_node_plans


class _SignalledRunner(Runner):
    """A Runner whose launcher gets SIGTERM as its trainer would start."""

    def execute(self, run):
        raise Interrupted(signal.SIGTERM)


def _signalled_sweep(plan, box):
    """The stopped node: the launcher's sweep, in a thread; its status."""
    claims = Claims(plan.settings.script, f"test-{plan.index}")
    try:
        box["status"] = sweep_start.run_with_claims(
            plan, session_stamp(plan), None, claims)
    finally:
        claims.release()


@pytest.fixture
def signalled(monkeypatch):
    monkeypatch.setattr(sweep_start, "Runner", _SignalledRunner)


def _other_node(plan, link, run):
    """The node that stays: hello, then its sweep; (BarrierError, seconds
    from the sweep's start, its Runner)."""
    link.hello(session_stamp(plan))
    runner = Runner(plan, link)
    start = time.monotonic()
    with pytest.raises(BarrierError) as e:
        runner.run_all()
    return e.value, time.monotonic() - start, runner


def test_node1_stopped_by_a_signal_tells_node0_at_once(
        tmp_path, signalled, capsys):
    plans = two_node_plans(tmp_path)
    run = plans[0].runs[0].name
    node0 = NodeLink.open(plans[0])
    box = {}
    t = threading.Thread(target=_signalled_sweep, args=(plans[1], box))
    t.start()
    try:
        error, took, runner = _other_node(plans[0], node0, run)
    finally:
        t.join(30)
        node0.close()
    assert box["status"] == es.by_signal(signal.SIGTERM) == 143
    address = plans[0].nodeset.nodes[1].address
    assert str(error) == (f"at 'end {run}': node 1 ({address}) left the "
                          "sweep: interrupted by SIGTERM")
    assert error.missing == [1] and not error.fatal  # exit 75
    assert took < 15, took  # a peek (2 s), not 30 s + KILL_AFTER
    [(_, verdict)] = runner.report.results
    outcome = verdict.outcomes[0]
    assert outcome.status.value == "aborted"
    assert outcome.reason == (f"stopped because node 1 ({address}) left "
                              "the sweep: interrupted by SIGTERM")
    err = capsys.readouterr().err
    assert "interrupted by SIGTERM; no run started; told node 0's " \
        "barrier" in err
    assert "not heard from" not in err


def test_node0_stopped_by_a_signal_tells_node1_before_its_barrier_goes(
        tmp_path, signalled, monkeypatch, capsys):
    # Node 1 peeks every 2 s; a generous linger keeps a busy machine from
    # missing it (the launcher's is barrier.TELL_LINGER).
    monkeypatch.setattr(barrier_lib, "TELL_LINGER", 8.0, raising=False)
    plans = two_node_plans(tmp_path)
    run = plans[1].runs[0].name
    box = {}
    t = threading.Thread(target=_signalled_sweep, args=(plans[0], box))
    t.start()
    node1 = NodeLink.open(plans[1])
    try:
        error, took, runner = _other_node(plans[1], node1, run)
    finally:
        t.join(30)
        node1.close()
    assert box["status"] == 143
    address = plans[1].nodeset.nodes[0].address
    assert str(error) == (f"at 'end {run}': node 0 ({address}) left the "
                          "sweep: interrupted by SIGTERM")
    assert error.missing == [0] and not error.fatal  # exit 75
    assert took < 15, took
    [(_, verdict)] = runner.report.results
    assert verdict.outcomes[1].status.value == "aborted"
    assert verdict.outcomes[1].reason == (
        f"stopped because node 0 ({address}) left the sweep: interrupted "
        "by SIGTERM")
    err = capsys.readouterr().err
    assert "interrupted by SIGTERM; no run started; told the other " \
        "nodes" in err
    assert "does not answer" not in err  # no wait for a gone barrier
