"""The sweep's report: what the launcher prints about its runs.

Every launcher line goes through `say` ("[launch]" or "[launch node i/n]"
first). `SweepReport` keeps the sweep's record on this node (each run's
verdict, an outcome per node, and node 0's measured rates) and prints from
it: a line per run and node as each run ends, and at the end the summary
with the extractor command for this log tree, its window flags fitted to
the runs (progress.extractor_window).
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import Dict, List, TextIO, Tuple

from official_bench.contracts import exit_status as es
from official_bench.launch import backend_choice, preflight, progress
from official_bench.launch.outcome import RunVerdict
from official_bench.launch.plan import Plan, Run


def say(plan_or_prefix, message: str, stream: TextIO = None) -> None:
    """Prints one launcher line, after the plan's prefix (or the given
    one), flushed at once."""
    prefix = plan_or_prefix if isinstance(plan_or_prefix, str) else \
        _prefix(plan_or_prefix)
    print(f"{prefix} {message}", file=stream or sys.stdout, flush=True)


def _prefix(plan: Plan) -> str:
    if plan.nodeset is None:
        return "[launch]"
    return f"[launch node {plan.index}/{plan.num_nodes}]"


def node_name(plan: Plan, i: int) -> str:
    """'node 1 (10.0.0.2:11111)'."""
    return f"node {i} ({plan.nodeset.nodes[i].address})"


class SweepReport:
    """The sweep's record on this node and the lines printed from it: owns
    each finished (or reused) run's verdict (`results`) and node 0's rate
    per run (`rates`: run name -> (its RunRate or None, its
    intervals))."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.results: List[Tuple[Run, RunVerdict]] = []
        self.rates: Dict[str, tuple] = {}

    def log(self, message: str) -> None:
        say(self.plan, message)

    def add(self, run: Run, verdict: RunVerdict) -> None:
        """Records a run's verdict and prints its line for every node."""
        self.results.append((run, verdict))
        everyone = verdict.outcomes
        for node, o in sorted(everyone.items()):
            who = "" if len(everyone) == 1 else (
                "this node" if node == self.plan.index
                else node_name(self.plan, node)) + ": "
            if o.ok:
                kept = " (reused: kept from the log tree)" \
                    if o.reused else ""
                # A run that failed on another node measured nothing valid.
                rate = self._rate_text(run, node) if verdict.ok else ""
                self.log(f"{run.name}: {who}ok{kept}{rate}")
            else:
                self.log(f"{run.name}: {who}{o.status.value.upper()} "
                         f"({_how(o)})"
                         f"{': ' + o.reason if o.reason else ''}"
                         f"; log {o.log}")

    def _rate_text(self, run: Run, node: int) -> str:
        """', 1075.3 img/s (median of 5 intervals, ...)' for node 0's run
        with a measured rate, else ''."""
        rate, _ = self.rates.get(run.name, (None, None))
        if node != 0 or node != self.plan.index or rate is None:
            return ""
        return ", " + rate.describe()

    def summary(self, reused: set) -> None:
        """The closing lines; `reused`: the run names RESUME=1 kept."""
        ok = sum(1 for _, v in self.results if v.ok)
        self.log(f"done: {ok} of {len(self.results)} run(s) ok on every node"
                 f" ({len(self.plan.runs)} planned); logs under "
                 f"{self.plan.log_root}")
        for run, verdict in self.results:
            everyone = verdict.outcomes
            status = ", ".join(
                (f"node {k} " if len(everyone) > 1 else "") + o.status.value
                + ("" if o.ok else f" ({_how(o)})")
                for k, o in sorted(everyone.items()))
            kept = " (reused)" if verdict.reused else ""
            # A run that failed on any node measured nothing valid: its
            # intervals so far are no throughput to show.
            rate = self._rate_text(run, 0) if verdict.ok else ""
            self.log(f"  {run.name}: {status}{kept}{rate}")
        names = [run.name for run in self.plan.runs if run.name in reused]
        if names:
            self.log(f"reused (RESUME=1, status ok): {', '.join(names)}")
        if self.plan.index == 0 and ok:
            self.log("extract: " + self.extract_command())

    def extract_command(self) -> str:
        """The extractor command for this log tree, with the window flags
        the ok runs need when they are shorter than DLPerf's 100-600."""
        runs = [self.rates[run.name][1] for run, verdict in self.results
                if run.name in self.rates and verdict.ok]
        s = self.plan.settings
        argv = [s.launch_python or sys.executable, _relative(os.path.join(
                    preflight.REPO_ROOT, "extract_tensorflow_logs.py")),
                "--log_dir", _relative(self.plan.log_root)]
        backend = self.plan.backend.name
        if backend != backend_choice.DEFAULT:
            # Beside, not over, the TensorFlow sweep's result/bz{B}_result.*
            argv += ["--output_dir", os.path.join("result", backend)]
        window = progress.extractor_window(runs)
        note = ""
        if s.bench == "allreduce":
            # Its runs log no intervals; the tree's training runs set it.
            argv += ["--window", "auto"]
            note = ("  (an all-reduce sweep times no steps: --window auto "
                    "takes the window from the tree's training runs)")
        elif window == (0, 0):
            note = ("  (no common window after the first interval: run "
                    "more steps, STEPS, or fewer steps per line, LOG_STEPS)")
        elif window is not None:
            argv += ["--warmup_batches", str(window[0]),
                     "--train_batches", str(window[1])]
        return shlex.join(argv) + note


def _how(o) -> str:
    """Why a run's outcome on a node is not ok, in a few words."""
    return "a file could not be written" if o.cannot_write \
        else es.describe(o.rc)


def _relative(path: str) -> str:
    """path relative to the working directory when it lies under it
    (shorter to copy), else absolute."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel
