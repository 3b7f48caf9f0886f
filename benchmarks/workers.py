"""Worker processes of the multi-worker benchmarks (step_collectives,
step_anatomy, collective_threads): where each listens, 127.0.0.1 ports or
one network namespace each, and a wait that never leaves one running."""

from __future__ import annotations

import os
import subprocess
from typing import List, Sequence, Tuple

from official_bench.contracts.hostport import free_ports

NETNS_PORT = 22231  # each namespace has its own port space


def placement(workers: int, netns: str = "") -> Tuple[str, List[List[str]]]:
    """(worker_hosts, per-worker command prefix). `netns`,
    "NS_A=ADDR_A,NS_B=ADDR_B", puts worker k in namespace NS_k at ADDR_k
    (e.g. two joined by a tbf-limited veth pair, as the netem test does);
    each worker is pinned to its own core (taskset), as the netem test pins
    its launchers."""
    pin = [["taskset", "-c", str(i % (os.cpu_count() or 1))]
           for i in range(workers)]
    if not netns:
        hosts = ",".join(f"127.0.0.1:{p}" for p in free_ports(workers))
        return hosts, pin
    pairs = [item.split("=") for item in netns.split(",")]
    if len(pairs) != workers or any(len(p) != 2 for p in pairs):
        raise ValueError(f"{workers} worker(s) need {workers} NS=ADDR "
                         f"pair(s), got {netns!r}")
    hosts = ",".join(f"{addr}:{NETNS_PORT}" for _, addr in pairs)
    return hosts, [["ip", "netns", "exec", ns] + pin[i]
                   for i, (ns, _) in enumerate(pairs)]


def wait_all(procs: Sequence[subprocess.Popen], timeout: float) -> List[int]:
    """Exit codes; a worker still running after `timeout` (or when the
    wait is interrupted) is killed, never left behind."""
    try:
        for p in procs:
            p.wait(timeout=timeout)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [p.returncode for p in procs]
