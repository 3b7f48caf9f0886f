"""A finished run's files are never overwritten: RESUME=1 and OVERWRITE=1.

Before the first run each node surveys its case folders for this sweep's
runs (batch, dtype, bench): the planned ones and any other index, such as
runs 3-5 of an earlier TEST_NUM=5, which the extractor would read too
(log, result JSON, status record, local workers' copies). Then, with the
same rule on every node (`decide`):

- neither knob: any such run stops the sweep before anything is touched
  (exit LOGS_IN_USE), naming the runs and both ways on;
- RESUME=1: a planned run whose status is ok on every node is reused
  (unless its logged command or suite version differs from the plan's:
  `setup_difference` stops the sweep, exit LOGS_IN_USE, rather than mix
  two setups; a log that names no version gets a note, `version_notes`);
  the files of every other run are moved aside first, and the rest run;
- OVERWRITE=1: every run runs, into `.overwrite-{stamp}/` of its case
  folder (`stage`); only when the sweep ended ok are the old files moved
  aside and the new ones moved in (`swap_in`); otherwise (a failed run, a
  full disk, a signal) the old runs stay where the extractor reads them.
  Every node decides from the sweep's status, which the barrier's rounds
  give every node alike.

"Moved aside" means renamed into `.replaced-{stamp}/` of the folder that
held them: nothing is deleted, and the extractor, which reads
{log_dir}/*/*.log and skips dot-names, never reads a dot-folder.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import shlex
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from official_bench.contracts import hostport, log_tree, run_status
from official_bench.host.write_errors import writing
from official_bench.launch.one_run import (
    COMMAND_LINE,
    CONFIG_FLAG,
    CONFIG_LINE,
    SUITE_LINE,
    config_digest,
)
from official_bench.launch.outcome import Status
from official_bench.measure import host_env

REPLACED_PREFIX = ".replaced-"
STAGING_PREFIX = ".overwrite-"
OK = Status.OK.value  # a status record's word for a run that went ok
UNFINISHED = "unfinished (no status record)"
BEYOND = "beyond TEST_NUM"
OTHER_SETUP = "run with another setup"  # survey: "ok, {OTHER_SETUP}: ..."
# Overrides that say how to wait, not what runs: never a difference.
NOT_SETUP = ("runtime.peer_timeout_seconds",)
HOSTS_KEY = "runtime.worker_hosts"  # compared without its ports
HEADER_LINES = 20  # the log's header is its first few lines
# A kept run's suite version when its log's header names none.
UNVERSIONED = ("unknown (before the log header named the suite's "
               "version)")


@dataclasses.dataclass
class Decision:
    """What to do with the runs the tree already holds."""
    reuse: List[str]  # run names kept as they are (RESUME=1)
    replace: List[str]  # run names whose files this node moves aside
    problem: Optional[str] = None  # refused: the one line (LOGS_IN_USE)


def run_files(run) -> List[str]:
    """Every file a planned run writes on this node that exists now."""
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


def _header_line(log_path: str, prefix: str) -> Optional[str]:
    """The rest of the log header's line that starts with `prefix`
    (one_run.py writes them), or None."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            for _, line in zip(range(HEADER_LINES), f):
                if line.startswith(prefix):
                    return line[len(prefix):].rstrip("\n")
    except OSError:
        return None
    return None


def logged_command(log_path: str) -> Optional[List[str]]:
    """The trainer's command from the log's header (one_run.py), or None
    when it has none."""
    line = _header_line(log_path, COMMAND_LINE)
    try:
        return None if line is None else shlex.split(line)
    except ValueError:
        return None


def logged_suite(log_path: str) -> Optional[str]:
    """The suite version the log's header names ("0.1.0 (git e92555b)"),
    or None for a log written before the header named it."""
    line = _header_line(log_path, SUITE_LINE)
    return (line or "").strip() or None


def setup_difference(run) -> Optional[str]:
    """How this node's files of `run` were run otherwise than the plan
    runs it ("train.steps 30 -> 60", "official_bench 0.1.0 (git a) ->
    0.1.0 (git b)", kept -> planned), or None. A log that names no suite
    version is not refused for that (version_notes says so)."""
    for w in run.workers:
        kept = logged_command(w.log_path)
        if kept is None:
            return (f"its log {w.log_path} has no '{COMMAND_LINE.strip()}' "
                    "line to compare with")
        command = command_difference(kept, list(w.command))
        parts = [command or config_edited(w.log_path, list(w.command)),
                 suite_difference(logged_suite(w.log_path))]
        if any(parts):
            return ", ".join(p for p in parts if p)
    return None


