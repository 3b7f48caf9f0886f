"""Stopping a child that runs in its own process group; a child that
dies with its parent.

The launcher's trainers and the doctor's checks each start in a session of
their own (start_new_session), so a stop reaches what they started too
(`timeout`'s trainer, horovodrun's ranks). TensorFlow may ignore SIGTERM
while it runs ops, hence the one stop both use: SIGTERM, a grace, SIGKILL.
A group led by GNU `timeout` gets its SIGTERM through `timeout` alone,
which passes it on to its command and group: a second copy from us would
reach the trainer twice, and the trainer reads a second SIGTERM as "exit
now" instead of "stop after this step" (docs/exit_status.md).
Worker processes (the record builder's, the JAX input workers) call
`die_with_parent` first, so a parent killed outright leaves no orphans.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Sequence

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


def stop_groups(procs: Sequence, grace: float, relayed: bool = False) -> None:
    """SIGTERMs the group of every process still running, all at once, and
    SIGKILLs the group of each one still running `grace` seconds later;
    returns when they have ended.

    procs: subprocess.Popen, or anything with its pid, poll() and
    wait(timeout) (the launcher's TrainerProcess).
    relayed: each process is a relay that passes SIGTERM on to its group
    (GNU `timeout`), so SIGTERM goes to it alone; SIGKILL to the group.
    """
    running = [p for p in procs if p.poll() is None]
    term = signal_leader if relayed else signal_group
    for p in running:
        term(p.pid, signal.SIGTERM)
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
