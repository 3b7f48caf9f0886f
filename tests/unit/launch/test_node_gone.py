"""A two-node sweep where one node's launcher vanishes while the other's
trainer runs (a stand-in trainer, a real process; the vanished node is its
barrier side on 127.0.0.1, which stops mid-run). Node 1 without node 0:
it says once that node 0's barrier does not answer and for how long it
waits, stops its trainer after that wait and ends with one line naming
node 0's barrier. Node 0 without node 1: it stops its trainer once node 1
has been silent that long. Before, each waited for its trainer's own peer
timeout (or RUN_TIMEOUT), then once more at the "end" round."""

import threading
import time

import pytest

from official_bench.launch import node_link
from official_bench.launch.barrier import BarrierError
from official_bench.launch.node_link import NodeLink
from official_bench.launch.runner import Runner
from support.launch_stand_in import session_stamp, two_node_plans


def test_node1_stops_its_run_when_node0s_barrier_goes_away(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(node_link, "LOST_AFTER", 1.0)  # + KILL_AFTER=2
    plans = two_node_plans(tmp_path)
    run = plans[1].runs[0].name
    node0 = NodeLink.open(plans[0])

    def node0_until_the_run_starts():
        node0.hello(session_stamp(plans[0]))
        node0.meet(f"start {run}", {"ready": True}, 60)
        node0.close()  # its launcher is gone: the barrier stops answering

    t = threading.Thread(target=node0_until_the_run_starts)
    t.start()
    node1 = NodeLink.open(plans[1])
    try:
        node1.hello(session_stamp(plans[1]))
        runner = Runner(plans[1], node1)
        start = time.monotonic()
        with pytest.raises(BarrierError, match=r"at 'end 2n1g run 1': the "
                           r"barrier on node 0 \(127\.0\.0\.1:\d+\) at "
                           r"127\.0\.0\.1:\d+ stopped answering") as e:
            runner.run_all()
        took = time.monotonic() - start
    finally:
        node1.close()
        t.join(30)
    assert e.value.missing == [0]
    assert took < 20, took  # the stand-in sleeps 60 s
    [(_, verdict)] = runner.report.results
    outcome = verdict.outcomes[1]
    assert outcome.status.value == "aborted"
    assert outcome.reason.startswith("stopped because the barrier on node 0")
    err = capsys.readouterr().err
    told = [ln for ln in err.splitlines() if "does not answer" in ln]
    assert len(told) == 1, err
    assert f"does not answer at 'end {run}'" in told[0]
    assert "giving up on its launcher after 3 s without an answer" in told[0]


def test_node0_stops_its_run_when_node1s_launcher_goes_silent(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(node_link, "LOST_AFTER", 1.0)  # + KILL_AFTER=2
    monkeypatch.setattr(node_link, "SILENT_SAY", 1.0)
    plans = two_node_plans(tmp_path)
    run = plans[0].runs[0].name
    node0 = NodeLink.open(plans[0])

    def node1_until_the_run_starts():
        # Node 1's launcher meets, then is gone: it never peeks again.
        node1 = NodeLink.open(plans[1])
        node1.hello(session_stamp(plans[1]))
        node1.meet(f"start {run}", {"ready": True}, 60)

    t = threading.Thread(target=node1_until_the_run_starts)
    t.start()
    try:
        node0.hello(session_stamp(plans[0]))
        runner = Runner(plans[0], node0)
        start = time.monotonic()
        with pytest.raises(BarrierError, match=r"at 'end 2n1g run 1': node 1 "
                           r"\(127\.0\.0\.1:\d+\) has not been heard from"):
            runner.run_all()
        took = time.monotonic() - start
    finally:
        t.join(30)
        node0.close()
    assert took < 20, took  # the stand-in sleeps 60 s
    [(_, verdict)] = runner.report.results
    outcome = verdict.outcomes[0]
    assert outcome.status.value == "aborted"
    assert outcome.reason.startswith(
        "stopped because node 1 (127.0.0.1:") and outcome.reason.endswith(
            "(its launcher seems to have stopped)"), outcome.reason
    err = capsys.readouterr().err
    assert f"barrier: waiting at 'end {run}' for node 1 (127.0.0.1:" in err
    assert "giving up on its launcher after 3 s of silence" in err
