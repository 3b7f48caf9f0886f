"""official-bench-history: every finished run over time, and did the
latest one get slower?

    official-bench-history --db FILE           # each case: latest vs earlier
    official-bench-history --db FILE --case "1n1g b128 fp32 resnet50 224px"
    official-bench-history --db FILE --plot cases.png
    official-bench-history --db FILE --import LOG_DIR  # add run-script logs

The file is contracts/history_db.py's (the trainer appends to it, see
history.* in the config). For each case (nodes, devices per node, per-device
batch, precision, model, image size) the latest run is compared with all
the earlier ones by judge/verdict.py's rule, the one official-bench-compare
uses: earlier runs are side A, the latest is side B. A case is also its
backend, counted window and tree (history_db.Row.case_label: a TensorFlow
and a JAX sweep into one MODEL_DIR are two cases). A verdict "slower" (the
95% interval of latest/earlier below 1) ends the command with
exit_status.SLOWER: a nightly CI job fails on a slow-down, not on noise.

``--import LOG_DIR`` adds a log tree's runs (any depth), read as the
extractor reads them in its window (DLPerf's, the flags', --window auto):
a run it leaves out there is not imported, result.json or not; a run with
its result.json copy gets the trainer's row, in the trainer's window
(stored once if the trainer wrote it already), a run with only its log
its counted intervals in the window (model and image size unknown).
Runs are dated by their log's modification time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from official_bench.contracts import (
    exit_status,
    history_db,
    log_tree,
    run_backend,
)
from official_bench.contracts.history_db import HistoryError, Row
from official_bench.contracts.history_row import (
    framework,
    row_environment,
    row_from_result,
    run_key,
)
from official_bench.contracts.throughput import images_per_second_over_window
from official_bench.extract import history_plot, logparse, windows
from official_bench.extract.errors import ExtractError
from official_bench.extract.extractor import (
    measure_log,
    window_hint,
    window_note,
)
from official_bench.extract.history_plot import by_case
from official_bench.extract.speeds import RunOutcome
from official_bench.host import atomic
from official_bench.host.flag_errors import OneLineParser
from official_bench.host.terminal import help_formatter
from official_bench.host.write_errors import NotWritable, writing
from official_bench.judge import verdict


@dataclasses.dataclass(frozen=True)
class CaseCheck:
    """A case's runs and the latest one's verdict (None: fewer than two
    runs that can enter a ratio); ``left_out`` says which rows could not
    (verdict.run_problem) and why, ``notes`` what makes the verdict hard to
    read (verdict.setting_notes of the rows' environments)."""
    label: str
    rows: List[Row]
    verdict: Optional[verdict.Verdict]
    left_out: List[str] = dataclasses.field(default_factory=list)
    warmup: Optional[str] = None  # warmup_note's
    notes: List[str] = dataclasses.field(default_factory=list)


# ---------------------------------------------------------------- checking

def _left_out(row: Row) -> Optional[str]:
    """Why a row cannot enter the ratio, naming its id and source."""
    problem = verdict.run_problem(row.interval_rates)
    if problem is None:
        return None
    return (f"run {row.id} ({row.source_path or row.source}) left out of "
            f"the comparison: {problem}")


def warmup_note(label: str, rows: Sequence[Row]) -> Optional[str]:
    """A note naming the runs whose counted window starts at step 0, so
    counts the first interval's warm-up (graph tracing): a run the trainer
    found too short to leave it out. The window is part of the case, so
    they are compared only with each other; None when there are none."""
    ids = [str(r.id or "?") for r in rows
           if r.intervals != "[]" and json.loads(r.intervals)[0][0] == 0]
    if not ids:
        return None
    return (f"{label}: run(s) {', '.join(ids)} count from step 0, their "
            "warm-up (graph tracing) included (too short to leave it out, "
            "or a window from step 0): compared only with each other, and "
            "slower than a run that leaves its warm-up out")


def _setting(row: Row) -> verdict.RunSetting:
    """A row's stored environment (no load: rows do not keep it)."""
    return verdict.RunSetting(row_environment(row))


def check_case(label: str, rows: List[Row], seed: int = verdict.DEFAULT_SEED
               ) -> CaseCheck:
    """The latest usable run (B) against every earlier one (A), with the
    notes on what differs between them."""
    left_out = {id(r): _left_out(r) for r in rows}
    usable = [r for r in rows if left_out[id(r)] is None]
    notes = [f"{label}: {why}" for why in left_out.values() if why]
    warmup = warmup_note(label, rows)
    if len(usable) < 2:
        return CaseCheck(label, rows, None, notes, warmup)
    earlier = [r.interval_rates for r in usable[:-1]]
    setting = [f"{label}: {note}" for note in verdict.setting_notes(
        [_setting(r) for r in usable[:-1]], [_setting(usable[-1])],
        ("earlier", "latest"))]
    return CaseCheck(label, rows, verdict.compare_runs(
        earlier, [usable[-1].interval_rates], seed=seed), notes, warmup,
        setting)


def select(rows: Sequence[Row], case: Optional[str]) -> Dict[str, List[Row]]:
    """The cases to show: all, the one named, or every case whose label
    starts with the setup named ('1n1g b128 fp32 resnet50 224px': each of
    its backends, windows and trees; '..., jax': that backend's);
    ExtractError listing the cases there are when none matches."""
    cases = by_case(rows)
    if case is None:
        return cases
    if case in cases:
        return {case: cases[case]}
    chosen = {label: runs for label, runs in cases.items()
              if label.startswith(case + ", ")}
    if not chosen:
        raise ExtractError(f"no case {case!r} in the history; cases: "
                           + "; ".join(sorted(cases)))
    return chosen


def _num(value: Optional[float], digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def listing(check: CaseCheck) -> str:
    """A case's runs over time, then the verdict."""
    lines = [f"== {check.label}",
             f"{'id':>4} {'time (UTC)':<20} {'img/s':>9} {'over win':>9} "
             f"{'MFU':>6} {'framework':<12} {'host':<12} config"]
    for r in check.rows:
        lines.append(
            f"{r.id or 0:>4} {r.time_utc:<20} {r.mean_rate:>9.2f} "
            f"{_num(r.images_per_second_over_window):>9} "
            f"{_num(r.mfu, 4):>6} {framework(r)[:12]:<12} "
            f"{(r.host or '-')[:12]:<12} {r.config_digest or '-'}")
    lines.append(summary_line(check))
    return "\n".join(lines) + "\n"


def summary_line(check: CaseCheck) -> str:
    """One line: the latest run against the earlier ones."""
    if check.verdict is None and check.left_out:
        return (f"{check.label}: {len(check.rows)} run(s), "
                f"{len(check.left_out)} left out (see the notes): too few "
                "to compare")
    if check.verdict is None:
        return (f"{check.label}: {len(check.rows)} run, nothing earlier to "
                "compare with")
    return f"{check.label}: " + check.verdict.describe("earlier", "latest")


def checks_json(checks: Sequence[CaseCheck]) -> str:
    return json.dumps([{
        "case": c.label, "runs": len(c.rows),
        "latest": {**dataclasses.asdict(c.rows[-1]),
                   "framework": framework(c.rows[-1])},
        "verdict": c.verdict.as_dict() if c.verdict else None,
        "left_out": c.left_out, "warmup_counted": c.warmup,
        "notes": c.notes}
        for c in checks], indent=2) + "\n"


# ---------------------------------------------------------------- plotting

def plot(checks: Sequence[CaseCheck], path: str) -> None:
    """Each case's mean rate per run over time (PNG, written atomically);
    ExtractError without matplotlib (the `plot` extra), or naming ``path``
    (not the temporary file beside it) where it cannot be written."""
    png = history_plot.png_bytes({c.label: c.rows for c in checks})
    try:
        with writing(path, "the history plot"):
            atomic.write_bytes_atomic(path, png)
    except NotWritable:
        raise
    except OSError as e:  # e.g. under /proc: the temporary file's ENOENT
        raise ExtractError(f"cannot write the history plot to {path}: "
                           f"{e.strerror or e}") from None


# ---------------------------------------------------------------- importing

def _log_dirs(root: str) -> List[str]:
    """Every directory under ``root`` (itself included) whose {N}n{G}g
    subdirectories hold run logs."""
    found = []
    for here, dirs, _ in os.walk(root):
        dirs.sort()
        if any(log_tree.parse_case_name(d) for d in dirs) and \
                logparse.find_logs(here)[0]:
            found.append(here)
    return found


def _row_from_log(outcome: RunOutcome, when: float) -> Row:
    """A row from the log lines alone (no result.json beside the log, or
    one the mean rate cannot use); the backend from that result.json when
    there is one, else from the log's place in the tree."""
    import datetime
    run = outcome.run
    counted = outcome.counted
    case = (run.num_nodes, run.gpus_per_node, run.batch_size, run.dtype,
            None, None)
    return Row(
        time_utc=datetime.datetime.fromtimestamp(
            when, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        unix_time=when, source="import", source_path=outcome.log_path,
        run_key=run_key(case, counted), config_digest=None, model=None,
        image_size=None, nodes=run.num_nodes, gpus_per_node=run.gpus_per_node,
        batch_per_device=run.batch_size,
        global_batch=outcome.global_batch_size or 0, precision=run.dtype,
        strategy=None, tensorflow=None, cuda=None, driver=None, host=None,
        devices="[]", environment="{}", mean_rate=outcome.speed,
        images_per_second_over_window=images_per_second_over_window(counted),
        num_intervals=len(counted),
        intervals=json.dumps([[i.start_step, i.end_step, i.seconds,
                               i.examples_per_second] for i in counted]),
        backend=run_backend.backend(outcome.config, outcome.environment,
                                    outcome.log_path))


def _import_row(outcome: RunOutcome, log: str
                ) -> Tuple[Optional[Row], Optional[str]]:
    """(row, None) or (None, why it is not imported)."""
    if not outcome.ok:
        return None, f"{log}: left out: {outcome.excluded}"
    when = os.path.getmtime(log)
    json_copy = log_tree.json_path(log)
    if outcome.source == "result_json":
        with open(json_copy, encoding="utf-8") as f:
            row = row_from_result(json.load(f), "import", log, when)
        if row is not None:
            return row, None
    return _row_from_log(outcome, when), None


def import_tree(db: str, root: str, warmup: Optional[int] = None,
                train: Optional[int] = None, window: Optional[str] = None
                ) -> Tuple[int, int, List[str]]:
    """Import a log tree; returns (new rows, runs read, notes). The window
    of logs without result.json: ``warmup``/``train`` (DLPerf's where
    None), or with ``window="auto"`` the longest every run of the tree
    covers after its first interval (its note first)."""
    if not os.path.isdir(root):
        raise ExtractError(f"--import {root}: no such directory")
    dirs = _log_dirs(root)
    if not dirs:
        raise ExtractError(f"--import {root}: no logs {{N}}n{{G}}g/rn50_b"
                           "{B}_{dtype}_{i}.log under it")
    runs = [run for here in dirs for run in logparse.find_logs(here)[0]]
    notes = []
    if window == windows.AUTO:
        warmup, train = windows.auto_window(runs)
        notes.append(window_note((warmup, train)))
    warmup, train = windows.given_or_dlperf(warmup, train)
    rows = []
    outcomes = [measure_log(run, log, warmup, train, "mean")
                for run, log in runs]
    for (_, log), outcome in zip(runs, outcomes):
        row, note = _import_row(outcome, log)
        if row is not None:
            rows.append(row)
        if note:
            notes.append(note)
    if runs and not rows and notes:
        # Short runs (a CPU try) outside DLPerf's window: the flags that
        # count them, as the extractor and official-bench-compare name.
        notes[-1] += window_hint(outcomes)
    added = 0
    if rows:
        with writing(db, "the run history"):
            added = history_db.append(db, rows, on_migrate=notes.append)
    return added, len(rows), notes


# ---------------------------------------------------------------- CLI

# --help's exit statuses (contracts/exit_status.help_text).
EXIT_STATUSES = {
    exit_status.OK: "no case slower",
    exit_status.FAILED: "bad input (no such file, not a history, no such "
                        "case)",
    exit_status.CONFIG: "bad usage",
    exit_status.NOT_WRITABLE: "cannot write (import, plot)",
    exit_status.SLOWER: "a case's latest run is slower beyond the spread",
}


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="official-bench-history", formatter_class=help_formatter(),
        description="The run history: each case's runs over time; the "
                    "latest run against the earlier ones (ratio of "
                    "medians, 95% interval, verdict, as "
                    "official-bench-compare).",
        epilog=exit_status.help_text(EXIT_STATUSES))
    p.add_argument("--db", required=True, metavar="FILE",
                   help="the history file (the trainer's default: "
                        f"{history_db.FILE_NAME} at the root of MODEL_DIR, "
                        "else in the model_dir; the trainer prints it as "
                        "'history: PATH')")
    p.add_argument("--case", metavar="LABEL",
                   help="one case as listed, or its setup alone, e.g. "
                        "'1n1g b128 fp32 resnet50 224px' (each of its "
                        "backends, windows and trees; default: every "
                        "case)")
    p.add_argument("--plot", metavar="PNG",
                   help="draw the case(s) over time into this PNG")
    p.add_argument("--json", action="store_true",
                   help="print JSON instead of text")
    p.add_argument("--import", dest="import_dir", metavar="LOG_DIR",
                   help="add the runs of a log tree to the history, then "
                        "stop")
    windows.add_flags(p.add_argument_group(
        "--import's window", "It decides which runs are imported: one the "
        "extractor would leave out in it (no interval inside it, cut short "
        "before its end) is not, with or without its result.json. A log "
        "alone is then counted in it; a log with its result.json gets the "
        "row the trainer would have written, in the trainer's own "
        "window."))
    return p


def check_paths(args: argparse.Namespace) -> None:
    """--db and --plot checked before anything is read or imported:
    HistoryError or ExtractError naming the one that cannot be used."""
    history_db.check_path(args.db)
    if args.plot is None:
        return
    if not args.plot:
        raise ExtractError("--plot is empty: give the PNG's file name")
    if os.path.isdir(args.plot):
        raise ExtractError(f"--plot {args.plot} is a directory: give the "
                           "PNG's file name")
    above = history_db.blocking_file(args.plot)
    if above:
        raise ExtractError(f"--plot {args.plot}: {above} is not a folder")


def _run(args: argparse.Namespace) -> int:
    """The command once arguments are fine; raises the errors main maps."""
    if args.import_dir:
        added, read, notes = import_tree(args.db, args.import_dir,
                                         args.warmup_batches,
                                         args.train_batches, args.window)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        stored = (f"; {read - added} already in the history"
                  if read > added else "")
        print(f"imported {added} new run(s) of {read} usable in "
              f"{args.import_dir} into {args.db}{stored}")
        return exit_status.OK
    rows = history_db.read_rows(args.db)
    if not rows:
        raise ExtractError(f"the history {args.db} holds no run yet")
    checks = [check_case(label, case_rows)
              for label, case_rows in select(rows, args.case).items()]
    for check in checks:
        for note in (check.left_out + [check.warmup] * bool(check.warmup)
                     + check.notes):
            print(f"note: {note}", file=sys.stderr)
    if args.json:
        print(checks_json(checks), end="")
    elif args.case:
        for check in checks:
            print(listing(check), end="")
    else:
        for check in checks:
            print(summary_line(check))
    if args.plot:
        plot(checks, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    slower = [c.label for c in checks
              if c.verdict and c.verdict.verdict == verdict.SLOWER]
    if slower:
        print(f"error: slower than the earlier runs beyond their spread: "
              f"{'; '.join(slower)}", file=sys.stderr)
        return exit_status.SLOWER
    return exit_status.OK


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else exit_status.CONFIG
    conflict = windows.flag_conflict(args.window, args.warmup_batches,
                                     args.train_batches)
    given = [f"--{k}" for k in ("window", "warmup_batches", "train_batches")
             if getattr(args, k) is not None]
    if given and not args.import_dir:
        conflict = (f"{', '.join(given)} go{'es' if len(given) == 1 else ''}"
                    " with --import LOG_DIR (the window of the logs it "
                    "reads); the history's runs keep the window they were "
                    "counted in")
    if conflict:
        print(f"{parser.prog}: error: {conflict}; see --help",
              file=sys.stderr)
        return exit_status.CONFIG
    try:
        check_paths(args)
        return _run(args)
    except NotWritable as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.NOT_WRITABLE
    except (HistoryError, ExtractError, OSError) as e:  # OSError: a file
        print(f"error: {e}", file=sys.stderr)           # where a folder goes
        return exit_status.FAILED


def run_main() -> None:
    """Console-script entry point ``official-bench-history``."""
    sys.exit(main())


if __name__ == "__main__":
    run_main()
