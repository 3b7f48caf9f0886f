"""How a run went: every rule that decides a run's outcome lives here.

A trainer process is judged by `judge` (aborted when the launcher stopped
it, failed on a non-zero exit, past RUN_TIMEOUT or without its result file,
else ok; a JAX process that JAX aborted for a lost peer is the lost peer's
exit status, its coordinator named), a node's processes by
`node_outcome` (the first to fail speaks for the node), the nodes of one
run by `RunVerdict` (ok on every node; whether the sweep goes on), a
peer's failure mid-run by `peer_failure`, and the sweep by
`sweep_status`. A new outcome rule goes here, nowhere
else. Process control (trainer_process.py) only decides when to stop a
trainer and records why (`stopped_because`, which `judge` reads as
aborted); the run (one_run.py) and the sweep (runner.py) only collect
outcomes and act on them.

An outcome is a typed value (`Outcome`, its `Status`); the barrier carries
it between nodes as `as_payload()` and it is read back with
`from_payload`. The reason is text written into the run's log and status
record, so it is kept from ever reading as a measurement
(`no_throughput_text`).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import os
import re
import signal
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
)

from official_bench.contracts import exit_status as es
from official_bench.contracts.throughput import (
    DLPERF_KEYWORD,
    JAX_JOIN_RE,
    TIMEOUT_MARK,
)

if TYPE_CHECKING:
    from official_bench.launch.plan import Worker
    from official_bench.launch.settings import Settings
    from official_bench.launch.trainer_process import TrainerProcess

# The payload's "stop" when a node cannot write its files.
STOP_NOT_WRITABLE = "not_writable"


class Status(str, enum.Enum):
    """How a run ended on one process or node. Its value is the word of
    the status record (contracts/run_status.py) and of the barrier's
    payload."""
    OK = "ok"
    FAILED = "failed"  # the trainer failed, or could not start or write
    ABORTED = "aborted"  # the launcher stopped it (a peer failed, a signal)


class Next(enum.Enum):
    """What the sweep does after a run, the same on every node."""
    GO_ON = "go on"
    STOP_ON_FAILURE = "ON_FAILURE=stop"
    STOP_NOT_WRITABLE = "a node cannot write its files"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One run's result on one process or node: exit status (None: it did
    not start), Status, the reason, the log, whether the node could not
    write its files (the next run would fail the same way, so the sweep
    stops) and whether RESUME=1 kept the run from the log tree."""
    rc: Optional[int]
    status: Status
    reason: str
    log: str
    cannot_write: bool = False
    reused: bool = False

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @classmethod
    def kept(cls, log: str) -> "Outcome":
        """A run RESUME=1 keeps: ok on every node, not run again."""
        return cls(0, Status.OK, "", log, reused=True)

    def as_payload(self) -> Dict[str, Any]:
        """What the barrier's "end" round carries (JSON)."""
        payload = {"rc": self.rc, "status": self.status.value,
                   "reason": self.reason, "log": self.log,
                   "stop": STOP_NOT_WRITABLE if self.cannot_write else ""}
        if self.reused:
            payload["reused"] = True
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> "Outcome":
        """An outcome another node sent; a status word this launcher does
        not know is a failure, named."""
        word = payload.get("status")
        try:
            status = Status(word)
            reason = str(payload.get("reason") or "")
        except ValueError:
            status = Status.FAILED
            reason = f"unknown run status {word!r} from that node"
        return cls(payload.get("rc"), status, reason,
                   str(payload.get("log") or ""),
                   payload.get("stop") == STOP_NOT_WRITABLE,
                   bool(payload.get("reused")))


def judge(worker: Worker, proc: TrainerProcess,
          settings: Settings) -> Outcome:
    """One ended trainer process of `worker`: its outcome. Reads its log
    and result file; writes nothing (one_run copies an ok run's result)."""
    rc = proc.rc
    if proc.stopped_because:
        return Outcome(rc, Status.ABORTED, proc.stopped_because,
                       worker.log_path)
    if rc in (es.TIMEOUT, es.KILLED) and proc.elapsed >= settings.run_timeout:
        return Outcome(rc, Status.FAILED, (
            f"still running after RUN_TIMEOUT={settings.run_timeout:g} s: "
            "sent SIGTERM" + (f", then SIGKILL after KILL_AFTER="
                              f"{settings.kill_after:g} s" if rc == es.KILLED
                              else "")), worker.log_path)
    if rc != 0:
        reason, aborted_by_jax = _log_reason(worker.log_path)
        if aborted_by_jax and es.signal_number(rc) == signal.SIGABRT:
            reason += f" ({_jax_abort_note(rc)})"
            rc = es.PEER_LOST  # as the trainer exits when it sees the loss
        return Outcome(rc, Status.FAILED, reason, worker.log_path)
    result = result_path(worker)
    if not os.path.isfile(result):
        return Outcome(rc, Status.FAILED, f"the trainer wrote no {result}",
                       worker.log_path)
    return Outcome(rc, Status.OK, "", worker.log_path)


