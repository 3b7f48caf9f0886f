"""One log, one writer (issue 30 §2): a launcher claims the case directories
it writes; a second launcher on the same case stops before training; a
finished run is never overwritten without RESUME=1 or OVERWRITE=1. A claim
whose holder is gone, a zombie or another program under its pid is stale
(issue 45 §5)."""

import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from official_bench.contracts import exit_status
from official_bench.launch import claims as claims_lib
from support.helpers import extract_tables
from support.log_tree_runs import bz4, finish, snapshot, start, wait_for
from support.run_scripts import PY, failures

NAME = claims_lib.claim_name(4, "fp32")


def _count(text, mark):
    return sum(1 for line in text.splitlines() if mark in line)


@pytest.mark.slow
def test_second_launcher_on_same_case_stops(tmp_path):
    """A second launcher on the tree a first one is training into stops
    before training, with one line naming the first and the way out; the
    first finishes and its log holds exactly one run."""
    first = start(tmp_path, "1")
    wait_for(first, "1n1g run 1: starting")
    second = start(tmp_path, "1", PYTHON_CHECK_TIMEOUT="0")
    results = [finish(second), finish(first)]
    codes = sorted(rc for rc, _ in results)
    assert codes == [exit_status.OK, exit_status.LOGS_IN_USE], \
        failures(tmp_path, "\n".join(out for _, out in results))
    winner, loser = sorted(results, key=lambda r: r[0])
    errors = [line for line in loser[1].splitlines() if "error:" in line]
    assert len(errors) == 1, loser[1]
    assert re.search(
        r"is in use by another launcher: run_single_node.sh on host "
        + re.escape(socket.gethostname()) + r", pid \d+, started "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d; wait for it to end or use another "
        r"LOG_DIR \(if it is gone, e.g. its node rebooted, remove .*"
        + re.escape(NAME) + r"\)", errors[0]), errors[0]
    assert "run 1: starting" not in loser[1]
    log = (bz4(tmp_path) / "1n1g" / "rn50_b4_fp32_1.log").read_text()
    assert _count(log, "TimeHistory:") == 3
    assert _count(log, "official_bench: run finished") == 1
    assert not list(bz4(tmp_path).rglob("*.claim"))  # released


def test_stale_claim_on_this_host_is_taken_over(tmp_path):
    dead = 2 ** 22 + 12345  # above pid_max's default: no such process
    (tmp_path / NAME).write_text(json.dumps(
        {"host": socket.gethostname(), "pid": dead, "started": time.time(),
         "script": "run_single_node.sh", "session": "old"}))
    held = claims_lib.Claims("run_single_node.sh", "new")
    held.take(str(tmp_path), NAME)
    assert held.notes and f"pid {dead}" in held.notes[0]
    assert json.loads((tmp_path / NAME).read_text())["session"] == "new"
    held.release()
    assert not (tmp_path / NAME).exists()


def test_claim_of_another_host_is_not_guessed_stale(tmp_path):
    (tmp_path / NAME).write_text(json.dumps(
        {"host": "other-node", "pid": 4242, "started": 0.0,
         "script": "run_two_node.sh", "session": "x"}))
    held = claims_lib.Claims("run_single_node.sh", "new")
    with pytest.raises(claims_lib.ClaimError) as e:
        held.take(str(tmp_path), NAME)
    text = str(e.value)
    assert "run_two_node.sh on host other-node, pid 4242, started" in text
    assert f"remove {tmp_path / NAME}" in text
    held.release()
    assert (tmp_path / NAME).exists()  # not ours: left alone


def test_release_leaves_a_claim_another_launcher_took_over(tmp_path):
    held = claims_lib.Claims("run_single_node.sh", "mine")
    held.take(str(tmp_path / "new" / "case"), NAME)
    path = tmp_path / "new" / "case" / NAME
    record = json.loads(path.read_text())
    path.write_text(json.dumps(dict(record, session="theirs")))
    held.release()
    assert path.exists()


def test_refused_launcher_leaves_no_directory(tmp_path):
    """Folders a claim created are removed again when no run wrote there."""
    held = claims_lib.Claims("run_single_node.sh", "mine")
    held.take(str(tmp_path / "logs" / "a" / "b"), NAME)
    held.release()
    assert not (tmp_path / "logs").exists()


def _tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_two_launchers_that_run_nothing_leave_the_tree_as_found(tmp_path):
    """Two launchers on one LOG_DIR (two nodes on one machine, BATCH 4 and
    8) share the folders the first made; neither runs. Whichever ends last
    removes what either made, the first's LOG_DIR too; a refused one
    removes nothing the other still holds; a user's folder stays."""
    user = tmp_path / "user"
    user.mkdir()
    logs = user / "logs"
    bz4 = logs / "tensorflow" / "resnet50" / "bz4" / "2n1g"
    bz8 = logs / "tensorflow" / "resnet50" / "bz8" / "2n1g"
    for first_ends_first in (True, False):
        first = claims_lib.Claims("run_two_node.sh", "first")
        first.take(str(bz4), NAME, str(logs))
        second = claims_lib.Claims("run_two_node.sh", "second")
        second.take(str(bz8), claims_lib.claim_name(8, "fp32"), str(logs))
        refused = claims_lib.Claims("run_two_node.sh", "refused")
        with pytest.raises(claims_lib.ClaimError):
            refused.take(str(bz4), NAME, str(logs))
        refused.release()
        assert (bz4 / NAME).exists()
        ends = (first, second) if first_ends_first else (second, first)
        ends[0].release()
        assert _tree(tmp_path) != ["user"]  # the other still holds its own
        ends[1].release()
        assert _tree(tmp_path) == ["user"], first_ends_first


