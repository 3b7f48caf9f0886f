"""The sweep's start-up on this node: from the settings to the Runner.

`start` plans the sweep (plan.py), checks before anything is written what
can be checked (a node that does not resolve, DATA_DIR, the trainer's
Python: preflight.py), says what it will do (plan_report.py) and, unless
it is a dry run: claims the case directories (claims.py), meets the other
nodes at "hello" (node_link.py: every node's problems, node 0's session
stamp, every node's survey of its old runs), settles the runs already in
the tree the same way on every node (resume.py: refused, RESUME=1 or
OVERWRITE=1), and makes the Runner (runner.py) with all it needs. Every
way it ends is a status of contracts/exit_status.py.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from typing import Dict, List, Optional, Tuple

from official_bench.config import ConfigError
from official_bench.contracts import exit_status as es, log_tree
from official_bench.host.write_errors import NotWritable
from official_bench.launch import plan_report, preflight, resume
from official_bench.launch.barrier import BarrierError
from official_bench.launch.claims import ClaimError, Claims, claim_name
from official_bench.launch.errors import PlanError, dry_run_note
from official_bench.launch.node_link import NodeLink
from official_bench.launch.node_list import NodeError
from official_bench.launch.plan import Bench, Plan, make_plan
from official_bench.launch.runner import Interrupted, Runner
from official_bench.launch.settings import Settings
from official_bench.launch.sweep_report import node_name, say


def start(settings: Settings) -> int:
    """The launcher once its settings are read: plan, checks, the plan
    said, then the sweep (or the dry run's commands); its exit status."""
    stamp = log_tree.session_stamp()
    try:
        plan = make_plan(settings, stamp)
    except NodeError as e:
        print(f"error: {settings.script}: {e}", file=sys.stderr)
        return es.CLUSTER
    except (PlanError, ConfigError) as e:
        print(f"error: {settings.script}: {e}", file=sys.stderr)
        return es.CONFIG
    unresolved = plan.nodeset.unresolved if plan.nodeset else []
    if unresolved and not settings.dry_run:
        print(f"error: {settings.script}: {unresolved[0]}", file=sys.stderr)
        return es.CLUSTER
    for problem in unresolved:
        plan.notes.append(dry_run_note(problem, es.CLUSTER))
    cannot_run = None
    if not settings.dry_run and not (plan.horovod and plan.horovod.idle):
        # DATA_DIR's problem first: it needs no interpreter check to say.
        cannot_run = plan.data_problem or check_trainer_python(plan)
        if cannot_run and not plan.uses_barrier:
            print(f"error: {settings.script}: {cannot_run}", file=sys.stderr)
            return es.CONFIG
    cannot_write = None
    if not (plan.horovod and plan.horovod.idle):
        cannot_write = output_problem(plan)
        if cannot_write and (settings.dry_run or not plan.uses_barrier):
            print(f"error: {settings.script}: {cannot_write}",
                  file=sys.stderr)
            return es.NOT_WRITABLE
    if settings.dry_run:
        _note_old_runs(plan)
    plan_report.describe(plan)
    if plan.horovod is not None and plan.horovod.idle:
        say(plan, f"LAUNCHER=horovod: nothing to run on node {plan.index}: "
            f"horovodrun on node 0 ({plan.horovod.hosts[0]}) starts the "
            "ranks of every node over ssh (starting the script on node 0 "
            "alone is enough)")
        return es.OK
    if settings.dry_run:
        plan_report.print_dry_run(plan)
        return es.OK
    return _sweep(plan, stamp, cannot_run, cannot_write)


def _note_old_runs(plan: Plan) -> None:
    """A dry run says what a real run would do with the runs of this sweep
    already in this node's tree (resume.py): stop (exit LOGS_IN_USE), or
    what RESUME=1 keeps / OVERWRITE=1 replaces."""
    s = plan.settings
    names = [r.name for r in plan.runs]
    survey = resume.survey(plan.runs)
    decision = resume.decide(s.resume, s.overwrite, names,
                             {plan.index: survey}, plan.index, plan.log_root)
    if decision.problem:
        plan.notes.append(dry_run_note(decision.problem,
                                       es.LOGS_IN_USE))
    elif s.resume and decision.reuse:
        rest = "nothing to run" if len(decision.reuse) == len(names) \
            else "runs the others"
        plan.notes.append(f"RESUME=1: a real run keeps "
                          f"{', '.join(decision.reuse)} (status ok) and "
                          f"{rest}")
        plan.notes.extend(resume.version_notes(plan.runs, decision.reuse))
    elif s.overwrite and decision.replace:
        plan.notes.append(f"OVERWRITE=1: a real run replaces "
                          f"{', '.join(decision.replace)} once every run "
                          "is ok")


def output_problem(plan: Plan) -> Optional[str]:
    """The one-line problem with LOG_DIR or MODEL_DIR (a file where a
    folder must be made), naming the setting and where it came from; or
    None."""
    s = plan.settings
    folders = {}
    for run in plan.runs:
        for w in run.workers:
            folders.setdefault(os.path.dirname(w.log_path),
                               ("log_dir", "the log folder"))
            folders.setdefault(os.path.dirname(w.model_dir),
                               ("model_dir", "the model_dir folder"))
    for folder, (name, what) in folders.items():
        why = preflight.not_a_directory(folder)
        if why:
            return f"{s.describe(name)}: cannot make {what} {folder}: {why}"
    return None


def check_trainer_python(plan: Plan) -> Optional[str]:
    """The one-line problem with the trainer's Python for the plan's
    backend, or None (also when PYTHON_CHECK_TIMEOUT=0). Checked with the
    environment of run 1."""
    s = plan.settings
    if not s.python_check_timeout:
        return None
    env = dict(s.environ)
    env.update(plan.runs[0].env)
    problem = preflight.check(plan.python.python, env,
                              s.python_check_timeout, plan.check_modules)
    if problem is None:
        return None
    return preflight.cannot_run_text(
        plan.python.described, problem,
        preflight.fix_advice(plan.python.chosen_by, preflight.REPO_ROOT,
                             plan.backend.name, plan.python.if_unset))


def _stop_on_signals() -> None:
    """SIGTERM, SIGINT and SIGHUP raise Interrupted wherever the launcher
    is, so that its trainers are stopped and its claims released."""
    def on_signal(signum, frame):
        raise Interrupted(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)


def _sweep(plan: Plan, stamp: str, cannot_run: Optional[str],
           cannot_write: Optional[str] = None) -> int:
    """Holds this node's claims on the log tree for the whole sweep."""
    _stop_on_signals()
    claims = Claims(plan.settings.script,
                    f"{os.getpid()}-{uuid.uuid4().hex}")
    try:
        return run_with_claims(plan, stamp, cannot_run, claims, cannot_write)
    except NotWritable as e:
        say(plan, f"error: {e}", stream=sys.stderr)
        return es.NOT_WRITABLE
    except Interrupted as e:
        say(plan, f"interrupted by {e}; no run started", stream=sys.stderr)
        return es.by_signal(e.signum)
    finally:
        claims.release()


def claim_logs(plan: Plan, claims: Claims) -> Tuple[Optional[str], Dict]:
    """(problem or None, this node's survey): claims every case directory
    this node writes, then lists the planned runs already there."""
    name = claim_name(plan.batch, plan.dtype, Bench.of(plan.settings).name)
    try:
        for folder in sorted({os.path.dirname(r.log_path)
                              for r in plan.runs}):
            claims.take(folder, name, plan.settings.log_dir)
    except ClaimError as e:
        return str(e), {}
    for note in claims.notes:
        say(plan, f"note: {note}")
    return None, resume.survey(plan.runs)


def run_with_claims(plan: Plan, stamp: str, cannot_run: Optional[str],
                    claims: Claims, cannot_write: Optional[str] = None
                    ) -> int:
    """Claims the log tree, meets the other nodes, settles old runs,
    runs the sweep. `cannot_write` (output_problem; several nodes only)
    claims nothing and stops every node at "hello"."""
    logs_problem, survey = (None, {}) if cannot_write else \
        claim_logs(plan, claims)
    if logs_problem and not plan.uses_barrier:
        say(plan, f"error: {logs_problem}", stream=sys.stderr)
        return es.LOGS_IN_USE
    link: Optional[NodeLink] = None
    runner: Optional[Runner] = None
    try:
        surveys = {plan.index: survey}
        if plan.uses_barrier:
            for text in (cannot_run, cannot_write, logs_problem):
                if text:
                    say(plan, f"error: this node: {text}; telling the "
                        "other nodes", stream=sys.stderr)
            _say_if_refused_at_hello(plan, survey)
            link = NodeLink.open(plan)
            status, surveys = _hello(plan, link, stamp, {
                "cannot_run": cannot_run, "cannot_write": cannot_write,
                "logs_problem": logs_problem, "existing": survey})
            if status is not None:
                return status
        refused, reuse, replaced = settle_logs(plan, surveys, stamp)
        if refused:
            say(plan, f"error: {refused}", stream=sys.stderr)
            return es.LOGS_IN_USE
        swap = OverwriteSwap(plan, replaced, stamp) if replaced else None
        runner = Runner(plan, link, frozenset(reuse),
                        on_end=swap.end if swap else None)
        try:
            return runner.run_all()
        finally:
            if swap is not None and not swap.ended:
                swap.end(False)  # stopped: a signal, a lost node
    except BarrierError as e:
        say(plan, f"error: {e}", stream=sys.stderr)
        if runner is not None and runner.report.results:
            runner.summary()
        return es.BARRIER_TIMEOUT if e.missing else es.CLUSTER
    except Interrupted as e:
        # The other nodes first: they stop waiting for this one at once.
        told = "" if link is None else \
            f"; {link.leave(f'interrupted by {e}')}"
        say(plan, f"interrupted by {e}; {_what_stopped(runner)}{told}",
            stream=sys.stderr)
        return es.by_signal(e.signum)
    finally:
        if link is not None:
            link.close()


def _what_stopped(runner: Optional[Runner]) -> str:
    """What a signal ended: a trainer, or none (at the barrier's hello,
    between runs)."""
    if runner is None or (not runner.report.results and
                          not runner.stopped_a_trainer):
        return "no run started"
    return "trainer stopped" if runner.stopped_a_trainer else \
        "no trainer was running"


def _hello(plan: Plan, link: NodeLink, stamp: str,
           extra: Dict) -> Tuple[Optional[int], Dict[int, Dict]]:
    """The "hello" round: (an exit status when a node cannot start the
    trainer or its log tree is in use, else None; every node's survey).
    Takes node 0's session stamp for this node's model_dirs."""
    hello = link.hello(stamp, extra)
    say(plan, "barrier: all nodes arrived: " + ", ".join(
        f"node {k} on {v.get('host')} (pid {v.get('pid')})"
        for k, v in sorted(hello.items())))
    # (hello key, what the node's line says, summary, exit status); this
    # node's own cannot_write and logs_problem were said before hello.
    for key, what, summary, status in (
            ("cannot_run", " cannot start the trainer",
             "{n} node(s) cannot start the trainer", es.CONFIG),
            ("cannot_write", "", "{n} node(s) cannot make their output "
             "folders", es.NOT_WRITABLE),
            ("logs_problem", "", "the log tree of {n} node(s) is in use",
             es.LOGS_IN_USE)):
        found = {k: v[key] for k, v in sorted(hello.items()) if v.get(key)}
        for k, text in found.items():
            if k == plan.index and key != "cannot_run":
                continue
            who = "this node" if k == plan.index else node_name(plan, k)
            say(plan, f"error: {who}{what}: {text}", stream=sys.stderr)
        if found:
            say(plan, "no run started (on any node): " +
                summary.format(n=len(found)), stream=sys.stderr)
            return status, {}
    head_stamp = (hello.get(0) or {}).get("stamp")
    if head_stamp and head_stamp != stamp:
        plan.restamp(head_stamp)
    return None, {k: v.get("existing") or {} for k, v in hello.items()}


def _say_if_refused_at_hello(plan: Plan, survey: Dict) -> None:
    """Before waiting for the other nodes: a note when this node's own
    tree already refuses the sweep (runs of it there, neither RESUME nor
    OVERWRITE), so a node started alone does not wait in silence for the
    refusal the meeting will give."""
    s = plan.settings
    refused = resume.decide(s.resume, s.overwrite,
                            [r.name for r in plan.runs],
                            {plan.index: survey}, plan.index,
                            plan.log_root).problem
    if refused:
        say(plan, f"note: this node's log tree already refuses the sweep "
            f"(exit {es.LOGS_IN_USE} once the nodes meet): {refused}")


def settle_logs(plan: Plan, surveys: Dict[int, Dict], stamp: str
                ) -> Tuple[Optional[str], List[str], List[str]]:
    """RESUME / OVERWRITE / refuse, the same way on every node (see
    resume.py): RESUME moves old files aside now, OVERWRITE stages the new
    runs. (The refusal line or None, the runs RESUME=1 keeps, the runs
    OVERWRITE=1 replaces.)"""
    s = plan.settings
    decision = resume.decide(s.resume, s.overwrite,
                             [r.name for r in plan.runs], surveys,
                             plan.index, plan.log_root)
    if decision.problem:
        return decision.problem, [], []
    if decision.replace and s.overwrite:
        folders = resume.stage(plan.runs, stamp)
        say(plan, f"OVERWRITE=1: this sweep writes into "
            f"{', '.join(folders)}; once every run is ok the files of "
            f"{', '.join(decision.replace)} move aside into "
            f"{resume.REPLACED_PREFIX}{stamp}/ and the new ones take "
            "their place (until then the extractor reads the old runs)")
    elif decision.replace:
        folders = resume.move_aside(plan.runs, decision.replace, stamp)
        say(plan, f"RESUME=1: moved the files of "
            f"{', '.join(decision.replace)} aside into "
            + ", ".join(folders))
    if decision.reuse:
        say(plan, f"RESUME=1: keeping {', '.join(decision.reuse)} "
            "(status ok); running the others")
        for note in resume.version_notes(plan.runs, decision.reuse):
            say(plan, f"note: {note}")
    return None, decision.reuse, decision.replace if s.overwrite else []


class OverwriteSwap:
    """OVERWRITE=1's end on this node (resume.py): owns the old runs the
    sweep replaces and whether the end has come (`ended`). A sweep that
    ended ok replaces them; any other end leaves them where the extractor
    reads them."""

    def __init__(self, plan: Plan, replaced: List[str], stamp: str):
        self.plan = plan
        self.replaced = list(replaced)
        self.stamp = stamp
        self.ended = False

    def end(self, ok: bool) -> None:
        """The Runner's on_end: after the last run, before the summary."""
        self.ended = True
        plan, replaced = self.plan, ", ".join(self.replaced)
        if not ok:
            folders = sorted({os.path.dirname(w.log_path) for r in plan.runs
                              for w in r.workers})
            say(plan, "OVERWRITE=1: the sweep did not end ok, so the old "
                f"runs ({replaced}) stay where the extractor reads them; "
                f"this sweep's files are in {', '.join(folders)}",
                stream=sys.stderr)
            return
        folders = resume.swap_in(plan.runs, self.replaced, self.stamp)
        say(plan, f"OVERWRITE=1: every run ok: moved the files of "
            f"{replaced} aside into {', '.join(folders)}; the new runs are "
            "in their place")