def exit_words(worker: Worker, proc: TrainerProcess) -> str:
    """A failed process's exit as `judge` gives it, for the line that stops
    the node's other processes (wait_all): "exit 1", or for a process JAX
    aborted for a lost peer "exit 4: a peer task went away mid-run; JAX
    aborted it: SIGABRT, exit 134", as the run's own line says it."""
    rc = proc.rc
    if es.signal_number(rc) == signal.SIGABRT and \
            _log_reason(worker.log_path)[1]:
        return f"{es.describe(es.PEER_LOST)}; {_jax_abort_note(rc)}"
    return es.describe(rc)


def _jax_abort_note(rc: int) -> str:
    return f"JAX aborted it: SIGABRT, exit {rc}"


def could_not_start(error: OSError, log: str) -> Outcome:
    """A trainer process that could not be started."""
    return Outcome(None, Status.FAILED, f"cannot start: {error}", log)


def could_not_write(reason: str, log: str) -> Outcome:
    """A run whose files could not be written (NotWritable's line): failed,
    and the sweep stops after it."""
    return Outcome(None, Status.FAILED, reason, log, cannot_write=True)


def result_path(worker: Worker) -> str:
    """The result file the trainer writes into its model_dir."""
    return os.path.join(worker.model_dir, worker.result_name)


def node_outcome(outcomes: List[Outcome], workers: List[Worker],
                 procs: List[TrainerProcess]) -> Outcome:
    """One process: its outcome. Several: ok when all are; else the process
    that failed first (by its exit time), named; else the first aborted."""
    if len(outcomes) == 1:
        return outcomes[0]
    failed = sorted((p.ended or 0.0, i) for i, (o, p) in
                    enumerate(zip(outcomes, procs))
                    if o.status is Status.FAILED)
    picked = failed[0][1] if failed else next(
        (i for i, o in enumerate(outcomes) if not o.ok), None)
    if picked is None:
        return outcomes[0]
    o = outcomes[picked]
    return dataclasses.replace(o, reason=f"{workers[picked].label}: "
                               f"{o.reason}" if o.reason
                               else workers[picked].label)


@dataclasses.dataclass(frozen=True)
class RunVerdict:
    """One run on every node: each node's Outcome (the barrier's "end"
    round), and what follows from them for the sweep."""
    outcomes: Mapping[int, Outcome]

    @classmethod
    def from_payloads(cls, payloads: Mapping[int, Any]) -> "RunVerdict":
        return cls({int(k): Outcome.from_payload(v or {})
                    for k, v in payloads.items()})

    @property
    def ok(self) -> bool:
        """Ok on every node."""
        return all(o.ok for o in self.outcomes.values())

    @property
    def reused(self) -> bool:
        return any(o.reused for o in self.outcomes.values())

    @property
    def cannot_write(self) -> List[int]:
        """The nodes that could not write their files."""
        return sorted(k for k, o in self.outcomes.items() if o.cannot_write)

    def next_step(self, on_failure: str) -> Next:
        """A node that cannot write stops the sweep everywhere; a failure
        stops it under ON_FAILURE=stop; else it goes on."""
        if self.cannot_write:
            return Next.STOP_NOT_WRITABLE
        if not self.ok and on_failure == "stop":
            return Next.STOP_ON_FAILURE
        return Next.GO_ON


def sweep_status(verdicts: Sequence[RunVerdict], me: int) -> int:
    """The sweep's exit status on node `me` from the runs it ran:
    NOT_WRITABLE when this node could not write its files, FAILED when
    any run failed on any node, else OK."""
    if any(me in v.cannot_write for v in verdicts):
        return es.NOT_WRITABLE
    return es.OK if all(v.ok for v in verdicts) else es.FAILED