def config_edited(log_path: str, planned: Sequence[str]) -> Optional[str]:
    """"--config_file PATH: its contents changed since the kept run
    started" when the log's header recorded the file's sha256 and the
    planned run's file reads otherwise now (a config edited in place);
    None when they match, or either is unknown."""
    logged = (_header_line(log_path, CONFIG_LINE) or "").strip()
    now = config_digest(planned)
    if not logged or not now or logged == now:
        return None
    path = next(a[len(CONFIG_FLAG):] for a in planned
                if a.startswith(CONFIG_FLAG))
    return (f"--config_file {path}: its contents changed since the kept run "
            f"started (sha256 {logged[:12]} -> {now[:12]})")


def suite_difference(kept: Optional[str]) -> Optional[str]:
    """"official_bench {kept} -> {this sweep's}" when a kept run's logged
    suite version is not this launcher's; None when they match or the
    log names none."""
    now = host_env.suite()
    if kept is None or kept == now:
        return None
    return f"{host_env.SUITE_KEY} {kept} -> {now}"


def version_notes(runs: Sequence, kept: Sequence[str]) -> List[str]:
    """One line per kept run (`kept`: run names) whose suite version this
    node cannot match to this sweep's: its log names none (made before the
    header named it), or both are the same commit with uncommitted
    changes ("+dirty"), which may differ."""
    now = host_env.suite()
    notes = []
    for run in runs:
        if run.name not in kept:
            continue
        logged = {logged_suite(w.log_path) for w in run.workers}
        if None in logged:
            notes.append(
                f"RESUME=1 keeps {run.name}, made by "
                f"{host_env.SUITE_KEY} {UNVERSIONED}; this sweep runs "
                f"{host_env.SUITE_KEY} {now}: if the suite changed since, "
                "the case mixes two versions (OVERWRITE=1 runs them all "
                "again)")
        elif now.endswith("+dirty)"):
            notes.append(
                f"RESUME=1 keeps {run.name}, made by "
                f"{host_env.SUITE_KEY} {now} as this sweep is: uncommitted "
                "changes on both sides, which may differ")
    return notes


