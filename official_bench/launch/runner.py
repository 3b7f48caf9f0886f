"""The sweep on this node: every run of the plan in order, met with the
other nodes.

`Runner` meets the other nodes at the barrier ("hello" before the first
run, "start" and "end" around each), keeps the runs RESUME=1 reuses,
executes each other run (one_run.py), and after each decides whether the
sweep goes on (ON_FAILURE=stop, a node that cannot write its files) and,
at the end, the sweep's exit status. How a run went is outcome.py's to
judge; what is printed about it is sweep_report.py's; the trainer
processes are trainer_process.py's.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from typing import Callable, Dict, Optional

from official_bench.contracts import exit_status as es
from official_bench.launch import (
    auth,
    barrier as barrier_lib,
    one_run,
    progress,
)
from official_bench.launch.outcome import Outcome
from official_bench.launch.plan import Plan, Run
from official_bench.launch.sweep_report import SweepReport, node_name, say

LOST_AFTER = 30.0  # + KILL_AFTER: silence that means a launcher stopped


class Interrupted(Exception):
    """The launcher got SIGTERM, SIGINT or SIGHUP (raised by its signal
    handler, launch/__main__.py): owns the signal's number, which the
    launcher exits with as 128 + N."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Runner:
    """The sweep on this node: owns the barrier's client (and, on node 0,
    its coordinator), this launch's stamp, the runs RESUME=1 keeps
    (`reused`) and the sweep's report (`report`: the runs' payloads per
    node and node 0's rates)."""

    def __init__(self, plan: Plan, stamp: str = ""):
        self.plan = plan
        self.s = plan.settings
        self.stamp = stamp  # of this launch; node 0's is shared at "hello"
        self.client: Optional[barrier_lib.Client] = None
        self.coordinator: Optional[barrier_lib.Coordinator] = None
        self.report = SweepReport(plan)
        self.reused: set = set()  # run names RESUME=1 keeps (resume.py)
        # Called with whether every run was ok, after the last run and
        # before the summary (OVERWRITE=1 swaps its staged runs in there).
        self.on_end: Optional[Callable[[bool], None]] = None

    def log(self, message: str) -> None:
        say(self.plan, message)

    # -- barrier -----------------------------------------------------------

    def _node_name(self, i: int) -> str:
        return node_name(self.plan, i)

    def setup_barrier(self, extra: Optional[Dict] = None) -> Dict[int, Dict]:
        """Meets every node at "hello"; `extra` joins this node's payload
        (cannot_run: why this node cannot start the trainer)."""
        plan = self.plan
        host, port = plan.barrier
        digest = plan.digest()
        key = auth.key_for(self.s)
        if plan.index == 0:
            self.coordinator = barrier_lib.Coordinator(
                port, plan.num_nodes, digest, describe=self._node_name,
                host=plan.barrier_bind, key=key,
                log=lambda m: say(self.plan, m, stream=sys.stderr))
            self.log(f"barrier: serving on "
                     f"{', '.join(self.coordinator.addresses)} for "
                     f"{plan.num_nodes} nodes")
        self.client = barrier_lib.Client(
            host, port, plan.index, uuid.uuid4().hex, digest,
            coordinator_name=self._node_name(0), key=key)
        self.log(f"barrier: waiting up to {self.s.barrier_timeout:g} s for "
                 f"all nodes at {self.client.address}")
        payload = {"host": one_run.hostname(), "pid": os.getpid(),
                   "stamp": self.stamp, **(extra or {})}
        return self.client.meet("hello", payload, self.s.barrier_timeout)

    def meet(self, round_name: str, payload, timeout: float,
             stale_after: Optional[float] = None):
        """Meets the other nodes; gives up early on a launcher that stopped."""
        return self.client.meet(round_name, payload, timeout,
                                stale_after=stale_after,
                                lost_after=LOST_AFTER + self.s.kill_after)

    # -- one run -----------------------------------------------------------

    def execute(self, run: Run) -> Outcome:
        """Runs this node's trainer process(es) for one run (one_run.py);
        node 0 keeps the run's rate for the report."""
        this = one_run.OneRun(self.plan, run, self._peer_failure(
            f"end {run.name}") if self.client else None)
        try:
            return this.execute()
        finally:
            if this.rate is not None:
                self.report.rates[run.name] = this.rate

    def _peer_failure(self, end_round: str):
        def poll() -> Optional[str]:
            arrived = self.client.peek(end_round)
            for node, payload in sorted((arrived or {}).items()):
                if node != self.plan.index and payload and \
                        payload.get("status") != "ok":
                    return (f"stopped because {self._node_name(node)} failed "
                            f"this run ({es.describe(payload.get('rc'))})")
            return None
        return poll

    # -- all runs ------------------------------------------------------------

    def _reuse(self, run: Run) -> None:
        """RESUME=1: a run whose status is ok on every node is kept as it
        is; node 0 reads its img/s back from its log."""
        everyone = {k: {"status": "ok", "rc": 0, "reason": "", "log":
                        run.log_path, "reused": True}
                    for k in range(self.plan.num_nodes)}
        if self.plan.index == 0:
            intervals = progress.read_intervals(run.log_path)
            self.report.rates[run.name] = (progress.run_rate(intervals),
                                           intervals)
        self.report.add(run, everyone)

    def run_all(self) -> int:
        """Every run of the plan; the sweep's exit status."""
        plan = self.plan
        failed = 0
        multi = plan.uses_barrier
        executed = 0
        status, error = es.OK, ""
        for run in plan.runs:
            if run.name in self.reused:
                self._reuse(run)
                continue
            if executed and self.s.sleep_seconds:
                time.sleep(self.s.sleep_seconds)
            executed += 1
            if multi:
                self.meet(f"start {run.name}", {"ready": True},
                          self.s.barrier_timeout)
            outcome = self.execute(run)
            if multi:
                wait = self.s.run_timeout + self.s.kill_after + \
                    self.s.barrier_timeout
                # Nodes still running peek every PEEK_SECONDS
                # (trainer_process.py); a node silent for longer than a
                # stop takes has lost its launcher.
                everyone = self.meet(f"end {run.name}", outcome.as_payload(),
                                     wait, stale_after=LOST_AFTER +
                                     self.s.kill_after)
            else:
                everyone = {0: outcome.as_payload()}
            bad = {k: v for k, v in everyone.items() if v["status"] != "ok"}
            self.report.add(run, everyone)
            stops = {k: v for k, v in everyone.items() if v.get("stop")}
            if stops:
                failed += 1
                who = ", ".join("this node" if k == plan.index else
                                self._node_name(k) for k in sorted(stops))
                self.log(f"stopping the sweep after {run.name} (on every "
                         f"node): {who} cannot write its files, so the next "
                         "run would fail the same way; the runs already "
                         "finished are kept")
                status = es.NOT_WRITABLE if plan.index in stops else \
                    es.FAILED
                error = everyone.get(plan.index, {}).get("reason")
                break
            if bad:
                failed += 1
                if self.s.on_failure == "stop":
                    self.log(f"ON_FAILURE=stop: stopping after {run.name} "
                             "(on every node)")
                    break
        if self.on_end is not None:
            self.on_end(status == es.OK and not failed)
        self.summary()
        if status == es.NOT_WRITABLE:
            say(plan, f"error: {error}", stream=sys.stderr)
        if status != es.OK:
            return status
        return es.FAILED if failed else es.OK

    def summary(self) -> None:
        """The sweep's closing lines (sweep_report.py)."""
        self.report.summary(self.reused)

    def close(self) -> None:
        if self.coordinator is not None:
            self.coordinator.close()
            self.coordinator = None
