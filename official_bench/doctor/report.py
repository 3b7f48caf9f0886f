"""The doctor's report: one row per check, as a table and as JSON.

JSON schema ``official_bench.doctor/1``::

    {"schema", "complete": bool, "started", "finished", "exit_status",
     "gpu_checks_skipped": null | "why",
     "machine": {...facts: backend, backend_note, tensorflow, jax (the
                 probes' JSON and errors), nvidia_smi, diagnosis,
                 gpu_sampler, horovod_venv},
     "summary": {"PASS": n, "FAIL": n, "SKIP": n},
     "checks": [{"name", "kind", "device", "result": PASS|FAIL|SKIP,
                 "detail", "fix", "seconds", "data": {...}}]}

The file is rewritten (atomically) after every check with "complete":
false, so a doctor killed half-way still leaves what it found.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from typing import Any, Dict, Optional, Sequence

from official_bench.contracts import exit_status as es
from official_bench.host.atomic import write_text_atomic
from official_bench.host.write_errors import writing

SCHEMA = "official_bench.doctor/1"
COLUMNS = 100  # the table's width (docs/doctor.md)
PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclasses.dataclass
class CheckResult:
    """One check's row of the report: what was checked on which device,
    PASS/FAIL/SKIP with the detail and fix, its time and its data."""
    name: str
    kind: str
    device: str
    result: str  # PASS | FAIL | SKIP
    detail: str
    fix: Optional[str] = None
    seconds: float = 0.0
    data: Dict[str, Any] = dataclasses.field(default_factory=dict)


def summary(results: Sequence[CheckResult]) -> Dict[str, int]:
    return {k: sum(r.result == k for r in results) for k in (PASS, FAIL, SKIP)}


def exit_status(results: Sequence[CheckResult]) -> int:
    """0 when nothing failed (skips are not failures), 1 otherwise."""
    return es.FAILED if any(r.result == FAIL for r in results) else es.OK


def shown_detail(result: CheckResult, gpu_skipped: Optional[str]) -> str:
    """A row's detail as printed: a check skipped for want of a GPU says
    "no GPU (reason above)", the reason being said once, before the checks
    (skipped_line); the JSON keeps the whole detail."""
    if gpu_skipped and result.result == SKIP and result.detail == gpu_skipped:
        return NO_GPU_SHORT
    return result.detail


NO_GPU_SHORT = "no GPU (reason above)"


def skipped_line(gpu_skipped: str) -> str:
    """The one line that says why the GPU checks are skipped."""
    return f"GPU checks skipped: {gpu_skipped}"


def table(results: Sequence[CheckResult],
          gpu_skipped: Optional[str] = None) -> str:
    """The table printed at the end, then a fix line per failure; no line
    wider than COLUMNS (a long detail goes on under its column)."""
    width = max([len("check")] + [len(r.name) for r in results])
    lead = width + 10  # "name  result  "
    lines = [f"{'check':<{width}}  result  detail",
             f"{'-' * width}  ------  {'-' * min(40, COLUMNS - lead)}"]
    for r in results:
        detail = textwrap.wrap(shown_detail(r, gpu_skipped),
                               max(20, COLUMNS - lead),
                               break_on_hyphens=False) or [""]
        lines.append(f"{r.name:<{width}}  {r.result:<6}  {detail[0]}")
        lines += [" " * lead + more for more in detail[1:]]
    s = summary(results)
    lines.append("")
    lines.append(f"{s[PASS]} passed, {s[FAIL]} failed, {s[SKIP]} skipped")
    for r in results:
        if r.result == FAIL and r.fix:
            lines += textwrap.wrap(f"fix {r.name}: {r.fix}", COLUMNS,
                                   subsequent_indent="    ",
                                   break_on_hyphens=False)
    return "\n".join(lines)


def document(results: Sequence[CheckResult], machine: Dict[str, Any],
             started: str, finished: Optional[str],
             gpu_skipped: Optional[str]) -> Dict[str, Any]:
    """The JSON document; complete when `finished` is given."""
    return {
        "schema": SCHEMA,
        "complete": finished is not None,
        "started": started,
        "finished": finished,
        "exit_status": exit_status(results) if finished else None,
        "gpu_checks_skipped": gpu_skipped,
        "machine": machine,
        "summary": summary(results),
        "checks": [dataclasses.asdict(r) for r in results],
    }


def write(path: str, doc: Dict[str, Any]) -> None:
    """Atomically; a full disk, quota, read-only file system or missing
    permission raises NotWritable (host/write_errors.py), whose message is
    the doctor's last line."""
    with writing(path, "the doctor's report"):
        write_text_atomic(path, json.dumps(doc, indent=2, sort_keys=False)
                          + "\n")


def load(path: str) -> Dict[str, Any]:
    """Reads a report back; raises ValueError when it is not one."""
    with open(path) as f:
        doc = json.load(f)
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {doc.get('schema')!r}, expected "
                         f"{SCHEMA!r}")
    return doc
