"""One run's throughput, or the reason it is left out.

Counted intervals (contracts/counting.py): the TimeHistory intervals with
``start_step >= warmup_batches`` and ``end_step <= train_batches``
(identified by their "between steps a and b", so any ``log_steps`` works;
an interval straddling either bound is not counted).

``method="mean"`` (DLPerf's): the run's speed is the arithmetic mean of the
counted intervals' examples/second, summed in numpy's order (see
:mod:`official_bench.extract.rounding`). ``method="time"`` (DLPerf's
time-based variant): images over the clock time of the same intervals,
computed as DLPerf does (:func:`time_speed`). Speeds here are not rounded;
the per-run rounding to 2 decimals happens in
:mod:`official_bench.extract.cases`.

Which runs count. A run is complete when its log has the line
``official_bench: run finished`` or its intervals reach ``train_batches``
(DLPerf's logs have no finish line); a traceback in a complete run is only a
warning, as in DLPerf. An incomplete run is excluded as crashed or truncated;
so is, each with its reason, a run with no TimeHistory lines, a malformed
line that may be inside the window, steps that go backward, no interval
inside the window, or (``time``) unusable clock times. Anything outside the
window, gaps and a window cut short only warn. Where the intervals come from
(result JSON or log lines): :func:`measure_run`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

from official_bench.contracts import counting, throughput
from official_bench.contracts.flops import FlopsRecord
from official_bench.contracts.result_json import RunResultFile
from official_bench.contracts.throughput import ReadInterval
from official_bench.extract import logparse, rounding
from official_bench.extract.logparse import MalformedLine, ParsedLog

METHODS = ("mean", "time")
# Log lines print examples/second with 2 decimals; JSON values are exact.
_ROUNDING_TOLERANCE = 0.0051


@dataclasses.dataclass
class RunOutcome:
    """What became of one run: a speed, or ``excluded`` with the reason."""

    run: logparse.RunId
    log_path: str
    speed: Optional[float] = None
    excluded: Optional[str] = None
    warnings: List[str] = dataclasses.field(default_factory=list)
    # where the intervals came from: "log" or "result_json"
    source: str = "log"
    # (first start, last end) of counted intervals
    counted_steps: Optional[Tuple[int, int]] = None
    num_intervals: int = 0
    global_batch_size: Optional[int] = None
    environment: Optional[Dict[str, Any]] = None
    gpu_utilisation: Optional[float] = None  # mean percent (result JSON)
    # input-wait fraction (result JSON), None: n/a
    input_wait: Optional[float] = None
    # (end of the first interval, end of the last) of the intervals found:
    # the steps the run covers after its warm-up interval, for the
    # extractor's hint and its --window auto (counting.steps_covered).
    steps_found: Optional[Tuple[int, int]] = None
    # The counted intervals themselves, for the statistics that resample
    # them (judge/verdict.py: compare and history).
    counted: List[ReadInterval] = dataclasses.field(default_factory=list)
    config: Optional[Dict[str, Any]] = None  # the run's config (result JSON)
    flops: Optional[FlopsRecord] = None  # result JSON's flops object
    # images / time over the counted intervals (contracts/throughput.py),
    # beside ``speed`` (the mean of their rates for method "mean")
    over_window: Optional[float] = None

    @property
    def ok(self) -> bool:
        """True when the run has a speed and takes part in the statistics."""
        return self.excluded is None


def _steps(intervals: Sequence[ReadInterval], limit: int = 6) -> str:
    """Short listing of interval steps for messages: '0-100, 100-200, ...'."""
    text = ", ".join(f"{iv.start_step}-{iv.end_step}"
                     for iv in intervals[:limit])
    return text + (", ..." if len(intervals) > limit else "")


def _last_step(intervals: Sequence[ReadInterval]) -> Optional[int]:
    """End step of the last interval, None without intervals."""
    return max((iv.end_step for iv in intervals), default=None)


def completeness_problem(parsed: ParsedLog, intervals: Sequence[ReadInterval],
                         train_batches: int) -> Optional[str]:
    """Why the run cannot be trusted to have finished, or None if it did.

    Reaching ``train_batches`` is enough: DLPerf's logs have no finish line.
    """
    if parsed.finished:
        return None
    last = _last_step(intervals)
    if last is not None and last >= train_batches:
        return None
    where = (f"the last TimeHistory interval ends at step {last}"
             if last is not None else "there are no TimeHistory lines")
    if parsed.traceback_line:
        exception = parsed.exception or "exception line missing"
        return (f"crashed: Traceback at line {parsed.traceback_line} "
                f"({exception}), no '{logparse.FINISH_MARKER}' line, and "
                f"{where}")
    return (f"truncated: no '{logparse.FINISH_MARKER}' line and {where} "
            f"(train_batches is {train_batches})")


def traceback_warning(parsed: ParsedLog, intervals: Sequence[ReadInterval],
                      train_batches: int) -> Optional[str]:
    """Warning for a traceback in a run counted as complete, else None.

    A run with the finish line handled its exception itself; one without it
    whose intervals reach ``train_batches`` measured everything that counts,
    whatever happened after (often an "Exception ignored" at shutdown).
    """
    if parsed.finished or not parsed.traceback_line:
        return None
    exception = parsed.exception or "exception line missing"
    return (f"Traceback at line {parsed.traceback_line} ({exception}) but "
            f"the intervals reach step {_last_step(intervals)} (train_batches "
            f"{train_batches}): counted as complete, as DLPerf does")


def _where(interval: ReadInterval) -> str:
    """Where an interval came from, for messages."""
    return f"line {interval.line_no}" if interval.line_no else "result JSON"


def order_problem(intervals: Sequence[ReadInterval]) -> Optional[str]:
    """Describe steps that go backward or overlap, or None when they
    increase."""
    for prev, cur in zip(intervals, intervals[1:]):
        if cur.start_step < prev.end_step:
            return (f"steps go backward: interval {cur.start_step}-"
                    f"{cur.end_step} ({_where(cur)}) after {prev.start_step}-"
                    f"{prev.end_step} ({_where(prev)}); two processes or a "
                    "restart in one log?")
    return None


def _malformed_problem(malformed: Sequence[MalformedLine], warmup_batches: int,
                       train_batches: int,
                       warnings: List[str]) -> Optional[str]:
    """Exclusion reason for malformed lines that may touch the window.

    Lines whose steps are known to lie outside the window only warn.
    """
    for bad in malformed:
        if bad.steps and not (bad.steps[0] >= warmup_batches
                              and bad.steps[1] <= train_batches):
            warnings.append("malformed TimeHistory line outside the counted "
                            "window ignored: " + bad.describe())
            continue
        return "malformed TimeHistory " + bad.describe()
    return None


def uses_json(run_json: Optional[RunResultFile], method: str) -> bool:
    """Whether measure_run takes the intervals from the result JSON: a
    usable one with intervals, for the mean method (the time method needs
    the log's clock times)."""
    return run_json is not None and method == "mean" and \
        bool(run_json.intervals)


def window_free_problem(parsed: ParsedLog,
                        run_json: Optional[RunResultFile] = None,
                        method: str = "mean") -> Optional[str]:
    """Why measure_run leaves the run out whatever the window (--window
    auto lets no such run choose it), or None: no TimeHistory line, a line
    too broken to tell its steps where the log lines are used, or steps
    that go backward."""
    use_json = uses_json(run_json, method)
    intervals = run_json.intervals if use_json else parsed.intervals
    if not intervals:
        return "no TimeHistory lines (nothing to measure)" + (
            "; malformed " + parsed.malformed[0].describe()
            if parsed.malformed else "")
    unknown = [bad for bad in parsed.malformed if not bad.steps]
    if unknown and not use_json:
        return "malformed TimeHistory " + unknown[0].describe()
    return order_problem(intervals)


def _gap_warnings(counted: Sequence[ReadInterval], warmup_batches: int,
                  train_batches: int) -> List[str]:
    """Warnings about missing intervals and a window cut short."""
    warnings: List[str] = []
    for prev, cur in zip(counted, counted[1:]):
        if cur.start_step != prev.end_step:
            warnings.append(f"no interval between steps {prev.end_step} and "
                            f"{cur.start_step}")
    if counted[-1].end_step < train_batches:
        warnings.append(f"counted steps end at {counted[-1].end_step}, before "
                        f"train_batches {train_batches} (run finished early "
                        "or log_steps does not divide it)")
    if counted[0].start_step > warmup_batches:
        warnings.append(f"counted steps start at {counted[0].start_step}, "
                        f"after warmup_batches {warmup_batches} (log_steps "
                        "does not divide it)")
    return warnings


def mean_speed(counted: Sequence[ReadInterval]) -> float:
    """DLPerf's per-run speed: mean examples/second of the counted intervals
    (numpy's summation order, so that log values give DLPerf's float)."""
    return rounding.numpy_mean([iv.examples_per_second for iv in counted])


def time_speed(log_intervals: Sequence[ReadInterval],
               counted: Sequence[ReadInterval], global_batch: int
               ) -> Tuple[Optional[float], Optional[str]]:
    """Speed from clock times; returns ``(speed, problem)``.

    With ``first`` and ``last`` the first and last counted intervals::

        speed = global_batch / ((t_end - t_start)
                                / (last.end_step - first.start_step))

    where ``t_end`` is the clock time of ``last``'s log line and ``t_start``
    the clock time of the line of the interval ending at ``first.start_step``
    (when the first counted step began); without such a line (e.g. warm-up
    0) ``first``'s clock time minus its printed seconds. Clock times come
    from the log (:mod:`official_bench.extract.logparse` handles midnight
    and new year); the duration is taken to whole microseconds, the log's
    resolution, and the order of operations is DLPerf's, so that the same
    log gives the same float. ``global_batch`` is the result JSON's
    ``stats.global_batch_size`` when present, else per-device batch (file
    name) times devices (N*G from the directory name).
    """
    first, last = counted[0], counted[-1]
    before = [iv for iv in log_intervals
              if iv.end_step == first.start_step
              and iv.line_no < first.line_no]
    if before and before[-1].timestamp is not None:
        ref = before[-1]
        t_start, start_desc = ref.timestamp, f"line {ref.line_no}"
        clock = ref.clock
    elif first.timestamp is not None:
        t_start = first.timestamp - first.seconds
        start_desc = f"line {first.line_no} minus its {first.seconds:.2f} s"
        clock = first.clock
    else:
        return None, (f"no clock time on TimeHistory line {first.line_no} "
                      "(needed by --method time)")
    if last.timestamp is None:
        return None, (f"no clock time on TimeHistory line {last.line_no} "
                      "(needed by --method time)")
    if last.clock != clock:
        return None, ("TimeHistory lines use different clock formats "
                      f"({clock}, {last.clock})")
    # Whole microseconds, as DLPerf's datetime difference gives them.
    duration = round((last.timestamp - t_start) * 1e6) / 1e6
    if duration <= 0:
        return None, (f"clock time does not increase from {start_desc} to "
                      f"line {last.line_no} ({duration:.3f} s); clock changed "
                      "during the run?")
    steps = last.end_step - first.start_step
    return float(global_batch) / (duration / steps), None


def _cross_check(json_intervals: Sequence[ReadInterval],
                 log_intervals: Sequence[ReadInterval], warmup_batches: int,
                 train_batches: int) -> List[str]:
    """Warnings where the result JSON and the log lines disagree (window
    only)."""
    if not log_intervals:
        return ["result JSON has intervals but the log has no TimeHistory "
                "lines to cross-check them"]
    from_json = {(iv.start_step, iv.end_step): iv.examples_per_second
                 for iv in counting.in_window(json_intervals, warmup_batches,
                                              train_batches)}
    from_log = {(iv.start_step, iv.end_step): iv.examples_per_second
                for iv in counting.in_window(log_intervals, warmup_batches,
                                             train_batches)}
    problems: List[str] = []
    for steps in sorted(set(from_json) | set(from_log)):
        a, b = from_json.get(steps), from_log.get(steps)
        if a is None or b is None:
            where = "log" if a is None else "result JSON"
            problems.append(f"steps {steps[0]}-{steps[1]} only in the {where}")
        elif abs(a - b) > _ROUNDING_TOLERANCE:
            problems.append(f"steps {steps[0]}-{steps[1]}: {a:.4f} examples/s "
                            f"in the result JSON, {b:.2f} in the log")
    if not problems:
        return []
    return [f"result JSON and log disagree in {len(problems)} interval(s), "
            f"using the JSON: {'; '.join(problems[:3])}"]


def _json_warnings(run: logparse.RunId,
                   run_json: RunResultFile) -> List[str]:
    """Warnings where the result JSON contradicts the log's name or
    directory."""
    warnings: List[str] = []
    if run_json.num_replicas and run_json.num_replicas != run.num_devices:
        warnings.append(f"result JSON says num_replicas="
                        f"{run_json.num_replicas} but directory {run.case} "
                        f"means {run.num_devices} devices")
    expected = run.batch_size * run.num_devices
    if run_json.global_batch_size and run_json.global_batch_size != expected:
        warnings.append(f"result JSON says global_batch_size="
                        f"{run_json.global_batch_size}, file name and "
                        f"directory give {run.batch_size} x {run.num_devices} "
                        f"= {expected}; using {run_json.global_batch_size}")
    if run_json.dtype and run_json.dtype != run.dtype:
        warnings.append(f"result JSON says dtype {run_json.dtype}, file name "
                        f"says {run.dtype}")
    return warnings


def measure_run(run: logparse.RunId, parsed: ParsedLog,
                run_json: Optional[RunResultFile] = None,
                warmup_batches: int = 100, train_batches: int = 600,
                method: str = "mean") -> RunOutcome:
    """Decide one run's speed from its parsed log and optional result JSON.

    ``parsed`` is a :class:`logparse.ParsedLog`, ``run_json`` a
    :class:`result_json.RunResultFile` or None. Returns a
    :class:`RunOutcome`; nothing is raised for bad logs (a bad run is an
    outcome, not an error).

    With a usable result JSON next to the log the mean method uses its
    intervals (unrounded) and cross-checks them against the log lines; the
    time method always needs the log (the JSON has no clock times). Without
    the JSON the log lines are used.
    """
    if method not in METHODS:
        raise ValueError(f"method {method!r} is not one of "
                         f"{', '.join(METHODS)}")
    out = RunOutcome(run, parsed.path,
                     global_batch_size=run.batch_size * run.num_devices)
    use_json = uses_json(run_json, method)
    if run_json is not None and method == "mean" and not use_json:
        out.warnings.append(
            "result JSON has no intervals; using the log lines")
    if run_json is not None:
        out.environment = run_json.environment
        out.gpu_utilisation = run_json.gpu_utilisation
        out.input_wait = run_json.input_wait
        out.config, out.flops = run_json.config, run_json.flops
        out.warnings += _json_warnings(run, run_json)
        out.warnings += ["trainer: " + w for w in run_json.warnings]
        if run_json.global_batch_size:
            out.global_batch_size = run_json.global_batch_size
    intervals = run_json.intervals if use_json else parsed.intervals
    out.source = "result_json" if use_json else "log"
    # Whether the run got through is the log's to say: a result JSON next to
    # a log that stops early may be left over from another run.
    out.excluded = completeness_problem(parsed, parsed.intervals,
                                        train_batches)
    if out.excluded:
        return out
    warning = traceback_warning(parsed, parsed.intervals, train_batches)
    if warning:
        out.warnings.append(warning)
    out.excluded = window_free_problem(parsed, run_json, method)
    if out.excluded:
        return out
    if use_json:
        out.warnings += ["log: malformed TimeHistory " + m.describe()
                         for m in parsed.malformed]
        out.warnings += _cross_check(intervals, parsed.intervals,
                                     warmup_batches, train_batches)
    else:
        out.excluded = _malformed_problem(parsed.malformed, warmup_batches,
                                          train_batches, out.warnings)
        if out.excluded:
            return out
    out.steps_found = counting.steps_covered(intervals)
    counted = counting.in_window(intervals, warmup_batches, train_batches)
    if not counted:
        out.excluded = (f"no TimeHistory interval inside steps "
                        f"[{warmup_batches}, {train_batches}] (intervals "
                        f"found: {_steps(intervals)})")
        return out
    out.warnings += _gap_warnings(counted, warmup_batches, train_batches)
    out.counted_steps = (counted[0].start_step, counted[-1].end_step)
    out.num_intervals = len(counted)
    out.counted = list(counted)
    out.over_window = throughput.images_per_second_over_window(counted)
    if method == "mean":
        out.speed = mean_speed(counted)
    else:
        out.speed, out.excluded = time_speed(intervals, counted,
                                             out.global_batch_size)
    return out
