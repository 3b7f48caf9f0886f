"""How a run went: every rule that decides a run's outcome lives here.

A trainer process is judged by `judge` (aborted when the launcher stopped
it, failed on a non-zero exit, past RUN_TIMEOUT or without its result file,
else ok), a node's processes by `node_outcome` (the first to fail speaks
for the node), and the nodes of one run by `ok_everywhere`. A new outcome
rule goes here, nowhere else. Process control (trainer_process.py) only
decides when to stop a trainer and records why (`stopped_because`, which
`judge` reads as aborted); the run (one_run.py) and the sweep (runner.py)
only collect outcomes and act on them.

The reason is text written into the run's log and status record, so it is
kept from ever reading as a measurement (`no_throughput_text`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import TYPE_CHECKING, Dict, List, Optional

from official_bench.contracts import exit_status as es
from official_bench.contracts.throughput import DLPERF_KEYWORD, TIMEOUT_MARK

if TYPE_CHECKING:
    from official_bench.launch.plan import Worker
    from official_bench.launch.settings import Settings
    from official_bench.launch.trainer_process import TrainerProcess

# Outcome.stop: why every node stops the sweep after this run.
STOP_NOT_WRITABLE = "not_writable"


@dataclasses.dataclass
class Outcome:
    """One run's result on one process or node, as the barrier's "end"
    round carries it: exit status, ok | failed | aborted, the reason, the
    log, and `stop` when the sweep cannot go on (STOP_NOT_WRITABLE: the
    next run would fail the same way)."""
    rc: Optional[int]
    status: str  # ok | failed | aborted
    reason: str
    log: str
    stop: str = ""  # STOP_NOT_WRITABLE: the next run would fail the same way

    def as_payload(self) -> Dict:
        return dataclasses.asdict(self)


def judge(worker: Worker, proc: TrainerProcess,
          settings: Settings) -> Outcome:
    """One ended trainer process of `worker`: its outcome. Reads its log
    and result file; writes nothing (one_run copies an ok run's result)."""
    rc = proc.rc
    if proc.stopped_because:
        return Outcome(rc, "aborted", proc.stopped_because, worker.log_path)
    if rc in (es.TIMEOUT, es.KILLED) and proc.elapsed >= settings.run_timeout:
        return Outcome(rc, "failed", (
            f"still running after RUN_TIMEOUT={settings.run_timeout:g} s: "
            "sent SIGTERM" + (f", then SIGKILL after KILL_AFTER="
                              f"{settings.kill_after:g} s" if rc == es.KILLED
                              else "")), worker.log_path)
    if rc != 0:
        return Outcome(rc, "failed", last_error_line(worker.log_path),
                       worker.log_path)
    result = result_path(worker)
    if not os.path.isfile(result):
        return Outcome(rc, "failed", f"the trainer wrote no {result}",
                       worker.log_path)
    return Outcome(rc, "ok", "", worker.log_path)


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
                    enumerate(zip(outcomes, procs)) if o.status == "failed")
    picked = failed[0][1] if failed else next(
        (i for i, o in enumerate(outcomes) if o.status != "ok"), None)
    if picked is None:
        return outcomes[0]
    o = outcomes[picked]
    return Outcome(o.rc, o.status, f"{workers[picked].label}: {o.reason}"
                   if o.reason else workers[picked].label, o.log)


def ok_everywhere(everyone: Dict[int, Dict]) -> bool:
    """A run's "end" payloads, one per node: ok on every node."""
    return all(p["status"] == "ok" for p in everyone.values())


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
