"""Runs the plan: one trainer process per run, logs, barriers, a summary."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Dict, List, Optional, TextIO

from official_bench.contracts import exit_status as es
from official_bench.contracts.tf_config import tf_config_json
from official_bench.contracts.throughput import DLPERF_KEYWORD, TIMEOUT_MARK
from official_bench.launch import auth
from official_bench.launch import barrier as barrier_lib
from official_bench.launch import preflight
from official_bench.launch import progress
from official_bench.launch.plan import Plan, Run, Worker
from official_bench.contracts import run_status
from official_bench.contracts import log_tree
from official_bench.host import processes
from official_bench.host.write_errors import NotWritable, writing

EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_CLUSTER, EXIT_PEER = (
    es.OK, es.FAILED, es.CONFIG, es.CLUSTER, es.BARRIER_TIMEOUT)
TRAINER_EXIT = {
    es.CONFIG: "bad configuration", es.CLUSTER: "cluster problem",
    es.PEER_LOST: "a peer task went away mid-run",
    es.INTERRUPTED: "interrupted (SIGINT)",
    es.BARRIER_TIMEOUT: "a peer never arrived (runtime.peer_timeout_seconds)",
    es.TIMEOUT: "timed out (RUN_TIMEOUT), stopped with SIGTERM",
    es.KILLED: "killed (SIGKILL)", es.TERMINATED: "terminated (SIGTERM)",
}
PEEK_SECONDS = 2.0
LOST_AFTER = 30.0  # + KILL_AFTER: silence that means a launcher stopped


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# Outcome.stop: why every node stops the sweep after this run.
STOP_NOT_WRITABLE = "not_writable"


@dataclasses.dataclass
class Outcome:
    rc: Optional[int]
    status: str  # ok | failed | aborted
    reason: str
    log: str
    stop: str = ""  # STOP_NOT_WRITABLE: the next run would fail the same way

    def as_payload(self) -> Dict:
        return dataclasses.asdict(self)


def say(plan_or_prefix, message: str, stream: TextIO = None) -> None:
    prefix = plan_or_prefix if isinstance(plan_or_prefix, str) else \
        _prefix(plan_or_prefix)
    print(f"{prefix} {message}", file=stream or sys.stdout, flush=True)


def _prefix(plan: Plan) -> str:
    if plan.nodeset is None:
        return "[launch]"
    return f"[launch node {plan.index}/{plan.num_nodes}]"


def describe_exit(rc: Optional[int]) -> str:
    if rc is None:
        return "did not start"
    text = TRAINER_EXIT.get(rc)
    return f"exit {rc}" + (f": {text}" if text else "")


def last_error_line(path: str) -> str:
    """The most telling line at the end of a failed run's log."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()[-200:]
    except OSError:
        return ""
    for line in reversed(lines):
        text = line.strip()
        if text.startswith("#"):
            continue
        if text.startswith(("error:", TIMEOUT_MARK)) or \
                "Error:" in text or "Error " in text[:40]:
            return text[:300]
    for line in reversed(lines):
        if line.strip() and not line.startswith("#"):
            return no_throughput_text(line.strip()[:300])
    return ""


_LAST_STEP = re.compile(r"between steps \d+ and (\d+)")


def no_throughput_text(text: str) -> str:
    """What we write into a run's log must never read as a measurement:
    DLPerf's extractor counts every line containing 'TimeHistory'. A quoted
    throughput line becomes the step it reached."""
    if DLPERF_KEYWORD not in text and "examples/second" not in text:
        return text
    m = _LAST_STEP.search(text)
    return "no error line; the last logged interval ended at step " + \
        (m.group(1) if m else "?")


# --------------------------------------------------------------------------
# One trainer process
# --------------------------------------------------------------------------


