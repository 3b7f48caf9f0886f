"""A finished run's files are never overwritten: RESUME=1 and OVERWRITE=1.

Before the first run each node surveys the log tree for the runs it is about
to write (log, result JSON and status record, local workers' copies too) and
reads each one's status record. Then, with the same rule on every node:

- neither knob: any run already there stops the sweep before anything is
  touched (exit LOGS_IN_USE), naming the runs and both ways on;
- RESUME=1: a run whose status is ok on every node is reused (not run
  again, counted in the summary); every other run runs, and the files of
  a failed or unfinished one are moved aside first;
- OVERWRITE=1: every run runs; the old files are moved aside first.

"Moved aside" means renamed into a dot-folder `.replaced-{stamp}/` of the
directory that held them: nothing is deleted, and the extractor, which
reads {log_dir}/*/*.log (a dot-folder is one level deeper and glob skips
dot-names), never reads them.

Multi-node agreement: every node sends its survey in the barrier's "hello"
round, whose answer carries every node's payload to every node; each node
then applies `decide` to the same data, so all nodes reuse and run the same
indices (a node that refuses makes every node stop).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Mapping, Optional, Sequence

from official_bench.contracts import log_tree
from official_bench.contracts import run_status
from official_bench.host.write_errors import writing

REPLACED_PREFIX = ".replaced-"
OK = "ok"
UNFINISHED = "unfinished (no status record)"


@dataclasses.dataclass
class Decision:
    """What to do with the runs the tree already holds."""
    reuse: List[str]  # run names kept as they are (RESUME=1)
    replace: List[str]  # run names whose files this node moves aside
    problem: Optional[str] = None  # refused: the one line (LOGS_IN_USE)


def run_files(run) -> List[str]:
    """Every file a run writes on this node that exists now."""
    paths = []
    for w in run.workers:
        paths += [w.log_path, w.json_path, log_tree.status_path(w.log_path)]
    return [p for p in paths if os.path.lexists(p)]


def run_state(run) -> str:
    """'ok', the status record's status, or UNFINISHED, over the run's
    processes on this node (the first that is not ok)."""
    for w in run.workers:
        record, _ = run_status.load_status(w.log_path)
        if record is None:
            return UNFINISHED
        if record.get("status") != OK:
            return str(record.get("status"))
    return OK


def survey(runs: Sequence) -> Dict[str, str]:
    """{run name: state} of this node's planned runs that left files."""
    return {run.name: run_state(run) for run in runs if run_files(run)}


def _listing(surveys: Mapping[int, Mapping[str, str]]) -> str:
    """'1n1g run 1 (ok), 1n1g run 2 (failed) [node 1: ...]'."""
    parts = []
    for node, found in sorted(surveys.items()):
        if not found:
            continue
        text = ", ".join(f"{name} ({state})" for name, state in found.items())
        parts.append(text if len(surveys) == 1 else f"node {node}: {text}")
    return "; ".join(parts)


def decide(resume: bool, overwrite: bool, run_names: Sequence[str],
           surveys: Mapping[int, Mapping[str, str]], me: int,
           where: str) -> Decision:
    """The same decision on every node from every node's survey (see the
    module docstring); `where` names the log tree for the message."""
    mine = dict(surveys.get(me, {}))
    if not any(surveys.values()):
        return Decision([], [])
    if resume:
        reuse = [n for n in run_names
                 if all(s.get(n) == OK for s in surveys.values())]
        return Decision(reuse, [n for n in mine if n not in reuse])
    if overwrite:
        return Decision([], list(mine))
    return Decision([], [], (
        f"{where} already holds runs of this sweep: {_listing(surveys)}; "
        "nothing was touched. Re-run with RESUME=1 (keep the ok runs, run "
        "the missing or failed ones) or OVERWRITE=1 (move the old files "
        f"aside into {REPLACED_PREFIX}<date>/ and run all), or use another "
        "LOG_DIR"))


def move_aside(runs: Sequence, names: Sequence[str],
               stamp: str) -> List[str]:
    """Renames the named runs' files into {their dir}/.replaced-{stamp}/;
    the folders used. NotWritable when a folder cannot be made."""
    folders: Dict[str, str] = {}
    for run in runs:
        if run.name not in names:
            continue
        for path in run_files(run):
            parent = os.path.dirname(path)
            if parent not in folders:
                folders[parent] = _fresh_folder(parent, stamp)
            target = os.path.join(folders[parent], os.path.basename(path))
            with writing(target, "a replaced run's file"):
                os.rename(path, target)
    return sorted(folders.values())


def _fresh_folder(parent: str, stamp: str) -> str:
    """{parent}/.replaced-{stamp}[-n]/, created (never an existing one)."""
    n = 1
    while True:
        folder = os.path.join(parent, REPLACED_PREFIX + stamp +
                              (f"-{n}" if n > 1 else ""))
        with writing(folder, "the folder for replaced runs"):
            try:
                os.mkdir(folder)
                return folder
            except FileExistsError:
                n += 1
