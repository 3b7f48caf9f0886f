"""Trainer subprocesses for one check: started together, logged, timed out.

Each process gets its own session (process group), so a timeout can take
down what it started too (horovodrun's ranks). TensorFlow ignores SIGTERM
while it runs ops, so a timeout sends SIGTERM, waits KILL_GRACE seconds,
then SIGKILLs (host/processes.py, the launcher's stop too). Output goes to
a log file per process; the first "TimeHistory:" line marks the end of
warm-up for the samplers.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import threading
import time
from typing import Dict, List, Optional, Sequence

from official_bench.contracts.throughput import THROUGHPUT_MARK
from official_bench.host import processes

KILL_GRACE = 5.0  # seconds between SIGTERM and SIGKILL
WARM_MARK = THROUGHPUT_MARK  # the trainer's per-interval line


@dataclasses.dataclass
class Command:
    """One process a check starts: its argv, environment and log file."""
    argv: List[str]
    env: Dict[str, str]
    log_path: str


@dataclasses.dataclass
class Outcome:
    """What became of one process."""
    returncode: Optional[int]
    log_path: str
    tail: str  # the last lines of its output
    warm_time: Optional[float]  # monotonic time of the first WARM_MARK
    end_time: Optional[float]


class ProcessGroup:
    """Starts every command at once; `wait` ends them all by a deadline."""

    def __init__(self, commands: Sequence[Command], cwd: str):
        self.commands = list(commands)
        self.cwd = cwd
        self.procs: List[subprocess.Popen] = []
        self._readers: List[threading.Thread] = []
        self._tails: List[List[str]] = []
        self._warm: List[Optional[float]] = []
        self._end: List[Optional[float]] = []
        self.timed_out = False

    @property
    def pids(self) -> List[int]:
        return [p.pid for p in self.procs]

    def start(self) -> "ProcessGroup":
        for i, cmd in enumerate(self.commands):
            os.makedirs(os.path.dirname(cmd.log_path), exist_ok=True)
            proc = subprocess.Popen(
                cmd.argv, cwd=self.cwd, env=cmd.env, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
                errors="replace")
            self.procs.append(proc)
            self._tails.append([])
            self._warm.append(None)
            self._end.append(None)
            t = threading.Thread(target=self._pump, args=(i,), daemon=True)
            t.start()
            self._readers.append(t)
        return self

    def _pump(self, i: int) -> None:
        """Copies process i's output to its log; notes the warm-up mark."""
        proc, tail = self.procs[i], self._tails[i]
        with open(self.commands[i].log_path, "w") as log:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                tail.append(line)
                del tail[:-60]
                if self._warm[i] is None and WARM_MARK in line:
                    self._warm[i] = time.monotonic()
        proc.wait()
        self._end[i] = time.monotonic()

    @property
    def warm_time(self) -> Optional[float]:
        """When every process that logs intervals had logged one."""
        marks = [w for w in self._warm if w is not None]
        return max(marks) if marks else None

    def tail_lines(self) -> List[str]:
        """The latest output lines of all processes (for progress lines)."""
        return [line for tail in self._tails for line in list(tail)]

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def wait(self, timeout: float) -> List[Outcome]:
        """Waits for all; at the deadline kills them all (timed_out set)."""
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            left = deadline - time.monotonic()
            try:
                proc.wait(timeout=max(left, 0.01))
            except subprocess.TimeoutExpired:
                self.timed_out = True
                break
        if self.timed_out:
            self.kill()
        for t in self._readers:
            t.join(timeout=30)
        return [Outcome(p.returncode, c.log_path, "".join(tail)[-4000:],
                        w, e) for p, c, tail, w, e in
                zip(self.procs, self.commands, self._tails, self._warm,
                    self._end)]

    def kill(self) -> None:
        """SIGTERM to each process group started here, then SIGKILL."""
        processes.stop_groups(self.procs, KILL_GRACE)
        # Ranks horovodrun started in the same session, if it died first.
        for p in self.procs:
            processes.signal_group(p.pid, signal.SIGKILL)
