"""A start-up deadline for multi-worker runs that TensorFlow cannot block.

TensorFlow's multi-worker start-up waits for every peer inside C++ code that
keeps the GIL and catches SIGTERM (docs/design.md): neither a Python thread nor
a signal handler in the trainer gets to run. So the deadline lives in a small
child process (no TensorFlow) that the trainer feeds through a pipe. When
the trainer says "joined" (or dies, closing the pipe), the child exits
quietly. When the deadline passes first, the child probes the peers' ports,
prints which ones never answered to the trainer's stderr, and SIGKILLs the
trainer, the only signal it cannot ignore. A SIGINT or SIGTERM during the
wait reaches the child through the trainer's wake-up fd: the trainer's own
thread then ends it with the stop line and 128+N (JAX's wait lets go of the
GIL); where it cannot run within HAND_OVER_SECONDS (TensorFlow's), the child
prints the line and SIGKILLs it. On the way out the trainer's Python signal
handlers are put back (stop_signals.reclaim_handlers).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

from official_bench.contracts import exit_status, throughput
from official_bench.runtime import stop_signals

# How long the trainer's own thread has to end the process after a signal
# before the child kills it (its main thread holds the GIL).
HAND_OVER_SECONDS = 2.0


class StartupWatchdog:
    """Context manager around the strategy's constructor (or
    jax.distributed.initialize): the deadline, the stop by a signal while
    it waits, and Python's signal handlers back at its end. A timeout of
    0 waits without a deadline; signals are watched from the main thread
    only (the wake-up fd can only be set there)."""

    def __init__(self, me: str, peers: Dict[str, str], timeout: float,
                 waiting_for: str = " for the cluster to start"):
        self.me, self.peers, self.timeout = me, peers, timeout
        self.waiting_for = waiting_for
        self._proc = None
        self._write_fd = None
        self._signal_fd: Optional[int] = None  # the wake-up fd
        self._old_wakeup = -1
        self._back_fd: Optional[int] = None  # the child's "end it" pipe
        self._thread: Optional[threading.Thread] = None

    @property
    def stage(self) -> str:
        """What a stop during the wait names (stop_signals.outside_message):
        "waiting for jax.distributed at host:port"."""
        return "waiting" + self.waiting_for

    def __enter__(self):
        if not self.peers:
            return self
        read_fd, self._write_fd = os.pipe()
        argv = [sys.executable, "-m", "official_bench.runtime.watchdog",
                str(os.getpid()), str(self.timeout), self.me,
                json.dumps(self.peers), self.waiting_for]
        passed = ()
        if threading.current_thread() is threading.main_thread():
            signal_read, self._signal_fd = os.pipe()
            os.set_blocking(self._signal_fd, False)
            self._back_fd, back_write = os.pipe()
            passed = (signal_read, back_write)
            argv += [str(signal_read), str(back_write)]
        self._proc = subprocess.Popen(
            argv, stdin=read_fd, stdout=sys.stderr.fileno(), close_fds=True,
            pass_fds=passed,
            # A terminal's Ctrl-C goes to the trainer only; the child ends
            # when the trainer does (EOF on its stdin).
            start_new_session=True)
        for fd in (read_fd,) + passed:
            os.close(fd)
        if self._signal_fd is not None:
            self._old_wakeup = signal.set_wakeup_fd(
                self._signal_fd, warn_on_full_buffer=False)
            self._thread = threading.Thread(
                target=self._end_on_signal, daemon=True,
                name="official_bench-startup-stop")
            self._thread.start()
        return self

    def _end_on_signal(self) -> None:
        """The trainer's side: the child passes a signal on; ends the
        process with its stop line and 128+N. The child's exit (the
        join is over) ends the read."""
        data = os.read(self._back_fd, 1)
        if not data:
            return
        name = signal.Signals(data[0]).name
        _say("error: " + stop_signals.outside_message(name, self.stage))
        os._exit(exit_status.by_signal(data[0]))

    def __exit__(self, *exc):
        if self._signal_fd is not None:
            signal.set_wakeup_fd(self._old_wakeup)
            os.close(self._signal_fd)
        if self._proc is not None:
            try:
                os.write(self._write_fd, b"joined\n")
            except OSError:
                pass
            os.close(self._write_fd)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._thread is not None:
            self._thread.join(timeout=5)
            os.close(self._back_fd)
        stop_signals.reclaim_handlers()
        return False


def unreachable(peers: Dict[str, str], timeout: float = 1.0) -> List[str]:
    from official_bench.runtime.cluster import can_connect
    return [f"{name} at {addr}" for name, addr in peers.items()
            if not can_connect(addr, timeout)]


def timeout_message(me: str, waited: float, missing: List[str],
                    waiting_for: str = " for the cluster to start") -> str:
    """The shared timeout line; with nobody missing, says what else it is."""
    who = missing or [
        "none: every peer's port answers, but the workers did not agree "
        "(different configs, TF_CONFIGs or task indices?)"]
    return throughput.timeout_message(me, waited, who, waiting_for)


def _say(line: str) -> None:
    # os.write: no lock of sys.stderr's to meet in a thread or a child.
    os.write(sys.stderr.fileno(), (line + "\n").encode())


def _watch(parent: int, timeout: float, me: str, peers: Dict[str, str],
           waiting_for: str, signal_fd: Optional[int] = None,
           back_fd: Optional[int] = None) -> int:
    start = time.monotonic()
    deadline = start + timeout if timeout > 0 else None
    next_report = start + min(30.0, timeout / 2) if deadline else None
    watched = [sys.stdin.fileno()] + \
        ([signal_fd] if signal_fd is not None else [])
    while True:
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            break
        wait = None if deadline is None else \
            max(0.0, min(deadline, next_report) - now)
        ready, _, _ = select.select(watched, [], [], wait)
        if sys.stdin.fileno() in ready:
            return exit_status.OK  # "joined", or EOF: the trainer is gone
        if signal_fd in ready:
            data = os.read(signal_fd, 64)
            stops = [n for n in data if n in stop_signals.SIGNALS]
            if stops:
                return _stop(parent, stops[0], waiting_for, back_fd)
            if not data:  # the trainer closed it: only the deadline left
                watched.remove(signal_fd)
            continue
        if deadline is not None and next_report <= time.monotonic() \
                < deadline:
            print(throughput.peer_wait_message(
                me, deadline - time.monotonic(), unreachable(peers)),
                flush=True)
            next_report = time.monotonic() + 30.0
    # The trainer's last line (it is killed next), an error line as every
    # other failure's is (docs/exit_status.md).
    print("error: " + timeout_message(me, timeout, unreachable(peers),
                                      waiting_for), flush=True)
    _kill(parent)
    return exit_status.FAILED  # the trainer's own status is KILLED


def _stop(parent: int, signum: int, waiting_for: str, back_fd: int) -> int:
    """A SIGINT or SIGTERM while the trainer waits: its own thread ends it
    (128+N); where that thread does not run in time (TensorFlow holds the
    GIL), the stop line here and SIGKILL."""
    try:
        os.write(back_fd, bytes([signum]))
    except OSError:
        return exit_status.OK  # the trainer is gone
    ready, _, _ = select.select([sys.stdin], [], [], HAND_OVER_SECONDS)
    if ready:
        return exit_status.OK  # it ended (EOF), or it joined: its own stop
    name = signal.Signals(signum).name
    print("error: " + stop_signals.outside_message(
        name, "waiting" + waiting_for), flush=True)
    _kill(parent)
    return exit_status.FAILED


def _kill(parent: int) -> None:
    try:
        os.kill(parent, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main(argv: List[str]) -> int:
    for sig in stop_signals.SIGNALS:  # the trainer's to take, not ours
        signal.signal(sig, signal.SIG_IGN)
    parent, timeout, me, peers, waiting_for = argv[1:6]
    fds = [int(fd) for fd in argv[6:8]] or [None, None]
    return _watch(int(parent), float(timeout), me, json.loads(peers),
                  waiting_for, *fds)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
