"""A start-up deadline for multi-worker runs that TensorFlow cannot block.

TensorFlow's multi-worker start-up waits for every peer inside C++ code that
keeps the GIL and catches SIGTERM (docs/design.md): neither a Python thread nor
a signal handler in the trainer gets to run. So the deadline lives in a small
child process (no TensorFlow) that the trainer feeds through a pipe. When
the trainer says "joined" (or dies, closing the pipe), the child exits
quietly. When the deadline passes first, the child probes the peers' ports,
prints which ones never answered to the trainer's stderr, and SIGKILLs the
trainer, the only signal it cannot ignore.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Dict, List

from official_bench.contracts import exit_status, throughput


class StartupWatchdog:
    """Context manager around the strategy's constructor."""

    def __init__(self, me: str, peers: Dict[str, str], timeout: float,
                 waiting_for: str = " for the cluster to start"):
        self.me, self.peers, self.timeout = me, peers, timeout
        self.waiting_for = waiting_for
        self._proc = None
        self._write_fd = None

    def __enter__(self):
        if self.timeout <= 0 or not self.peers:
            return self
        read_fd, self._write_fd = os.pipe()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "official_bench.runtime.watchdog",
             str(os.getpid()), str(self.timeout), self.me,
             json.dumps(self.peers), self.waiting_for],
            stdin=read_fd, stdout=sys.stderr.fileno(), close_fds=True)
        os.close(read_fd)
        return self

    def __exit__(self, *exc):
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


def _watch(parent: int, timeout: float, me: str, peers: Dict[str, str],
           waiting_for: str) -> int:
    deadline = time.monotonic() + timeout
    next_report = time.monotonic() + min(30.0, timeout / 2)
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        wait = min(deadline, next_report) - now
        ready, _, _ = select.select([sys.stdin], [], [], max(0.0, wait))
        if ready:
            return exit_status.OK  # "joined", or EOF: the trainer is gone
        if time.monotonic() >= next_report and time.monotonic() < deadline:
            print(throughput.peer_wait_message(
                me, deadline - time.monotonic(), unreachable(peers)),
                flush=True)
            next_report = time.monotonic() + 30.0
    # The trainer's last line (it is killed next), an error line as every
    # other failure's is (docs/exit_status.md).
    print("error: " + timeout_message(me, timeout, unreachable(peers),
                                      waiting_for), flush=True)
    try:
        os.kill(parent, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return exit_status.FAILED  # the trainer's own status is KILLED


def main(argv: List[str]) -> int:
    parent, timeout, me, peers, waiting_for = argv[1:6]
    return _watch(int(parent), float(timeout), me, json.loads(peers),
                  waiting_for)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
