"""Which peer a JAX run lost, as one line, when a collective fails while
several processes train.

Only worker 0 listens on a port (jax.distributed's coordinator), so the
others cannot be probed as the TensorFlow path probes its peers
(runtime/cluster.py `lost_peers_error`). What JAX tells is used instead:
the task the coordination service names, or the address gloo's error
gives when one worker's host has it; with two processes the peer is the
other one; a worker that loses worker 0 finds its port closed. Where none
of these tells, the line says "a peer" and gives JAX's reason.
"""

from __future__ import annotations

import contextlib
import re
import socket
from typing import Iterator, List, Optional, Set

from official_bench.contracts.hostport import parse_hostport
from official_bench.runtime.cluster import PeerLost, can_connect

# "/job:jax_worker/replica:0/task:1" in the coordination service's errors.
_TASK = re.compile(r"/job:[\w-]+/replica:\d+/task:(\d+)")
# "Read error [10.0.0.2]:41235" in gloo's.
_ADDRESS = re.compile(r"\[([0-9A-Fa-f.:]+)\]:\d+")


def lost_peer(run, step, total: int, error: Exception) -> PeerLost:
    """The line for `error`, a failed collective at `step` of `total`."""
    where = f"at step {step} of {total}" if step else "before the first step"
    reason = _first_line(error)
    index = lost_index(str(error), run.cluster.workers, run.process_index)
    if index is not None:
        who = f"worker {index} at {run.cluster.workers[index]}"
    elif _coordinator_gone(run):
        index = 0
        who = (f"worker 0 at {run.cluster.workers[0]} (the coordinator, "
               "which no longer answers)")
    if index is None:
        return PeerLost(
            f"official_bench: lost a peer of {run.cluster.describe()} "
            f"({run.process_count} processes) {where}: a collective failed "
            f"({reason}); see the other workers' logs for why one ended "
            "(the run scripts print their paths)")
    return PeerLost(
        f"official_bench: lost {who} {where} ({run.cluster.describe()} saw "
        f"its collective fail: {reason}); see that task's log for why it "
        "ended (the run scripts print its path)")


@contextlib.contextmanager
def before_the_loop(run, total: int) -> Iterator[None]:
    """The processes' collectives before the first step (building the
    model's and optimizer's variables: Keras checks each is the same on
    every process; the records' eval plan): a JAX runtime error there,
    with several processes, is the lost peer's line, as in the loop."""
    try:
        yield
    except run.jax.errors.JaxRuntimeError as e:
        if run.process_count == 1:
            raise
        raise lost_peer(run, None, total, e) from e


def lost_index(text: str, workers: List[str], me: int) -> Optional[int]:
    """The index of the worker JAX's error `text` points at (not `me`),
    or None when it points at no single one."""
    for match in _TASK.finditer(text):
        index = int(match.group(1))
        if index != me and index < len(workers):
            return index
    named = {ip for ip in _ADDRESS.findall(text)}
    if named:
        hits = [i for i, w in enumerate(workers)
                if i != me and _addresses(w) & named]
        if len(hits) == 1 and not _addresses(workers[me]) & named:
            return hits[0]
    if len(workers) == 2:
        return 1 - me
    return None


def _addresses(worker: str) -> Set[str]:
    """The IP addresses a worker's host resolves to (the literal if it
    is one)."""
    host, _ = parse_hostport(worker)
    try:
        return {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return {host}


def _first_line(error: Exception) -> str:
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first[:160]}"


def _coordinator_gone(run) -> bool:
    """This is not worker 0, and worker 0's port no longer answers."""
    return run.process_index > 0 and not can_connect(
        run.cluster.workers[0], timeout=2.0)
