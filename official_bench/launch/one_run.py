"""Executes one run on this node: from fresh model directories to an outcome.

For each of the run's processes (one, or WORKERS_PER_NODE): a model_dir
of its own (the next attempt, -2, -3, ..., when the planned one exists),
its log created exclusively with the launcher's header, the trainer
started (trainer_process.py) and waited for while node 0 follows the
chief's log (progress.py), its outcome judged (outcome.py, where every
rule of how a run went lives), the trainer's result copied beside the log
(never over an existing file), a closing line in the log and a status
record beside it. Every write goes through host/write_errors: one that
fails (disk full, quota, read-only, permission) fails the run for that
reason and asks the sweep to stop (Outcome.stop).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import shlex
import socket
import time
from typing import Callable, List, Optional, TextIO

from official_bench.contracts import exit_status as es, log_tree, run_status
from official_bench.contracts.tf_config import tf_config_json
from official_bench.host import atomic
from official_bench.host.write_errors import NotWritable, writing
from official_bench.launch import progress
from official_bench.launch.outcome import (
    Outcome,
    Status,
    could_not_start,
    could_not_write,
    exit_words,
    judge,
    no_throughput_text,
    node_outcome,
    result_path,
)
from official_bench.launch.plan import Plan, Run, Worker
from official_bench.launch.sweep_report import say
from official_bench.launch.trainer_process import (
    TrainerProcess,
    stop_all,
    wait_all,
)
from official_bench.measure import host_env

# The log header's line with the trainer's command (resume.py reads it).
COMMAND_LINE = "# command: "
# The header's line naming the suite that runs ("0.1.0 (git e92555b)",
# measure/host_env.suite; resume.py compares it, as result.json records it).
SUITE_LINE = "# official_bench: "
# ... and the line with the sha256 of the trainer's --config_file as the run
# started (resume.py: a config edited in place since is another setup).
CONFIG_LINE = "# config file sha256: "
CONFIG_FLAG = "--config_file="


def config_digest(command) -> Optional[str]:
    """sha256 of the file a trainer command's --config_file names, or None
    (no such argument, or the file cannot be read)."""
    for arg in command:
        if arg.startswith(CONFIG_FLAG):
            try:
                with open(arg[len(CONFIG_FLAG):], "rb") as f:
                    return hashlib.sha256(f.read()).hexdigest()
            except OSError:
                return None
    return None


class OneRun:
    """One run of the plan on this node: owns its processes' log files,
    their trainer processes, whether a trainer started, and node 0's
    measured rate of it (`rate`: (RunRate or None, intervals), or None)."""

    def __init__(self, plan: Plan, run: Run,
                 peer_failure: Optional[Callable[[], Optional[str]]] = None):
        self.plan = plan
        self.s = plan.settings
        self.run = run
        self.peer_failure = peer_failure  # a peer node's failure, or None
        self.trainer_started = False
        self.rate: Optional[tuple] = None

    def execute(self) -> Outcome:
        """Runs this node's trainer process(es) for the run; one Outcome
        for the node (the first failing process's, if any). A file the
        launcher cannot write (disk full, quota, read-only, permission)
        fails the run for that reason and stops the sweep (Outcome.stop)."""
        started = time.time()
        self.trainer_started = False
        try:
            return self._execute()
        except NotWritable as e:
            return self._cannot_write(e, started)

    def _cannot_write(self, error: NotWritable, started: float) -> Outcome:
        """The run failed because a file could not be written: say so in
        its status record and log when they still can be written (best
        effort: the disk may have no room for them either)."""
        run = self.run
        reason = str(error)
        for w in run.processes():
            if not self.trainer_started:
                # Only the launcher's header could be in it: no run to keep
                # (a later RESUME=1 then sees the run as missing).
                with contextlib.suppress(OSError):
                    os.remove(w.log_path)
                continue
            with contextlib.suppress(OSError):
                self._write_status(w, Status.FAILED, None, reason, started)
            with contextlib.suppress(OSError):
                if os.path.exists(w.log_path):
                    with open(w.log_path, "a", encoding="utf-8") as log:
                        log.write(f"# official_bench.launch: {run.name} "
                                  f"failed: {reason}\n")
        return could_not_write(reason, run.log_path)

    def _execute(self) -> Outcome:
        run = self.run
        with writing(os.path.dirname(run.log_path), "the case directory"):
            os.makedirs(os.path.dirname(run.log_path), exist_ok=True)
        workers = [prepare(w) for w in run.processes()]
        logs: List[TextIO] = []
        try:
            for w in workers:
                logs.append(open_log(w.log_path))
            for w, log in zip(workers, logs):
                with writing(w.log_path, "the run's log"):
                    log.write(self._header(w))
                    log.flush()
            say(self.plan, f"{run.name}: starting, log {run.log_path}"
                + (f" (+ {len(workers) - 1} local worker log(s) beside "
                   "it, .local1...)" if len(workers) > 1 else ""))
            started = time.time()
            procs, failed = self._start(workers, logs)
            if failed is not None:
                return failed
            self._wait(workers, logs, procs)
            outcomes = [judge(w, p, self.s) for w, p in zip(workers, procs)]
            for w, o in zip(workers, outcomes):
                if o.ok:
                    copy_result(w)
            self._close(workers, logs, outcomes, started)
        finally:
            for log in logs:
                with contextlib.suppress(OSError):
                    log.close()
        return node_outcome(outcomes, workers, procs)

    def _start(self, workers: List[Worker], logs: List[TextIO]) -> tuple:
        """(the started processes, None), or (..., the failed Outcome) when
        one cannot start (the ones started before it are stopped)."""
        procs: List[TrainerProcess] = []
        for w, log in zip(workers, logs):
            try:
                procs.append(TrainerProcess(w, self.plan, log))
            except OSError as e:
                stop_all(procs, f"{w.label} could not start", 5.0)
                whose = f" of {w.label}" if len(workers) > 1 else ""
                for lg in logs:
                    lg.write(f"# official_bench.launch: cannot start "
                             f"the trainer{whose}: {e}\n")
                return procs, could_not_start(e, w.log_path)
        self.trainer_started = True
        return procs, None

    def _wait(self, workers: List[Worker], logs: List[TextIO],
              procs: List[TrainerProcess]) -> None:
        """Waits for the processes (node 0 following the run's progress);
        stops them when the launcher is interrupted."""
        watch = self._progress()
        try:
            wait_all(procs, [w.label for w in workers], self.s.kill_after,
                     self.peer_failure, watch.poll if watch else None,
                     lambda i: exit_words(workers[i], procs[i]))
        except BaseException as e:
            stop_all(procs, f"launcher interrupted ({e!r})",
                     min(self.s.kill_after, 5.0))
            for lg in logs:
                lg.write(f"# official_bench.launch: {self.run.name} "
                         f"interrupted ({e!r}); trainer stopped\n")
            raise
        if watch is not None:
            self.rate = (watch.finish(), watch.intervals)

    def _close(self, workers: List[Worker], logs: List[TextIO],
               outcomes: List[Outcome], started: float) -> None:
        """The closing line of each log and each process's status record."""
        run = self.run
        for o, w, log in zip(outcomes, workers, logs):
            reason = no_throughput_text(o.reason or "")
            with writing(w.log_path, "the run's log"):
                log.write(f"# official_bench.launch: {run.name} "
                          f"{o.status.value} ({es.describe(o.rc)}"
                          f"{'; ' + reason if reason else ''})\n")
                log.flush()
        for w, o in zip(workers, outcomes):
            path = log_tree.status_path(w.log_path)
            with writing(path, "the run's status record"):
                self._write_status(w, o.status, o.rc,
                                   no_throughput_text(o.reason), started)

    def _write_status(self, worker: Worker, status: Status,
                      rc: Optional[int], reason: str, started: float) -> None:
        """The status record beside one process's log
        (contracts/run_status.py)."""
        run_status.write_status(
            worker.log_path, status=status.value, rc=rc, reason=reason,
            started=started, ended=time.time(), node=self.plan.index,
            host=hostname(), worker=worker.label if self.run.many else "")

    def _progress(self) -> Optional[progress.RunProgress]:
        """Node 0 follows its run's log (the chief's, which holds the
        rates); other nodes print their status only."""
        if self.plan.index != 0:
            return None
        run = self.run
        return progress.RunProgress(
            run.log_path, f"{run.case} run {run.index}/{run.of or '?'}",
            run.total_steps, self.s.quiet,
            lambda line: print(line, flush=True))

    def _header(self, worker: Worker) -> str:
        plan, run = self.plan, self.run
        many = run.many
        lines = [f"# official_bench.launch: {plan.settings.script} "
                 f"{run.name}, node {plan.index} of {plan.num_nodes}"
                 + (f", {worker.label} of {len(run.workers)} on this node"
                    if many else "")
                 + f" on {hostname()}, {time.strftime('%Y-%m-%d %H:%M:%S')}",
                 COMMAND_LINE + shlex.join(worker.command),
                 SUITE_LINE + host_env.suite()]
        digest = config_digest(worker.command)
        if digest:
            lines.append(CONFIG_LINE + digest)
        if worker.env:
            lines.append("# environment: " + " ".join(
                f"{k}={shlex.quote(v)}"
                for k, v in sorted(worker.env.items())))
        if plan.horovod is not None:
            lines.append(
                "# horovodrun: " + ",".join(
                    f"{h}:{run.devices}" for h in plan.horovod.hosts)
                + f" ({run.devices * len(plan.horovod.hosts)} ranks; "
                "rank r's lines start with [r])")
        elif many:
            lines.append("# TF_CONFIG: " + tf_config_json(
                {"worker": plan.cluster}, "worker", worker.task)
                + " (as runtime.worker_hosts + task_index)")
        elif plan.nodeset is not None:
            lines.append(f"# TF_CONFIG: {plan.nodeset.tf_config_json()}"
                         + ("" if plan.nodeset.tf_config else
                            " (as runtime.worker_hosts + task_index)"))
        return "\n".join(lines) + "\n"


def prepare(worker: Worker) -> Worker:
    """A fresh model_dir for one process: the planned one, or its next
    attempt (-2, -3, ...) if it exists. Its log, JSON and status are
    not removed: the launcher's claim and resume.py made sure there
    are none, and the log is created exclusively (open_log)."""
    spec = worker.model_dir_spec
    while os.path.exists(spec.path):
        spec = spec.next_attempt()
    with writing(spec.path, "the run's model directory"):
        os.makedirs(spec.path)
    return dataclasses.replace(worker, model_dir_spec=spec)


def open_log(path: str) -> TextIO:
    """The run's log, created exclusively (O_EXCL): a second writer
    gets FileExistsError instead of sharing the file."""
    with writing(path, "the run's log"):
        return open(path, "x", encoding="utf-8", buffering=1)


def copy_result(worker: Worker) -> None:
    """The trainer's result file, copied to the run's JSON beside its log:
    whole or not at all, never over an existing file."""
    with open(result_path(worker), encoding="utf-8") as f:
        text = f.read()
    with writing(worker.json_path, "the run's result JSON (copy)"):
        atomic.write_text_atomic(worker.json_path, text, exclusive=True)


def hostname() -> str:
    return socket.gethostname()