class TrainerProcess:
    """The trainer under `timeout -k`, in its own process group."""

    def __init__(self, run: Worker, plan: Plan, log: TextIO):
        s = plan.settings
        self.kill_after = s.kill_after
        self.run_timeout = s.run_timeout
        timeout = shutil.which("timeout")
        self.command = list(run.command)
        if timeout:
            self.command = [timeout, "-k", f"{s.kill_after:g}s",
                            f"{s.run_timeout:g}s"] + self.command
        env = dict(s.environ)
        env.update(run.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(self.command, stdout=log,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env,
                                     start_new_session=True,
                                     preexec_fn=_parent_death_signal())
        self.started = time.monotonic()
        self.elapsed = 0.0
        self.ended: Optional[float] = None  # monotonic time of its exit
        self.rc: Optional[int] = None
        self.stopped_because: Optional[str] = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Waits for it (subprocess.TimeoutExpired past `timeout`); poll()."""
        self.proc.wait(timeout)
        return self.poll()

    def stop(self, why: str, grace: Optional[float] = None) -> None:
        """SIGTERM the group, SIGKILL it after `grace` seconds."""
        stop_all([self], why, self.kill_after if grace is None else grace)

    def poll(self) -> Optional[int]:
        """Its exit status once it ended (death by a signal as the shell
        reports it: 128 + the signal number), else None."""
        if self.rc is None:
            rc = self.proc.poll()
            if rc is not None:
                self.ended = time.monotonic()
                self.elapsed = self.ended - self.started
                self.rc = es.by_signal(-rc) if rc < 0 else rc
        return self.rc

    @property
    def limit(self) -> float:
        """Safety net: past this, `timeout` itself failed to stop it."""
        return self.started + self.run_timeout + self.kill_after + 30


def stop_all(procs: List[TrainerProcess], why: str, grace: float) -> None:
    """SIGTERM every running group at once, SIGKILL those still running
    after `grace` seconds (TensorFlow may ignore SIGTERM)."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        p.stopped_because = p.stopped_because or why
    processes.stop_groups(running, grace)


def wait_all(procs: List[TrainerProcess], labels: List[str], kill_after: float,
             poll: Optional[callable] = None,
             tick: Optional[callable] = None) -> List[int]:
    """Waits for a node's trainer processes; their exit statuses.

    One failing stops the node's others (a multi_worker_mirrored peer would
    otherwise hang in its next collective); `poll()` returning a reason (a
    peer node failed) stops them all; `tick()` runs at every wake-up (the
    progress lines).
    """
    grace = min(kill_after, 10.0)
    next_peek = time.monotonic() + PEEK_SECONDS
    while True:
        if tick is not None:
            tick()
        for p, label in zip(procs, labels):
            if p.poll() is None or p.rc == 0 or len(procs) == 1:
                continue
            others = [q for q in procs if q is not p and q.poll() is None]
            if others:
                stop_all(others, f"stopped because {label} of this node "
                         f"failed ({describe_exit(p.rc)})", grace)
        if all(p.poll() is not None for p in procs):
            return [p.rc for p in procs]
        now = time.monotonic()
        late = [p for p in procs if p.poll() is None and now > p.limit]
        if late:
            stop_all(late, "timed out (RUN_TIMEOUT)", 1.0)
            continue
        if poll is not None and now >= next_peek:
            next_peek = now + PEEK_SECONDS
            reason = poll()
            if reason:
                stop_all(procs, reason, grace)
                continue
        time.sleep(0.2)


def _parent_death_signal():
    """Linux: SIGTERM the trainer's `timeout` if the launcher dies (even by
    SIGKILL); `timeout` then escalates to SIGKILL after KILL_AFTER. The
    trainer runs in its own session, so nothing else would stop it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def preexec():
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    return preexec


def _node_outcome(outcomes: List[Outcome], workers: List[Worker],
                  procs: List[TrainerProcess]) -> Outcome:
    """One process: its outcome. Several: ok when all are; else the process
    that failed first (by its exit time), named; else the first aborted."""
    if len(outcomes) == 1:
        return outcomes[0]
    failed = sorted((p.ended or 0.0, i) for i, (o, p) in
                    enumerate(zip(outcomes, procs)) if o.status == "failed")
    picked = failed[0][1] if failed else next(
        (i for i, o in enumerate(outcomes) if o.status != "ok"), None)
    if picked is None:
        return outcomes[0]
    o = outcomes[picked]
    return Outcome(o.rc, o.status, f"{workers[picked].label}: {o.reason}"
                   if o.reason else workers[picked].label, o.log)


# --------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------


class Runner:
    def __init__(self, plan: Plan, stamp: str = ""):
        self.plan = plan
        self.s = plan.settings
        self.stamp = stamp  # of this launch; node 0's is shared at "hello"
        self.client: Optional[barrier_lib.Client] = None
        self.coordinator: Optional[barrier_lib.Coordinator] = None
        self.current: Optional[List[TrainerProcess]] = None
        self.results: List[tuple] = []  # (run, {node: payload})
        # Node 0: run name -> (its RunRate or None, its intervals).
        self.rates: Dict[str, tuple] = {}
        self.reused: set = set()  # run names RESUME=1 keeps (resume.py)
        self.trainer_started = False  # in the current run

    def log(self, message: str) -> None:
        say(self.plan, message)

    # -- barrier -----------------------------------------------------------

    def _node_name(self, i: int) -> str:
        nodes = self.plan.nodeset.nodes
        return f"node {i} ({nodes[i].address})"

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
        payload = {"host": _hostname(), "pid": os.getpid(),
                   "stamp": self.stamp, **(extra or {})}
        return self.client.meet("hello", payload, self.s.barrier_timeout)

    def meet(self, round_name: str, payload, timeout: float,
             stale_after: Optional[float] = None):
        """Meets the other nodes; gives up early on a launcher that stopped."""
        return self.client.meet(round_name, payload, timeout,
                                stale_after=stale_after,
                                lost_after=LOST_AFTER + self.s.kill_after)

    # -- one run -----------------------------------------------------------

    def _prepare(self, worker: Worker) -> Worker:
        """A fresh model_dir for one process: the planned one, or its next
        attempt (-2, -3, ...) if it exists. Its log, JSON and status are
        not removed: the launcher's claim and resume.py made sure there
        are none, and the log is created exclusively (_open_log)."""
        spec = worker.model_dir_spec
        while os.path.exists(spec.path):
            spec = spec.next_attempt()
        with writing(spec.path, "the run's model directory"):
            os.makedirs(spec.path)
        return dataclasses.replace(worker, model_dir_spec=spec)

    def _open_log(self, path: str) -> TextIO:
        """The run's log, created exclusively (O_EXCL): a second writer
        gets FileExistsError instead of sharing the file."""
        with writing(path, "the run's log"):
            return open(path, "x", encoding="utf-8", buffering=1)

    def _header(self, run: Run, worker: Worker) -> str:
        plan = self.plan
        many = run.many
        lines = [f"# official_bench.launch: {plan.settings.script} "
                 f"{run.name}, node {plan.index} of {plan.num_nodes}"
                 + (f", {worker.label} of {len(run.workers)} on this node"
                    if many else "")
                 + f" on {_hostname()}, {time.strftime('%Y-%m-%d %H:%M:%S')}",
                 f"# command: {shlex.join(worker.command)}"]
        if worker.env:
            lines.append("# environment: " + " ".join(
                f"{k}={shlex.quote(v)}" for k, v in sorted(worker.env.items())))
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

    def execute(self, run: Run) -> Outcome:
        """Runs this node's trainer process(es) for one run; one Outcome
        for the node (the first failing process's, if any). A file the
        launcher cannot write (disk full, quota, read-only, permission)
        fails the run for that reason and stops the sweep (Outcome.stop)."""
        started = time.time()
        self.trainer_started = False
        try:
            return self._execute(run)
        except NotWritable as e:
            return self._cannot_write(run, e, started)

    def _cannot_write(self, run: Run, error: NotWritable,
                      started: float) -> Outcome:
        """The run failed because a file could not be written: say so in
        its status record and log when they still can be written (best
        effort: the disk may have no room for them either)."""
        reason = str(error)
        for w in run.processes():
            if not self.trainer_started:
                # Only the launcher's header could be in it: no run to keep
                # (a later RESUME=1 then sees the run as missing).
                with contextlib.suppress(OSError):
                    os.remove(w.log_path)
                continue
            with contextlib.suppress(OSError):
                run_status.write_status(
                    w.log_path, "failed", None, reason, started, time.time(),
                    self.plan.index, _hostname(),
                    w.label if run.many else "")
            with contextlib.suppress(OSError):
                if os.path.exists(w.log_path):
                    with open(w.log_path, "a", encoding="utf-8") as log:
                        log.write(f"# official_bench.launch: {run.name} "
                                  f"failed: {reason}\n")
        return Outcome(None, "failed", reason, run.log_path,
                       stop=STOP_NOT_WRITABLE)

    def _execute(self, run: Run) -> Outcome:
        with writing(os.path.dirname(run.log_path), "the case directory"):
            os.makedirs(os.path.dirname(run.log_path), exist_ok=True)
        workers = [self._prepare(w) for w in run.processes()]
        labels = [w.label for w in workers]
        logs: List[TextIO] = []
        try:
            for w in workers:
                logs.append(self._open_log(w.log_path))
            for w, log in zip(workers, logs):
                with writing(w.log_path, "the run's log"):
                    log.write(self._header(run, w))
                    log.flush()
            self.log(f"{run.name}: starting, log {run.log_path}"
                     + (f" (+ {len(workers) - 1} local worker log(s) beside "
                        "it, .local1...)" if len(workers) > 1 else ""))
            started = time.time()
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
                    return Outcome(None, "failed", f"cannot start: {e}",
                                   w.log_path)
            self.current = procs
            self.trainer_started = True
            end_round = f"end {run.name}"
            watch = self._progress(run)
            try:
                wait_all(procs, labels, self.s.kill_after,
                         self._peer_failure(end_round) if self.client
                         else None, watch.poll if watch else None)
            except BaseException as e:
                stop_all(procs, f"launcher interrupted ({e!r})",
                         min(self.s.kill_after, 5.0))
                for lg in logs:
                    lg.write(f"# official_bench.launch: {run.name} "
                             f"interrupted ({e!r}); trainer stopped\n")
                raise
            finally:
                self.current = None
            if watch is not None:
                self.rates[run.name] = (watch.finish(), watch.intervals)
            outcomes = [self._judge(w, p, p.rc) for w, p in zip(workers, procs)]
            for o, w, log in zip(outcomes, workers, logs):
                reason = no_throughput_text(o.reason or "")
                with writing(w.log_path, "the run's log"):
                    log.write(f"# official_bench.launch: {run.name} "
                              f"{o.status} ({describe_exit(o.rc)}"
                              f"{'; ' + reason if reason else ''})\n")
                    log.flush()
            for w, o in zip(workers, outcomes):
                path = log_tree.status_path(w.log_path)
                with writing(path, "the run's status record"):
                    run_status.write_status(
                        w.log_path, o.status, o.rc,
                        no_throughput_text(o.reason), started, time.time(),
                        self.plan.index, _hostname(),
                        w.label if len(workers) > 1 else "")
        finally:
            for log in logs:
                with contextlib.suppress(OSError):
                    log.close()
        return _node_outcome(outcomes, workers, procs)

    def _progress(self, run: Run) -> Optional[progress.RunProgress]:
        """Node 0 follows its run's log (the chief's, which holds the
        rates); other nodes print their status only."""
        if self.plan.index != 0:
            return None
        return progress.RunProgress(
            run.log_path, f"{run.case} run {run.index}/{run.of or '?'}",
            run.total_steps, self.s.quiet,
            lambda line: print(line, flush=True))

    def _peer_failure(self, end_round: str):
        def poll() -> Optional[str]:
            arrived = self.client.peek(end_round)
            for node, payload in sorted((arrived or {}).items()):
                if node != self.plan.index and payload and \
                        payload.get("status") != "ok":
                    return (f"stopped because {self._node_name(node)} failed "
                            f"this run ({describe_exit(payload.get('rc'))})")
            return None
        return poll

    def _judge(self, run: Worker, proc: TrainerProcess, rc: int) -> Outcome:
        if proc.stopped_because:
            return Outcome(rc, "aborted", proc.stopped_because, run.log_path)
        if rc in (es.TIMEOUT, es.KILLED) and \
                proc.elapsed >= self.s.run_timeout:
            return Outcome(rc, "failed", (
                f"still running after RUN_TIMEOUT={self.s.run_timeout:g} s: "
                "sent SIGTERM" + (f", then SIGKILL after KILL_AFTER="
                                  f"{self.s.kill_after:g} s" if rc == es.KILLED
                                  else "")), run.log_path)
        if rc != 0:
            return Outcome(rc, "failed", last_error_line(run.log_path),
                           run.log_path)
        result = os.path.join(run.model_dir, run.result_name)
        if not os.path.isfile(result):
            return Outcome(rc, "failed", f"the trainer wrote no {result}",
                           run.log_path)
        with open(result, encoding="utf-8") as f:
            text = f.read()
        with writing(run.json_path, "the run's result JSON (copy)"):
            write_text_exclusive(run.json_path, text)
        return Outcome(rc, "ok", "", run.log_path)

    # -- all runs ------------------------------------------------------------

    def _reuse(self, run: Run) -> None:
        """RESUME=1: a run whose status is ok on every node is kept as it
        is; node 0 reads its img/s back from its log."""
        everyone = {k: {"status": "ok", "rc": 0, "reason": "", "log":
                        run.log_path, "reused": True}
                    for k in range(self.plan.num_nodes)}
        if self.plan.index == 0:
            intervals = progress.read_intervals(run.log_path)
            self.rates[run.name] = (progress.run_rate(intervals), intervals)
        self.results.append((run, everyone))
        self._report(run, everyone)

    def run_all(self) -> int:
        plan = self.plan
        failed = 0
        multi = plan.uses_barrier
        executed = 0
        status, error = EXIT_OK, ""
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
                # Nodes still running peek every PEEK_SECONDS; a node silent
                # for longer than a stop takes has lost its launcher.
                everyone = self.meet(f"end {run.name}", outcome.as_payload(),
                                     wait, stale_after=LOST_AFTER +
                                     self.s.kill_after)
            else:
                everyone = {0: outcome.as_payload()}
            self.results.append((run, everyone))
            bad = {k: v for k, v in everyone.items() if v["status"] != "ok"}
            self._report(run, everyone)
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
                    EXIT_RUN_FAILED
                error = everyone.get(plan.index, {}).get("reason")
                break
            if bad:
                failed += 1
                if self.s.on_failure == "stop":
                    self.log(f"ON_FAILURE=stop: stopping after {run.name} "
                             "(on every node)")
                    break
        self._summary()
        if status == es.NOT_WRITABLE:
            say(plan, f"error: {error}", stream=sys.stderr)
        if status != EXIT_OK:
            return status
        return EXIT_RUN_FAILED if failed else EXIT_OK

    def _report(self, run: Run, everyone: Dict[int, Dict]) -> None:
        for node, p in sorted(everyone.items()):
            who = "" if len(everyone) == 1 else (
                "this node" if node == self.plan.index
                else self._node_name(node)) + ": "
            if p["status"] == "ok":
                kept = " (reused: kept from the log tree)" \
                    if p.get("reused") else ""
                self.log(f"{run.name}: {who}ok{kept}"
                         f"{self._rate_text(run, node)}")
            else:
                how = "a file could not be written" if \
                    p.get("stop") == STOP_NOT_WRITABLE else \
                    describe_exit(p['rc'])
                self.log(f"{run.name}: {who}{p['status'].upper()} "
                         f"({how})"
                         f"{': ' + p['reason'] if p.get('reason') else ''}"
                         f"; log {p['log']}")

    def _rate_text(self, run: Run, node: int) -> str:
        """', 1075.3 img/s (median of 5 intervals, ...)' for node 0's run
        with a measured rate, else ''."""
        rate, _ = self.rates.get(run.name, (None, None))
        if node != 0 or node != self.plan.index or rate is None:
            return ""
        return ", " + rate.describe()

    def _summary(self) -> None:
        ok = sum(1 for _, e in self.results
                 if all(p["status"] == "ok" for p in e.values()))
        self.log(f"done: {ok} of {len(self.results)} run(s) ok on every node"
                 f" ({len(self.plan.runs)} planned); logs under "
                 f"{self.plan.log_root}")
        for run, everyone in self.results:
            status = ", ".join(
                f"node {k} {v['status']}" if len(everyone) > 1 else v["status"]
                for k, v in sorted(everyone.items()))
            kept = " (reused)" if any(v.get("reused")
                                      for v in everyone.values()) else ""
            self.log(f"  {run.name}: {status}{kept}"
                     f"{self._rate_text(run, 0)}")
        reused = [run.name for run in self.plan.runs
                  if run.name in self.reused]
        if reused:
            self.log(f"reused (RESUME=1, status ok): {', '.join(reused)}")
        if self.plan.index == 0 and ok:
            self.log("extract: " + self._extract_command())

    def _extract_command(self) -> str:
        """The extractor command for this log tree, with the window flags
        the ok runs need when they are shorter than DLPerf's 100-600."""
        runs = [self.rates[run.name][1] for run, everyone in self.results
                if run.name in self.rates and
                all(p["status"] == "ok" for p in everyone.values())]
        argv = [self.s.launch_python or sys.executable, _relative(os.path.join(
                    preflight.REPO_ROOT, "extract_tensorflow_logs.py")),
                "--log_dir", _relative(self.plan.log_root)]
        window = progress.extractor_window(runs)
        note = ""
        if window == (0, 0):
            note = ("  (no common window after the first interval: run "
                    "more steps, STEPS, or fewer steps per line, LOG_STEPS)")
        elif window is not None:
            argv += ["--warmup_batches", str(window[0]),
                     "--train_batches", str(window[1])]
        return shlex.join(argv) + note

    def close(self) -> None:
        if self.coordinator is not None:
            self.coordinator.close()
            self.coordinator = None


def write_text_exclusive(path: str, text: str) -> None:
    """Writes `text` to a new file `path`, whole or not at all: a temporary
    file beside it is linked to `path` (FileExistsError when `path` exists:
    never overwritten) and removed in every case, also on a full disk."""
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.remove(tmp)


def _relative(path: str) -> str:
    """path relative to the working directory when it lies under it
    (shorter to copy), else absolute."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _hostname() -> str:
    import socket
    return socket.gethostname()