def command_difference(kept: Sequence[str],
                       planned: Sequence[str]) -> Optional[str]:
    """What differs between two trainer command lines, as "what -> what"
    (kept -> planned), or None; the model_dir (a fresh one per run),
    worker ports and NOT_SETUP are left out, and a --config_file is
    compared by its contents where both files can be read now (by its
    path where either cannot)."""
    (kept_args, kept_over), (args, over) = _setup(kept), _setup(planned)
    parts = [f"{key} {_shown(kept_over, key)} -> {_shown(over, key)}"
             for key in sorted(set(kept_over) | set(over))
             if kept_over.get(key, _UNSET) != over.get(key, _UNSET)]
    kept_keys, keys = _compared(kept_args), _compared(args)
    matcher = difflib.SequenceMatcher(a=kept_keys, b=keys, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "equal":
            both_read = any(k.startswith(_CONTENT) for k in kept_keys[i1:i2]) \
                and any(k.startswith(_CONTENT) for k in keys[j1:j2])
            parts.append(f"command {shlex.join(kept_args[i1:i2]) or '()'}"
                         f" -> {shlex.join(args[j1:j2]) or '()'}"
                         + (" (its contents differ)" if both_read else ""))
    return ", ".join(parts) or None


_CONTENT = "\0config file contents "  # _compared's key, never an argument


def _compared(args: Sequence[str]) -> List[str]:
    """The arguments as compared: a --config_file whose file can be read
    as a digest of its contents (the same file copied elsewhere, or a new
    checkout of the same config, is the same setup), the rest as they
    are."""
    keys = []
    for arg in args:
        digest = config_digest([arg])
        keys.append(_CONTENT + digest if digest else arg)
    return keys


_UNSET = object()


def _shown(overrides: Mapping[str, Any], key: str) -> str:
    value = overrides.get(key, _UNSET)
    return "(unset)" if value is _UNSET else json.dumps(value)


def _setup(argv: Sequence[str]) -> Tuple[List[str], Dict[str, Any]]:
    """(the arguments but --model_dir and --params_override, the
    overrides as {dotted key: value} without what is not the setup)."""
    args: List[str] = []
    overrides: Dict[str, Any] = {}
    for i, arg in enumerate(argv):
        if i == 0 and os.sep in arg:
            arg = _interpreter(arg)
        if arg.startswith("--model_dir="):
            continue
        if arg.startswith("--params_override="):
            try:
                tree = json.loads(arg.split("=", 1)[1])
            except ValueError:
                tree = None
            if isinstance(tree, dict):
                overrides.update(_flat(tree))
                continue
        args.append(arg)
    for key in NOT_SETUP:
        overrides.pop(key, None)
    if HOSTS_KEY in overrides:
        overrides[HOSTS_KEY] = _hosts(overrides[HOSTS_KEY])
    return args, overrides


def _interpreter(path: str) -> str:
    """The interpreter's path with its folder resolved (the same venv
    reached through a symlink or `..` is the same); the file itself is
    not followed, as a venv's python links to the base interpreter that
    every venv of it shares."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(os.path.realpath(folder), name)


def _flat(tree: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    flat: Dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _hosts(value: Any) -> Any:
    """runtime.worker_hosts without its ports ("a,b"): a port is where a
    run listened, not what it ran; as it is when it cannot be read."""
    try:
        items = value if isinstance(value, list) else \
            hostport.split_list(str(value))
        return ",".join(hostport.parse_hostport(str(i), 0)[0] for i in items)
    except ValueError:
        return value


def _sweep_of(stem: str) -> Optional[Tuple[Tuple, int]]:
    """((bench, batch, dtype), index) of a run's file stem; None for any
    other name."""
    for bench, name in (("", log_tree.TRAINER_STEM),
                        (log_tree.ALLREDUCE_PREFIX, log_tree.ALLREDUCE_STEM)):
        fields = name.parse(stem)
        if fields is not None:
            return (bench, fields.get("batch"), fields["dtype"]), \
                fields["index"]
    return None


def _other_runs(runs: Sequence) -> Dict[str, List[str]]:
    """{"{case} run {i}": files} of this sweep's runs in the planned runs'
    case folders that the plan does not run (another TEST_NUM before)."""
    planned = {os.path.basename(r.log_path) for r in runs}
    found: Dict[str, List[str]] = {}
    folders = {os.path.dirname(r.log_path): r for r in runs}
    for folder, run in sorted(folders.items()):
        sweep = _sweep_of(os.path.basename(run.log_path)[
            :-len(log_tree.LOG_SUFFIX)])
        if sweep is None or not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            stem = name.split(".", 1)[0]
            other = _sweep_of(stem)
            if other is None or other[0] != sweep[0] or \
                    stem + log_tree.LOG_SUFFIX in planned:
                continue
            found.setdefault(f"{run.case} run {other[1]}", []).append(
                os.path.join(folder, name))
    return found


def sweep_files(runs: Sequence) -> Dict[str, List[str]]:
    """{run name: its files on this node now}: planned runs with files,
    then the other runs of the sweep in their case folders."""
    found = {run.name: files for run in runs
             for files in [run_files(run)] if files}
    found.update(_other_runs(runs))
    return found


def survey(runs: Sequence) -> Dict[str, str]:
    """{run name: state} of this node's runs of the sweep that left files;
    a run the plan does not hold is marked BEYOND."""
    by_name = {run.name: run for run in runs}
    found = {}
    for name, files in sweep_files(runs).items():
        if name in by_name:
            found[name] = _planned_state(by_name[name])
            continue
        logs = [f for f in files if f.endswith(log_tree.LOG_SUFFIX)]
        record = run_status.load_status(logs[0])[0] if logs else None
        state = record.get("status", UNFINISHED) if record else UNFINISHED
        found[name] = f"{state}, {BEYOND}"
    return found


def _planned_state(run) -> str:
    """run_state, and for an ok run how it was set up otherwise (if so)."""
    state = run_state(run)
    if state != OK:
        return state
    difference = setup_difference(run)
    return f"{OK}, {OTHER_SETUP}: {difference}" if difference else OK


def _other_setups(run_names: Sequence[str],
                  surveys: Mapping[int, Mapping[str, str]]) -> List[str]:
    """'1n1g run 1: train.steps 30 -> 60' ('node k: ...' on several
    nodes) for each planned ok run set up otherwise."""
    marker = f"{OK}, {OTHER_SETUP}: "
    found = []
    for node, survey in sorted(surveys.items()):
        for name in run_names:
            state = survey.get(name, "")
            if state.startswith(marker):
                where = f"node {node}: " if len(surveys) > 1 else ""
                found.append(f"{where}{name}: {state[len(marker):]}")
    return found


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
        other = _other_setups(run_names, surveys)
        if other:
            return Decision([], [], (
                f"RESUME=1: {where} holds runs of this sweep made with "
                f"another setup (kept run -> this sweep): {'; '.join(other)}"
                "; keeping them would mix two setups in one case, so "
                "nothing was touched. Re-run with the settings (and the "
                f"{host_env.SUITE_KEY} version) of those runs, with "
                "OVERWRITE=1 (run all, then move the old files "
                f"aside into {REPLACED_PREFIX}<date>/ once every run is "
                "ok), or use another LOG_DIR"))
        reuse = [n for n in run_names
                 if all(s.get(n) == OK for s in surveys.values())]
        return Decision(reuse, [n for n in mine if n not in reuse])
    if overwrite:
        return Decision([], list(mine))
    return Decision([], [], (
        f"{where} already holds runs of this sweep: {_listing(surveys)}; "
        "nothing was touched. Re-run with RESUME=1 (keep the ok runs, run "
        "the missing or failed ones) or OVERWRITE=1 (run all, then move the "
        f"old files aside into {REPLACED_PREFIX}<date>/ once every run is "
        "ok), or use another LOG_DIR"))


def move_aside(runs: Sequence, names: Sequence[str],
               stamp: str) -> List[str]:
    """Renames the named runs' files (planned or not) into
    {their dir}/.replaced-{stamp}/; the folders used. NotWritable when a
    folder cannot be made."""
    folders: Dict[str, str] = {}
    for name, paths in sweep_files(runs).items():
        if name not in names:
            continue
        for path in paths:
            parent = os.path.dirname(path)
            if parent not in folders:
                folders[parent] = _fresh_folder(parent, REPLACED_PREFIX,
                                                stamp)
            target = os.path.join(folders[parent], os.path.basename(path))
            with writing(target, "a replaced run's file"):
                os.rename(path, target)
    return sorted(folders.values())


def stage(runs: Sequence, stamp: str) -> List[str]:
    """OVERWRITE=1: points every planned run's files on this node into
    {case folder}/.overwrite-{stamp}/ (created now); the folders."""
    folders: Dict[str, str] = {}
    for run in runs:
        for w in run.workers:
            parent = os.path.dirname(w.log_path)
            if parent not in folders:
                folders[parent] = _fresh_folder(parent, STAGING_PREFIX,
                                                stamp)
            _repoint(w, folders[parent])
    return sorted(folders.values())


def _repoint(worker, folder: str) -> None:
    """A worker's log and result JSON, same names, in `folder`."""
    worker.log_path = os.path.join(folder, os.path.basename(worker.log_path))
    worker.json_path = os.path.join(folder,
                                    os.path.basename(worker.json_path))


def swap_in(runs: Sequence, names: Sequence[str], stamp: str) -> List[str]:
    """After a sweep that ended ok: the old runs' files (`names`) go aside
    (move_aside, on the case folders' paths), then the staged files move
    into the case folders and the staging folders go; the folders the old
    files went to."""
    staged = {}
    for run in runs:
        for w in run.workers:
            folder = os.path.dirname(w.log_path)
            home = os.path.dirname(folder)
            staged[folder] = home
            _repoint(w, home)
    moved = move_aside(runs, names, stamp)
    for folder, home in sorted(staged.items()):
        left = False
        for name in sorted(os.listdir(folder)):
            target = os.path.join(home, name)
            if os.path.lexists(target):  # not the sweep's: never replaced
                left = True
                continue
            with writing(target, "a run's file, moved in from "
                         f"{os.path.basename(folder)}/"):
                os.rename(os.path.join(folder, name), target)
        if not left:
            os.rmdir(folder)
    return moved


def _fresh_folder(parent: str, prefix: str, stamp: str) -> str:
    """{parent}/{prefix}{stamp}[-n]/, created (never an existing one)."""
    n = 1
    while True:
        folder = os.path.join(parent, prefix + stamp +
                              (f"-{n}" if n > 1 else ""))
        with writing(folder, "the folder for replaced runs"
                     if prefix == REPLACED_PREFIX else
                     "OVERWRITE=1's folder for the new runs"):
            try:
                os.makedirs(parent, exist_ok=True)
                os.mkdir(folder)
                return folder
            except FileExistsError:
                n += 1
