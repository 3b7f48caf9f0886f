"""``--window auto``: which steps to count when the runs are shorter than
DLPerf's window (100-600), e.g. a CPU try of 60 steps.

The window is the longest one every run covers once its first interval is
left out: that interval holds the graph tracing and autotuning (warm-up),
which no speed should include. From each run, the end of its first interval
to the end of its last (contracts/counting.steps_covered); over the runs,
the latest start and the earliest end (counting.common_window, which the
extractor's hint for a default window no run reaches uses too). DLPerf's
defaults apply unless this is asked for.

The flags that choose the window (--warmup_batches, --train_batches,
--window) are defined here once, for every command that counts one (the
extractor, official-bench-compare, official-bench-history --import):
add_flags, flag_conflict, given_or_dlperf.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

from official_bench.contracts import (
    counting,
    log_tree,
    result_json,
    run_status,
)
from official_bench.contracts.counting import common_window, steps_covered
from official_bench.extract import logparse, speeds
from official_bench.extract.errors import ExtractError
from official_bench.extract.logparse import RunId

AUTO = "auto"  # the flag's value
DLPERF_WARMUP, DLPERF_TRAIN = counting.DLPERF_WINDOW


def add_flags(parser: Any) -> None:
    """--warmup_batches, --train_batches and --window on `parser` (an
    argparse parser or argument group), in one wording. Each defaults to
    None (not given), so that flag_conflict can tell a chosen window from
    the defaults and a command can keep a result.json's own window;
    given_or_dlperf fills in DLPerf's."""
    parser.add_argument(
        "--warmup_batches", type=int, default=None,
        help="intervals starting before this step are not counted "
             f"(default: {DLPERF_WARMUP}, DLPerf's)")
    parser.add_argument(
        "--train_batches", type=int, default=None,
        help="intervals ending after this step are not counted; a run "
             "without the finish line must reach it (default: "
             f"{DLPERF_TRAIN}, DLPerf's)")
    parser.add_argument(
        "--window", choices=(AUTO,), default=None,
        help="auto: count the longest window every run covers after its "
             "first (warm-up) interval, and say which (for short runs, "
             "e.g. a CPU try; not with --warmup_batches/--train_batches)")


def given_or_dlperf(warmup: Optional[int], train: Optional[int]
                    ) -> Tuple[int, int]:
    """The window flags' values, DLPerf's where not given."""
    return (DLPERF_WARMUP if warmup is None else warmup,
            DLPERF_TRAIN if train is None else train)


def window_problem(warmup: int, train: int, warmup_given: bool = True,
                   train_given: bool = True) -> Optional[str]:
    """Why the window ``[warmup, train]`` counts no step, or None (every
    command's wording; ``*_given`` False: that bound is DLPerf's default,
    and the line says so)."""
    if warmup < 0:
        return f"warmup_batches is {warmup}, must be >= 0"
    if train <= warmup:
        return (f"train_batches ({train}{_default(train_given, 'train')}) "
                f"must be greater than warmup_batches "
                f"({warmup}{_default(warmup_given, 'warmup')})")
    return None


def _default(given: bool, name: str) -> str:
    return "" if given else f", DLPerf's default: give --{name}_batches"


def flag_conflict(window: Optional[str], warmup: Optional[int],
                  train: Optional[int]) -> Optional[str]:
    """The usage error of the window flags (for every command of
    add_flags), or None: --window given with the window's own flags, or a
    window that counts no step once resolved (given_or_dlperf: one flag
    given alone keeps DLPerf's other bound, in every command)."""
    if window and (warmup is not None or train is not None):
        return (f"--window {window} chooses --warmup_batches and "
                "--train_batches; give one or the other")
    if warmup is None and train is None:
        return None
    return window_problem(*given_or_dlperf(warmup, train),
                          warmup_given=warmup is not None,
                          train_given=train is not None)


def given_window(warmup: Optional[int], train: Optional[int]
                 ) -> Optional[Tuple[int, int]]:
    """The window the flags choose (given_or_dlperf), or None when neither
    is given: a folder of result.json files then counts each run's own,
    the trainer's."""
    if warmup is None and train is None:
        return None
    return given_or_dlperf(warmup, train)


def auto_window(runs: Sequence[Tuple[RunId, str]],
                method: str = "mean") -> Optional[Tuple[int, int]]:
    """``--window auto``: the longest window every run covers after its
    first (warm-up) interval, as ``(warmup_batches, train_batches)``;
    None when no run may choose one (each unreadable or unable to count:
    the caller excludes them with their reasons).

    Runs that cannot count anyway (unreadable, failed for the launcher,
    crashed with a traceback before the finish line, cut in the middle of
    a TimeHistory line, steps that go backward: _cannot_count, for
    ``method``'s source of intervals) do not shorten it;
    they are excluded later with their reason. DLPerf's defaults are never
    changed by this: it applies only when asked for.
    """
    spans, intervals, may_choose = [], {}, 0
    for _, path in runs:
        try:
            parsed = logparse.parse_log_file(path)
        except OSError:
            continue
        if _cannot_count(parsed, path, method):
            continue
        may_choose += 1
        span = steps_covered(parsed.intervals)
        if span:
            spans.append(span)
            intervals[path] = parsed.intervals
    if not may_choose:
        return None
    window = common_window(spans)
    if window is None:
        raise ExtractError(
            "--window auto: the runs share no steps after their first "
            "(warm-up) interval (steps covered: " + (", ".join(
                f"{a}-{b}" for a, b in spans) or "none") + "); give "
            "--warmup_batches and --train_batches")
    _check_each_counts(window, intervals)
    return window


def _cannot_count(parsed: logparse.ParsedLog, path: str,
                  method: str) -> bool:
    """Whether the run may not choose the window: the launcher saw it
    fail, it crashed before its finish line (counted later only where it
    reached the window's end), or measure_run leaves it out whatever the
    window (speeds.window_free_problem, with the result JSON beside it)."""
    if run_status.exclusion(run_status.load_status(path)[0]):
        return True
    if parsed.traceback_line and not parsed.finished:
        return True
    run_json, _ = result_json.load_run_json(log_tree.json_path(path))
    return speeds.window_free_problem(parsed, run_json, method) is not None


def _check_each_counts(window: Tuple[int, int], intervals: dict) -> None:
    """ExtractError when a run has no whole interval inside the window
    every run covers: runs that log every different number of steps
    (LOG_STEPS), e.g. two trees compared, can share steps but no
    interval."""
    for path, found in intervals.items():
        if not counting.in_window(found, *window):
            raise ExtractError(
                f"--window auto: every run covers steps {window[0]}-"
                f"{window[1]} after its first (warm-up) interval, but no "
                f"whole interval of {path} lies inside them (its "
                "intervals: " + ", ".join(
                    f"{iv.start_step}-{iv.end_step}" for iv in found)
                + "): the runs log every different number of steps; give "
                "--warmup_batches and --train_batches")