def test_a_claim_is_made_again_if_an_ending_launcher_removed_its_folder(
        tmp_path, monkeypatch):
    """Between making the case folder and creating the claim, another
    launcher's end may remove the folder (empty): it is made again."""
    folder = tmp_path / "logs" / "bz4" / "1n1g"
    held = claims_lib.Claims("run_single_node.sh", "mine")
    create = held._create
    calls = []

    def racing(path, top=None):
        if not calls:  # the first try: the folder is gone
            os.rmdir(folder)
        calls.append(path)
        return create(path, top)
    monkeypatch.setattr(held, "_create", racing)
    held.take(str(folder), NAME, str(tmp_path / "logs"))
    assert (folder / NAME).exists() and len(calls) == 2


@pytest.mark.slow
def test_rerun_refused_then_overwrite_moves_aside(tmp_path):
    """A re-run into a tree that holds the runs is refused with nothing
    touched; OVERWRITE=1 moves the old files into .replaced-*/, which the
    extractor does not read."""
    rc, out = finish(start(tmp_path, "1"))
    assert rc == exit_status.OK, failures(tmp_path, out)
    root = bz4(tmp_path)
    before = snapshot(root)
    rc, out = finish(start(tmp_path, "1"))
    assert rc == exit_status.LOGS_IN_USE, out
    assert "already holds runs of this sweep: 1n1g run 1 (ok); nothing was " \
        "touched. Re-run with RESUME=1" in out
    assert "OVERWRITE=1" in out and "run 1: starting" not in out
    assert snapshot(root) == before

    rc, out = finish(start(tmp_path, "1", OVERWRITE="1"))
    assert rc == exit_status.OK, failures(tmp_path, out)
    moved = list((root / "1n1g").glob(".replaced-*"))
    assert len(moved) == 1, out
    assert f"moved the files of 1n1g run 1 aside into {moved[0]}" in out
    for name, (size, _, digest) in before.items():
        kept = moved[0] / os.path.basename(name)
        assert kept.stat().st_size == size, name
    assert sorted(p.name for p in moved[0].iterdir()) == [
        "rn50_b4_fp32_1.json", "rn50_b4_fp32_1.log",
        "rn50_b4_fp32_1.log.status.json"]
    table, _ = extract_tables(tmp_path, root, PY)
    assert table["1n1g"]["num_runs"] == 1
    assert table["1n1g"]["excluded"] == []


def test_live_pid_holds_unless_it_started_after_the_claim(tmp_path):
    """Same host, pid alive: held; unless that process started after the
    claim was written (the dead launcher's pid was reused)."""
    me = {"host": socket.gethostname(), "pid": os.getpid(),
          "script": "run_single_node.sh", "session": "old"}
    (tmp_path / NAME).write_text(json.dumps(dict(me, started=time.time())))
    held = claims_lib.Claims("run_single_node.sh", "new")
    with pytest.raises(claims_lib.ClaimError, match="in use by another"):
        held.take(str(tmp_path), NAME)
    (tmp_path / NAME).write_text(json.dumps(dict(me, started=0.0)))
    held.take(str(tmp_path), NAME)
    assert "took over the stale claim" in held.notes[0]
    held.release()


# -- a holder that is gone: a zombie, or another program (issue 45 §5) -----


def _claim_of(tmp_path, pid, **fields):
    record = {"host": socket.gethostname(), "pid": pid,
              "started": time.time(), "script": "run_single_node.sh",
              "session": "old", **fields}
    (tmp_path / NAME).write_text(json.dumps(record))


def _state(pid):
    return claims_lib.ProcStat.read(pid).state


def test_a_killed_holder_not_reaped_is_stale(tmp_path):
    """A zombie answers kill(pid, 0) as if alive; its claim is stale."""
    holder = subprocess.Popen(["sleep", "60"])
    try:
        _claim_of(tmp_path, holder.pid, proc_start=claims_lib.ProcStat.read(
            holder.pid).start_ticks)
        held = claims_lib.Claims("run_single_node.sh", "new")
        with pytest.raises(claims_lib.ClaimError, match="in use by another"):
            held.take(str(tmp_path), NAME)
        os.kill(holder.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _state(holder.pid) != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        held.take(str(tmp_path), NAME)  # not reaped: still a zombie
        assert _state(holder.pid) == "Z"
        [note] = held.notes
        assert f"run_single_node.sh on host {socket.gethostname()}, pid " \
            f"{holder.pid}, started " in note
        assert note.endswith("(its process is a zombie: killed, not reaped "
                             f"by its parent) on {tmp_path}")
        held.release()
    finally:
        holder.kill()
        holder.wait()


def test_another_program_under_the_claims_pid_is_stale(tmp_path):
    """The claim records its process's start time (/proc/<pid>/stat field
    22); a live process with that pid but another start is not the
    launcher."""
    mine = claims_lib.ProcStat.read(os.getpid()).start_ticks
    _claim_of(tmp_path, os.getpid(), proc_start=mine + 1)
    held = claims_lib.Claims("run_single_node.sh", "new")
    held.take(str(tmp_path), NAME)
    assert "(that pid is now another program)" in held.notes[0]
    record = json.loads((tmp_path / NAME).read_text())
    assert record["proc_start"] == mine and record["pid"] == os.getpid()
    held.release()
    # The same start time: the holder itself, alive.
    _claim_of(tmp_path, os.getpid(), proc_start=mine, started=0.0)
    with pytest.raises(claims_lib.ClaimError, match="in use by another"):
        claims_lib.Claims("run_single_node.sh", "new").take(str(tmp_path),
                                                           NAME)
