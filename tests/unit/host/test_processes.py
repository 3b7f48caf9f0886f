"""host/processes.py: the one stop of a process group (SIGTERM, a grace,
then SIGKILL) that the launcher's trainers and the doctor's checks share,
on real child processes."""

import signal
import subprocess
import sys
import time

from official_bench.host import processes

IGNORES_TERM = ("import signal, time; signal.signal(signal.SIGTERM, "
                "signal.SIG_IGN); print('up', flush=True); time.sleep(120)")
# Starts a grandchild in its own process group and prints its pid.
WITH_CHILD = ("import subprocess, sys, time; c = subprocess.Popen([sys."
              "executable, '-c', 'import time; time.sleep(120)']); "
              "print(c.pid, flush=True); time.sleep(120)")


def start(code):
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    return p, p.stdout.readline().strip()  # ready once it printed


def gone(pid, within=10.0):
    """The process ended (a zombie nobody reaped yet counts as ended)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def test_sigterm_ignored_means_sigkill_after_the_grace():
    p, line = start(IGNORES_TERM)
    assert line == "up"
    began = time.monotonic()
    processes.stop_groups([p], grace=0.5)
    took = time.monotonic() - began
    assert p.returncode == -signal.SIGKILL
    assert 0.4 < took < 10


def test_sigterm_reaches_the_whole_group_without_waiting_the_grace():
    p, child = start(WITH_CHILD)
    began = time.monotonic()
    processes.stop_groups([p], grace=30)
    assert p.returncode == -signal.SIGTERM
    assert time.monotonic() - began < 10  # did not sit out the grace
    assert gone(int(child))  # its child was in the group too


def test_all_groups_get_sigterm_at_once():
    """Two that ignore SIGTERM share one grace, not one each."""
    procs = [start(IGNORES_TERM)[0] for _ in range(2)]
    began = time.monotonic()
    processes.stop_groups(procs, grace=2.0)
    assert [p.returncode for p in procs] == [-signal.SIGKILL] * 2
    assert time.monotonic() - began < 3.5  # one after the other: 4 s


def test_ended_processes_and_gone_groups_are_left_alone():
    p = subprocess.Popen([sys.executable, "-c", "pass"],
                         start_new_session=True)
    p.wait()
    processes.stop_groups([p], grace=5)  # nothing to stop, no error
    assert p.returncode == 0
    processes.signal_group(p.pid, signal.SIGKILL)  # gone: no error



# Counts the SIGTERMs it gets (each delivery writes one byte to the
# wake-up fd), prints the count 1 s after the first, then exits.
COUNTS_TERM = (
    "import os, signal, threading, time\n"
    "r, w = os.pipe(); os.set_blocking(w, False)\n"
    "signal.signal(signal.SIGTERM, lambda *a: None)\n"
    "signal.set_wakeup_fd(w)\n"
    "threading.Thread(target=lambda: [time.sleep(0.001) for _ in "
    "iter(int, 1)], daemon=True).start()\n"
    "print('up', flush=True)\n"
    "got = os.read(r, 64); time.sleep(1.0)\n"
    "os.set_blocking(r, False)\n"
    "try:\n    got += os.read(r, 64)\nexcept BlockingIOError:\n    pass\n"
    "print(len(got), flush=True)\n")


def _under_timeout(code):
    p = subprocess.Popen(["timeout", "-k", "30s", "600s", sys.executable,
                          "-c", code], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    assert p.stdout.readline().strip() == "up"
    return p


def test_child_of_finds_the_command_timeout_runs():
    p = _under_timeout(IGNORES_TERM)
    try:
        command = processes.child_of(p.pid)
        with open(f"/proc/{command}/cmdline") as f:
            assert f.read().split("\0")[:2] == [sys.executable, "-c"]
        assert processes._children_by_scan(p.pid) == [command]
        assert processes.child_of(command) is None  # no child of its own
    finally:
        processes.signal_group(p.pid, signal.SIGKILL)
        p.wait()


def test_a_term_to_the_command_alone_reaches_it_once():
    """What the launcher does under GNU timeout: signalled itself, timeout
    passes a SIGTERM on twice (to its command, then to the group), and
    now and then (2 in 30 here) both copies arrive."""
    p = _under_timeout(COUNTS_TERM)
    try:
        time.sleep(0.2)
        processes.stop_groups([p], grace=20, term=lambda q: processes
                              .signal_leader(processes.child_of(q.pid),
                                             signal.SIGTERM))
    finally:  # nothing left behind, even when the stop failed
        processes.signal_group(p.pid, signal.SIGKILL)
        p.wait()
    assert p.stdout.read().split() == ["1"]
    assert p.returncode == 0  # the command's own exit, through timeout


def test_a_term_that_does_not_stop_it_gets_its_group_killed():
    p, child = start("import signal; signal.signal(signal.SIGTERM, "
                     "signal.SIG_IGN); " + WITH_CHILD)
    processes.stop_groups([p], grace=0.5, term=lambda q: processes
                          .signal_leader(q.pid, signal.SIGTERM))
    assert p.returncode == -signal.SIGKILL
    assert gone(int(child))  # SIGKILL went to the whole group
