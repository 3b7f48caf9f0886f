"""The sweep on this node: every run of the plan in order, met with the
other nodes.

`Runner` is made once the sweep's start-up (sweep_start.py) knows
everything it needs: the plan, the link to the other nodes (node_link.py,
None on one node), the runs RESUME=1 keeps, and what to do when the last
run ended (OVERWRITE=1's swap). It meets the other nodes around each run
("start" and "end"), executes each run that is not kept (one_run.py), and
acts on each run's verdict: go on, or stop (ON_FAILURE=stop, a node that
cannot write its files). How a run went, whether the sweep goes on and
its exit status are outcome.py's to decide; what is printed about it is
sweep_report.py's; the trainer processes are trainer_process.py's.
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Callable, FrozenSet, List, Optional

from official_bench.contracts import exit_status as es
from official_bench.launch import one_run, progress
from official_bench.launch.barrier import BarrierError
from official_bench.launch.node_link import NodeLink
from official_bench.launch.outcome import (
    Next,
    Outcome,
    RunVerdict,
    peer_failure,
    sweep_status,
)
from official_bench.launch.plan import Plan, Run
from official_bench.launch.sweep_report import SweepReport, node_name, say


class Interrupted(Exception):
    """The launcher got SIGTERM, SIGINT or SIGHUP (raised by its signal
    handler, sweep_start.py): owns the signal's number, which the launcher
    exits with as 128 + N."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Runner:
    """The sweep on this node: owns the plan, the link to the other nodes
    (None on one node), the runs RESUME=1 keeps (`reused`), the callback
    for the sweep's end (`on_end(ok)`, after the last run and before the
    summary; OVERWRITE=1 swaps its staged runs in there), the sweep's
    report (`report`: each run's verdict and node 0's rates) and whether
    a signal stopped a running trainer (`stopped_a_trainer`)."""

    def __init__(self, plan: Plan, link: Optional[NodeLink] = None,
                 reused: FrozenSet[str] = frozenset(),
                 on_end: Optional[Callable[[bool], None]] = None):
        self.plan = plan
        self.s = plan.settings
        self.link = link
        self.reused = frozenset(reused)
        self.on_end = on_end
        self.report = SweepReport(plan)
        # Whether a signal stopped a running trainer (for the last line).
        self.stopped_a_trainer = False

    def log(self, message: str) -> None:
        say(self.plan, message)

    # -- one run -----------------------------------------------------------

    def execute(self, run: Run) -> Outcome:
        """Runs this node's trainer process(es) for one run (one_run.py);
        node 0 keeps the run's rate for the report."""
        this = one_run.OneRun(self.plan, run, self._peer_failure(
            f"end {run.name}") if self.link else None)
        try:
            return this.execute()
        except Interrupted:
            self.stopped_a_trainer = this.trainer_started
            raise
        finally:
            if this.rate is not None:
                self.report.rates[run.name] = this.rate

    def _peer_failure(self, end_round: str) -> Callable[[], Optional[str]]:
        """What OneRun asks while its trainer runs: did a peer node already
        end this run not ok (outcome.peer_failure), or has another node's
        launcher gone silent for longer than a stop takes (node 0: a node
        that stopped peeking; the others: node 0's barrier)?"""
        def poll() -> Optional[str]:
            arrived = self.link.peek(end_round)
            lost = self.link.lost(end_round)
            if lost:
                return f"stopped because {lost}"
            return peer_failure(arrived, self.plan.index,
                                lambda i: node_name(self.plan, i))
        return poll

    def _run(self, run: Run) -> RunVerdict:
        """One run on this node, met with the other nodes before and
        after: every node's outcome."""
        s = self.s
        if self.link is None:
            return RunVerdict({self.plan.index: self.execute(run)})
        self.link.meet(f"start {run.name}", {"ready": True},
                       s.barrier_timeout)
        outcome = self.execute(run)
        # Nodes still running peek every PEEK_SECONDS (trainer_process.py);
        # a node silent for longer than a stop takes has lost its launcher.
        try:
            everyone = self.link.meet(
                f"end {run.name}", outcome.as_payload(),
                s.run_timeout + s.kill_after + s.barrier_timeout,
                stale_after=self.link.lost_after)
        except BarrierError:
            # Said before the barrier's error: how this node's run ended.
            self.report.add(run, RunVerdict({self.plan.index: outcome}))
            raise
        return RunVerdict.from_payloads(everyone)

    def _reuse(self, run: Run) -> None:
        """RESUME=1: a run whose status is ok on every node is kept as it
        is; node 0 reads its img/s back from its log."""
        if self.plan.index == 0:
            intervals = progress.read_intervals(run.log_path)
            self.report.rates[run.name] = (progress.run_rate(intervals),
                                           intervals)
        self.report.add(run, RunVerdict(
            {k: Outcome.kept(run.log_path)
             for k in range(self.plan.num_nodes)}))

    # -- all runs ------------------------------------------------------------

    def run_all(self) -> int:
        """Every run of the plan; the sweep's exit status."""
        plan = self.plan
        verdicts: List[RunVerdict] = []
        for run in plan.runs:
            if run.name in self.reused:
                self._reuse(run)
                continue
            if verdicts and self.s.sleep_seconds:
                time.sleep(self.s.sleep_seconds)
            verdict = self._run(run)
            verdicts.append(verdict)
            self.report.add(run, verdict)
            step = verdict.next_step(self.s.on_failure)
            if step is not Next.GO_ON:
                self._say_stop(run, verdict, step)
                break
        status = sweep_status(verdicts, plan.index)
        if self.on_end is not None:
            self.on_end(status == es.OK)
        self.summary()
        if status == es.NOT_WRITABLE:  # this node's, in the last run
            say(plan, f"error: {verdicts[-1].outcomes[plan.index].reason}",
                stream=sys.stderr)
        return status

    def _say_stop(self, run: Run, verdict: RunVerdict, step: Next) -> None:
        """Why the sweep stops after `run` (on every node alike)."""
        if step is Next.STOP_NOT_WRITABLE:
            who = ", ".join("this node" if k == self.plan.index else
                            node_name(self.plan, k)
                            for k in verdict.cannot_write)
            self.log(f"stopping the sweep after {run.name} (on every "
                     f"node): {who} cannot write its files, so the next "
                     "run would fail the same way; the runs already "
                     "finished are kept")
        else:
            self.log(f"ON_FAILURE=stop: stopping after {run.name} (on "
                     "every node)")

    def summary(self) -> None:
        """The sweep's closing lines (sweep_report.py)."""
        self.report.summary(self.reused)