def peer_failure(arrived: Optional[Mapping[int, Any]], me: int,
                 name: Callable[[int], str]) -> Optional[str]:
    """While this node's run goes on: why to stop it, when another node
    already ended the run not ok (`arrived`: the "end" round's payloads so
    far; `name`: a node's name for the line); else None."""
    for node, payload in sorted((arrived or {}).items()):
        if node == me or not payload:
            continue
        outcome = Outcome.from_payload(payload)
        if not outcome.ok:
            return (f"stopped because {name(node)} failed this run "
                    f"({es.describe(outcome.rc)})")
    return None


def last_error_line(path: str) -> str:
    """The most telling line of a failed run's log: the trainer's own error
    line wherever it is (other ranks' tracebacks may follow it for
    hundreds of lines), else JAX's abort for a lost peer, named
    (`jax_abort_line`), else one near the end."""
    return _log_reason(path)[0]


def _log_reason(path: str) -> Tuple[str, bool]:
    """(last_error_line's line, whether it is JAX's abort)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            scan = _scan(f)
    except OSError:
        return "", False
    if scan.ours:
        return scan.ours, False
    if scan.jax_fatal:
        return jax_abort_line(scan.jax_fatal, scan.joined), True
    return _near_the_end(scan.tail), False


def _near_the_end(lines: List[str]) -> str:
    """An error-looking line near the end of the log, else its last one."""
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


# A trainer's own one-line error, also behind a rank prefix that
# horovodrun or mpirun puts before it ("[1,0]<stderr>:error: ...").
_OUR_ERROR = re.compile(r"(?:^|[>:\]\s])(error: official_bench: .*)$")
# Our error line is kept whole up to this; a longer one keeps both ends
# (the end often holds the fix).
OUR_LINE_MAX = 1000


# JAX's coordination client (client.h) logs this, then abort()s the
# process (SIGABRT, exit 134), when the distributed service reports a fatal
# error: another task died, or worker 0 (the coordinator) did. Nothing of
# the trainer runs after it, so the launcher names the loss.
JAX_FATAL = ("Terminating process because the JAX distributed service "
             "detected fatal errors")
# In that line's status when the coordinator itself no longer answers.
_COORDINATOR_GONE = "Failed to send RPC to coordination service"
_JAX_STATUS = re.compile(r"absl::Status: (.*)$")


@dataclasses.dataclass
class _Scan:
    """What one pass over a log found: the trainer's own error line, JAX's
    fatal line and the trainer's jax.distributed join, the last lines."""
    ours: str = ""
    jax_fatal: str = ""
    joined: Optional[re.Match] = None
    tail: List[str] = dataclasses.field(default_factory=list)


def _scan(lines: Iterable[str]) -> _Scan:
    """The log's `_Scan`, in one pass. The trainer's line wins over what a
    launcher wrapping the ranks printed after it (horovodrun's
    'RuntimeError: Horovod detected that one or more processes exited')."""
    scan, tail = _Scan(), collections.deque(maxlen=200)
    for line in lines:
        line = line.rstrip("\n")
        tail.append(line)
        m = _OUR_ERROR.search(line.strip()) \
            if "error: official_bench: " in line else None
        if m:
            scan.ours = m.group(1)
        elif JAX_FATAL in line:
            scan.jax_fatal = line
        elif "(jax.distributed)" in line:
            scan.joined = JAX_JOIN_RE.search(line) or scan.joined
    if len(scan.ours) > OUR_LINE_MAX:
        half = OUR_LINE_MAX // 2
        scan.ours = f"{scan.ours[:half]} ... {scan.ours[-half:]}"
    scan.tail = list(tail)
    return scan


def jax_abort_line(fatal: str, joined: Optional[re.Match]) -> str:
    """The one line for a process JAX aborted (`fatal`: JAX's line;
    `joined`: the trainer's join line, which names the process and the
    coordinator): the coordinator named when it went away, else JAX's
    reason."""
    me = joined.group("me") if joined else "this process"
    if _COORDINATOR_GONE in fatal:
        where = f", {joined.group('coordinator')}" if joined else ""
        return (f"{me} stopped: the JAX coordinator (worker 0{where}) went "
                "away or stopped answering; see worker 0's log")
    m = _JAX_STATUS.search(fatal)
    status = m.group(1)[:200] if m else "no reason given"
    return (f"{me} stopped: JAX's distributed service reported a fatal "
            f"error ({status}), most likely another worker ended; see the "
            "other workers' logs")


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
