"""Stopping a child that runs in its own process group; a child that
dies with its parent.

The launcher's trainers and the doctor's checks each start in a session of
their own (start_new_session), so a stop reaches what they started too
(`timeout`'s trainer, horovodrun's ranks). TensorFlow may ignore SIGTERM
while it runs ops, hence the one stop both use: SIGTERM, a grace, SIGKILL.
The SIGTERM may go to one process of the group instead (`term`): a
trainer reads a second SIGTERM as "exit now" instead of "stop after this
step" (docs/exit_status.md), and GNU `timeout`, which leads the
launcher's groups, passes a SIGTERM on to its command twice (to it, then
to the group) as well as the copy killpg gives it.
Worker processes (the record builder's, the JAX input workers) call
`die_with_parent` first, so a parent killed outright leaves no orphans.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable, List, Optional, Sequence

PR_SET_PDEATHSIG = 1


def signal_group(pid: int, sig: int) -> None:
    """Sends `sig` to the process group led by `pid`; a group that is gone
    (or no longer ours) is left alone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def signal_leader(pid: int, sig: int) -> None:
    """Sends `sig` to the process `pid` alone; one that is gone is left
    alone."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def child_of(pid: int) -> Optional[int]:
    """The first child of process `pid` (the command GNU `timeout` runs),
    from /proc; None when it has none or /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            found = [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        found = _children_by_scan(pid)
    return found[0] if found else None


def _children_by_scan(pid: int) -> List[int]:
    """Kernels without /proc/PID/task/TID/children: every /proc/N/stat."""
    found = []
    names = os.listdir("/proc") if os.path.isdir("/proc") else []
    for name in filter(str.isdigit, names):
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError, ValueError):
            continue
        if fields[1] == str(pid):
            found.append(int(name))
    return sorted(found)


def stop_groups(procs: Sequence, grace: float,
                term: Optional[Callable[[Any], None]] = None) -> None:
    """SIGTERMs every process still running, all at once (its group, or
    what `term(proc)` signals), and SIGKILLs the group of each one still
    running `grace` seconds later; returns when they have ended.

    procs: subprocess.Popen, or anything with its pid, poll() and
    wait(timeout) (the launcher's TrainerProcess).
    """
    running = [p for p in procs if p.poll() is None]
    for p in running:
        if term is None:
            signal_group(p.pid, signal.SIGTERM)
        else:
            term(p)
    deadline = time.monotonic() + grace
    for p in running:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            signal_group(p.pid, signal.SIGKILL)
            p.wait()


def die_with_parent(parent_pid: int) -> None:
    """In a worker: SIGKILL when the parent dies; exit if it already has."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # no prctl: the getppid check below still helps
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent died before prctl took effect
