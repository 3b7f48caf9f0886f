"""An interrupted sweep resumes where it stopped (issue 30 §3): a 3-run
sweep stopped during run 2, then RESUME=1 runs 2 and 3, keeps run 1 as it
was, and the extractor counts 3 runs; on one node, and with 2 runs on two
loopback nodes (which agree on the runs to reuse through the barrier).
On one node, OVERWRITE=1 with TEST_NUM=1 then leaves the extractor exactly
one run. A launcher killed with SIGKILL, not reaped, holds no claim (issue
45 §5)."""

import signal
import socket
import subprocess
import time

import pytest

from official_bench.contracts import exit_status
from official_bench.launch.claims import ProcStat
from support.helpers import extract_tables, free_ports
from support.launch_cli import SCRIPTS, clean_env as bare_env, script
from support.launch_stand_in import stand_in
from support.log_tree_runs import bz4, finish, snapshot, start, wait_for
from support.run_scripts import PY, failures


def _stop_during_run_2(procs, case):
    """Lets run 1 finish and run 2 start on every node, then SIGTERMs the
    launchers (through `timeout`, which passes the signal on)."""
    for p in procs:
        wait_for(p, f"{case} run 2: starting")
    time.sleep(2)
    for p in procs:
        p.send_signal(signal.SIGTERM)
    return [finish(p) for p in procs]


def _kept(before, after, prefix):
    """Run 1's files, unchanged."""
    run1 = {k: v for k, v in before.items() if "_1." in k and
            k.startswith(prefix)}
    assert run1 and all(after.get(k) == v for k, v in run1.items()), \
        (run1, after)


def _check_resumed(out, case, node="", runs=3):
    assert "RESUME=1: keeping " + f"{case} run 1 (status ok)" in out, out
    assert f"RESUME=1: moved the files of {case} run 2 aside into" in out
    assert f"{case} run 1: {node}ok (reused: kept from the log tree)" in out
    for i in range(2, runs + 1):
        assert f"{case} run {i}: starting" in out
    assert f"done: {runs} of {runs} run(s) ok on every node" in out
    assert f"reused (RESUME=1, status ok): {case} run 1" in out


@pytest.mark.slow
def test_resume_after_a_stop_in_run_2_single_node(tmp_path):
    first = start(tmp_path, "3")
    [(rc, out)] = _stop_during_run_2([first], "1n1g")
    assert rc == exit_status.TERMINATED, out
    root = bz4(tmp_path)
    before = snapshot(root)
    assert "1n1g/rn50_b4_fp32_2.log" in before
    assert "1n1g/rn50_b4_fp32_2.log.status.json" not in before

    rc, out = finish(start(tmp_path, "3", RESUME="1"))
    assert rc == exit_status.OK, failures(tmp_path, out)
    _check_resumed(out, "1n1g")
    after = snapshot(root)
    _kept(before, after, "1n1g/rn50")
    moved = [k for k in after if "/.replaced-" in k]
    assert [k.rsplit("/", 1)[1] for k in moved] == ["rn50_b4_fp32_2.log"]
    table, _ = extract_tables(tmp_path, root, PY)
    assert table["1n1g"]["num_runs"] == 3 and table["1n1g"]["excluded"] == []

    # Issue 40 §2: OVERWRITE=1 TEST_NUM=1 over runs 1-3 leaves run 1 alone
    # where the extractor reads (runs 2-3 were read too, and mixed, before).
    rc, out = finish(start(tmp_path, "1", OVERWRITE="1"))
    assert rc == exit_status.OK, failures(tmp_path, out)
    assert "OVERWRITE=1: every run ok: moved the files of 1n1g run 1, 1n1g " \
        "run 2, 1n1g run 3 aside into" in out
    assert sorted(p.name for p in (root / "1n1g").glob("*.log")) == \
        ["rn50_b4_fp32_1.log"]
    table, _ = extract_tables(tmp_path, root, PY)
    assert table["1n1g"]["num_runs"] == 1 and table["1n1g"]["excluded"] == []


@pytest.mark.slow
@pytest.mark.multiworker
def test_resume_after_a_stop_in_run_2_two_nodes(tmp_path):
    w0, w1, b = free_ports(3)
    common = dict(NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}", BARRIER_PORT=b,
                  BARRIER_TIMEOUT=120, PEER_TIMEOUT=120)

    # Two runs (three on one node, above): the nodes agree to reuse run 1.
    def both(**knobs):
        return [start(tmp_path, "2", script="two", TASK_INDEX=k,
                      **common, **knobs) for k in (0, 1)]

    stopped = _stop_during_run_2(both(), "2n1g")
    assert [rc for rc, _ in stopped] != [0, 0], stopped
    root = bz4(tmp_path)
    before = snapshot(root)

    results = [finish(p) for p in both(RESUME="1")]
    outs = [out for _, out in results]
    assert [rc for rc, _ in results] == [0, 0], \
        failures(tmp_path, "\n".join(outs))
    for out in outs:
        _check_resumed(out, "2n1g", "this node: ", runs=2)
        assert "  2n1g run 1: node 0 ok, node 1 ok (reused)" in out
    after = snapshot(root)
    _kept(before, after, "2n1g/rn50")
    _kept(before, after, "2n1g/node1/rn50")
    table, _ = extract_tables(tmp_path, root, PY)
    assert table["2n1g"]["num_runs"] == 2 and table["2n1g"]["excluded"] == []


def test_resume_right_after_kill_9_of_a_launcher_not_reaped(tmp_path):
    """Issue 45 §5: a launcher killed with SIGKILL is a zombie until its
    parent (here: this test, which does not wait for it yet; in a
    container without an init: never) reaps it. Its claim is stale at
    once: RESUME=1 takes it over, saying why, and runs (stand-in
    trainers: no TensorFlow)."""
    log = bz4(tmp_path) / "1n1g" / "rn50_b4_fp32_1.log"
    first = subprocess.Popen(
        ["bash", SCRIPTS["single"], "4", "fp32", "1", "--python",
         stand_in(tmp_path, "sleep")], cwd=tmp_path,
        env=bare_env(tmp_path, DEVICE="cpu"), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not log.exists() or "stand-in trainer sleeping" not in \
                log.read_text():
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        first.send_signal(signal.SIGKILL)  # bash exec'd the launcher
        while ProcStat.read(first.pid).state != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        out = script("single", tmp_path, "4", "fp32", "1", "--python",
                     stand_in(tmp_path, "ok"), DEVICE="cpu", RESUME="1")
        assert ProcStat.read(first.pid).state == "Z"  # still not reaped
    finally:
        first.kill()
        first.wait()
    assert out.returncode == exit_status.OK, out.stdout + out.stderr
    assert f"took over the stale claim of run_single_node.sh on host " \
        f"{socket.gethostname()}, pid {first.pid}, started " in out.stdout
    assert "(its process is a zombie: killed, not reaped by its parent)" in \
        out.stdout
    assert "RESUME=1: moved the files of 1n1g run 1 aside into" in out.stdout
    assert "1n1g run 1: ok" in out.stdout
    assert "stand-in trainer ok" in log.read_text()
