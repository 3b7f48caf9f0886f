"""This node's link to the other launchers of a two/multi-node sweep.

`NodeLink.open` serves the barrier on node 0 (barrier.py's Coordinator)
and connects this node's client to it, with the plan's digest (what every
node must agree on) and the barrier's key (auth.py). `hello` is the first
round, before any run, where the nodes learn each other's host, pid,
session stamp and problems; `meet` the rounds around each run, giving up
early on a launcher that stopped; `peek` who has arrived at a round so far
(a node still running asks whether a peer already failed); `leave` tells
the other nodes, on the way out, that a signal stopped this launcher.
"""

from __future__ import annotations

import os
import socket
import sys
import uuid
from typing import Any, Dict, Optional

from official_bench.launch import auth, barrier as barrier_lib
from official_bench.launch.plan import Plan
from official_bench.launch.sweep_report import node_name, say

LOST_AFTER = 30.0  # + KILL_AFTER: silence that means a launcher stopped
# Silence (s) of a node that node 0 names when it starts to wait for it;
# a live launcher peeks every 2 s while its trainer runs.
SILENT_SAY = 5.0


def port_from(plan: Plan) -> str:
    """How this node chose node 0's barrier port: each node decides it
    from its own settings, so a node with another BARRIER_PORT or
    WORKERS_PER_NODE looks on another port."""
    s, port = plan.settings, plan.barrier[1]
    if s.barrier_port:
        how = f"BARRIER_PORT={port} ({s.source('barrier_port')})"
    else:
        per_node = plan.workers_per_node
        how = (f"the default BARRIER_PORT: 1 + the highest worker port on "
               f"node 0's host ({port - 1} with WORKERS_PER_NODE="
               f"{per_node})")
    return (f"This node looked on port {port}, {how}; node 0 decides its "
            "own from its settings, so a node started with another "
            "BARRIER_PORT or WORKERS_PER_NODE listens elsewhere.")


class NodeLink:
    """Owns the barrier's client of this node and, on node 0, the barrier
    itself (its coordinator), until close()."""

    def __init__(self, plan: Plan, client: barrier_lib.Client,
                 coordinator: Optional[barrier_lib.Coordinator] = None):
        self.plan = plan
        self.client = client
        self.coordinator = coordinator

    @classmethod
    def open(cls, plan: Plan) -> "NodeLink":
        """Node 0 starts serving the barrier; every node makes its client
        (nothing is sent before `hello`)."""
        host, port = plan.barrier
        digest = plan.digest()
        key = auth.key_for(plan.settings)
        coordinator = None
        if plan.index == 0:
            coordinator = barrier_lib.Coordinator(
                port, plan.num_nodes, digest,
                describe=lambda i: node_name(plan, i),
                host=plan.barrier_bind, key=key,
                log=lambda m: say(plan, m, stream=sys.stderr))
            say(plan, f"barrier: serving on "
                f"{', '.join(coordinator.addresses)} for {plan.num_nodes} "
                "nodes")
        client = barrier_lib.Client(
            host, port, plan.index, uuid.uuid4().hex, digest,
            coordinator_name=node_name(plan, 0), key=key,
            log=lambda m: say(plan, m, stream=sys.stderr),
            port_from=port_from(plan))
        return cls(plan, client, coordinator)

    def hello(self, stamp: str,
              extra: Optional[Dict[str, Any]] = None) -> Dict[int, Dict]:
        """Meets every node at "hello"; each node's payload: its host, pid,
        session stamp and `extra` (cannot_run, logs_problem, existing)."""
        timeout = self.plan.settings.barrier_timeout
        say(self.plan, f"barrier: waiting up to {timeout:g} s for all nodes "
            f"at {self.client.address}")
        payload = {"host": socket.gethostname(), "pid": os.getpid(),
                   "stamp": stamp, **(extra or {})}
        return self.client.meet("hello", payload, timeout)

    def meet(self, round_name: str, payload: Any, timeout: float,
             stale_after: Optional[float] = None) -> Dict[int, Any]:
        """Meets the other nodes; gives up early on a launcher that
        stopped (BarrierError), and says first which nodes are already
        silent (node 0)."""
        if self.coordinator is not None and stale_after is not None:
            quiet = self.coordinator.silent(round_name, SILENT_SAY,
                                            self.plan.index)
            for i, seconds in quiet:
                say(self.plan, f"barrier: waiting at '{round_name}' for "
                    f"{node_name(self.plan, i)}, not heard from for "
                    f"{seconds:.0f} s; giving up on its launcher after "
                    f"{stale_after:.0f} s of silence", stream=sys.stderr)
        return self.client.meet(
            round_name, payload, timeout, stale_after=stale_after,
            lost_after=self.lost_after)

    @property
    def lost_after(self) -> float:
        """Seconds without an answer from node 0's barrier after which its
        launcher is taken as gone."""
        return LOST_AFTER + self.plan.settings.kill_after

    def peek(self, round_name: str) -> Optional[Dict[int, Any]]:
        """Who has arrived at `round_name` so far; None when unreachable."""
        return self.client.peek(round_name, lost_after=self.lost_after)

    def lost(self, round_name: str) -> Optional[str]:
        """Why another node's launcher seems gone while this node waits
        for `round_name`; else None. Node 0: a node heard from before that
        has not arrived there and has been silent for longer than
        lost_after (every launcher peeks while its trainer runs). Other
        nodes: node 0's barrier, answering before, has not answered for
        that long."""
        if self.coordinator is None:
            return self.client.lost(self.lost_after)
        left = self.coordinator.departed(round_name, self.plan.index)
        if left:
            return "; ".join(left)
        gone = self.coordinator.silent(round_name, self.lost_after,
                                       self.plan.index)
        if not gone:
            return None
        return ", ".join(f"{node_name(self.plan, i)} has not been heard "
                         f"from for {seconds:.0f} s" for i, seconds in gone
                         ) + " (its launcher seems to have stopped)"

    def leave(self, reason: str) -> str:
        """This launcher leaves the sweep (`reason`: "interrupted by
        SIGTERM"): node 0 answers every node's meet and peek with it and
        closes its barrier once each node heard from was told (at most
        barrier.TELL_LINGER s); another node sends it to node 0's barrier
        (at most barrier.LEAVE_TIMEOUT s). What was done, for the line."""
        coordinator = self.coordinator
        if coordinator is None:
            why = self.client.leave(reason)
            return ("told node 0's barrier" if why is None else
                    f"could not tell node 0's barrier ({why})")
        coordinator.leave(self.plan.index, reason)
        self.close(linger=coordinator.tell_linger)
        if not coordinator.heard_from(exclude=self.plan.index):
            return "no other node had reached the barrier"
        untold = coordinator.untold()
        if not untold:
            return "told the other nodes"
        return (", ".join(node_name(self.plan, i) for i in untold) +
                f" not told (no request within {coordinator.tell_linger:g} "
                "s)")

    def close(self, linger: float = 10.0) -> None:
        """Stops node 0's barrier (barrier.Coordinator.close's `linger`)."""
        if self.coordinator is not None:
            self.coordinator.close(linger)
            self.coordinator = None
