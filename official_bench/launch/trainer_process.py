"""Process control: the trainer processes of one run on this node.

Each trainer runs under `timeout -k KILL_AFTER RUN_TIMEOUT` in its own
process group (session), with a parent-death signal so that it stops when
the launcher dies, even by SIGKILL. `wait_all` waits for a node's processes
and decides when to stop them (one failed, a peer node failed, past its
limit); a stopped process keeps why (`stopped_because`). Whether that makes
the run failed or aborted is outcome.py's to say, not this module's.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Callable, List, Optional, TextIO

from official_bench.contracts import exit_status as es
from official_bench.host import processes

if TYPE_CHECKING:
    from official_bench.launch.plan import Plan, Worker

PEEK_SECONDS = 2.0  # how often wait_all asks `poll` whether a peer failed


class TrainerProcess:
    """One trainer process under `timeout -k`, in its own process group:
    owns the Popen, its start and end times, its exit status (128 + N for
    signal N) and why the launcher stopped it, if it did."""

    def __init__(self, run: Worker, plan: Plan, log: TextIO):
        s = plan.settings
        self.kill_after = s.kill_after
        self.run_timeout = s.run_timeout
        timeout = shutil.which("timeout")
        self.command = list(run.command)
        self.under_timeout = bool(timeout)
        self.horovodrun = plan.horovod is not None
        if timeout:
            self.command = [timeout, "-k", f"{s.kill_after:g}s",
                            f"{s.run_timeout:g}s"] + self.command
        env = dict(s.environ)
        env.update(run.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(self.command, stdout=log,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env,
                                     start_new_session=True,
                                     preexec_fn=_parent_death_signal())
        self.started = time.monotonic()
        self.elapsed = 0.0
        self.ended: Optional[float] = None  # monotonic time of its exit
        self.rc: Optional[int] = None
        self.stopped_because: Optional[str] = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Waits for it (subprocess.TimeoutExpired past `timeout`); poll()."""
        self.proc.wait(timeout)
        return self.poll()

    def stop(self, why: str, grace: Optional[float] = None) -> None:
        """SIGTERM it (terminate), SIGKILL its group after `grace` s."""
        stop_all([self], why, self.kill_after if grace is None else grace)

    def terminate(self) -> None:
        """One SIGTERM to what must see it: under `timeout`, the trainer
        itself (`timeout`, signalled, passes it on twice: to the trainer,
        then to its group; a trainer's second SIGTERM means "exit now"),
        or for horovodrun `timeout`, whose copy to the group reaches the
        ranks; without `timeout`, the whole group."""
        if not self.under_timeout:
            processes.signal_group(self.pid, signal.SIGTERM)
            return
        command = None if self.horovodrun else processes.child_of(self.pid)
        processes.signal_leader(command or self.pid, signal.SIGTERM)

    def poll(self) -> Optional[int]:
        """Its exit status once it ended (death by a signal as the shell
        reports it: 128 + the signal number), else None."""
        if self.rc is None:
            rc = self.proc.poll()
            if rc is not None:
                self.ended = time.monotonic()
                self.elapsed = self.ended - self.started
                self.rc = es.by_signal(-rc) if rc < 0 else rc
        return self.rc

    @property
    def limit(self) -> float:
        """Safety net: past this, `timeout` itself failed to stop it."""
        return self.started + self.run_timeout + self.kill_after + 30


def stop_all(procs: List[TrainerProcess], why: str, grace: float) -> None:
    """SIGTERM every running trainer at once, once (`terminate`: it then
    ends after its current step), SIGKILL the group of those still running
    after `grace` seconds (TensorFlow may ignore SIGTERM)."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        p.stopped_because = p.stopped_because or why
    processes.stop_groups(running, grace, term=TrainerProcess.terminate)


def wait_all(procs: List[TrainerProcess], labels: List[str], kill_after: float,
             poll: Optional[callable] = None,
             tick: Optional[callable] = None,
             exit_words: Optional[Callable[[int], str]] = None) -> List[int]:
    """Waits for a node's trainer processes; their exit statuses.

    One failing stops the node's others (a multi_worker_mirrored peer would
    otherwise hang in its next collective), their reason naming its exit
    in `exit_words(i)` for process i (outcome.exit_words: as the run's
    line gives it; default "exit N"); `poll()` returning a reason (a peer
    node failed) stops them all; `tick()` runs at every wake-up (the
    progress lines).
    """
    grace = min(kill_after, 10.0)
    next_peek = time.monotonic() + PEEK_SECONDS
    while True:
        if tick is not None:
            tick()
        for i, (p, label) in enumerate(zip(procs, labels)):
            if p.poll() is None or p.rc == 0 or len(procs) == 1:
                continue
            others = [q for q in procs if q is not p and q.poll() is None]
            if others:
                words = exit_words(i) if exit_words else es.describe(p.rc)
                stop_all(others, f"stopped because {label} of this node "
                         f"failed ({words})", grace)
        if all(p.poll() is not None for p in procs):
            return [p.rc for p in procs]
        now = time.monotonic()
        late = [p for p in procs if p.poll() is None and now > p.limit]
        if late:
            stop_all(late, "timed out (RUN_TIMEOUT)", 1.0)
            continue
        if poll is not None and now >= next_peek:
            next_peek = now + PEEK_SECONDS
            reason = poll()
            if reason:
                stop_all(procs, reason, grace)
                continue
        time.sleep(0.2)


def _parent_death_signal():
    """Linux: SIGTERM the trainer's `timeout` if the launcher dies (even by
    SIGKILL); `timeout` then escalates to SIGKILL after KILL_AFTER. The
    trainer runs in its own session, so nothing else would stop it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def preexec():
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    return preexec
