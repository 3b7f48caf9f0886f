"""One run's throughput, or the reason it is left out.

Counted intervals: the TimeHistory intervals with ``start_step >=
warmup_batches`` and ``end_step <= train_batches`` (identified by their
"between steps a and b", so any ``log_steps`` works; an interval straddling
either bound is not counted).

``method="mean"`` (DLPerf's): the run's speed is the arithmetic mean of the
counted intervals' examples/second, summed in numpy's order (see
:mod:`official_bench.results.rounding`). Speeds here are not rounded; the
per-run rounding to 2 decimals happens in :mod:`official_bench.results.cases`.

``method="time"`` (DLPerf's time-based variant, same counted intervals): let
``first`` and ``last`` be the first and last counted intervals. Then::

    speed = global_batch / ((t_end - t_start) / (last.end_step - first.start_step))

where ``t_end`` is the clock time of ``last``'s log line and ``t_start`` the
clock time of the log line of the interval ending at ``first.start_step`` (the
moment the first counted step began); when no such line exists (e.g. warm-up 0)
``t_start`` is ``first``'s clock time minus its printed seconds. Clock times
come from the log (see :mod:`official_bench.results.logparse` for midnight and
new-year handling); the duration is taken to whole microseconds, the
resolution of the log, and the formula's order of operations is DLPerf's, so
that the same log gives the same float. ``global_batch`` is the result JSON's
``stats.global_batch_size`` when present, else per-device batch (from the file
name) times devices (N*G from the directory name).

Which runs count. A run is complete when its log has the line
``official_bench: run finished`` or its intervals reach ``train_batches``; a
Python traceback in a complete run is only a warning (DLPerf's logs have no
finish line, and a harmless "Exception ignored in ..." traceback at interpreter
shutdown is common; DLPerf counts those runs too). An incomplete run is
excluded as crashed (the log has a traceback) or truncated. Also excluded, each with its reason: no TimeHistory lines, a
malformed TimeHistory line that is (or may be) inside the counted window,
steps that go backward (two processes or a restart in one log), no interval
inside the window, and for ``time`` missing or non-increasing clock times.
Malformed lines outside the window, gaps, and a window cut short by an early
finish only give warnings.

Interval source. With a usable result JSON next to the log the mean method uses
its intervals (unrounded) and cross-checks them against the log lines; the
time method always needs the log (the JSON has no clock times). Without the
JSON the log lines are used.
"""

import dataclasses

from official_bench.results import logparse
from official_bench.results import rounding

METHODS = ("mean", "time")
# Log lines print examples/second with 2 decimals; JSON values are exact.
_ROUNDING_TOLERANCE = 0.0051


@dataclasses.dataclass
class RunOutcome:
    """What became of one run: a speed, or ``excluded`` with the reason."""

    run: logparse.RunId
    log_path: str
    speed: float = None
    excluded: str = None
    warnings: list = dataclasses.field(default_factory=list)
    source: str = "log"  # where the intervals came from: "log" or "result_json"
    counted_steps: tuple = None  # (first start, last end) of counted intervals
    num_intervals: int = 0
    global_batch_size: int = None
    environment: dict = None
    gpu_utilisation: float = None  # mean percent (result JSON), None: n/a
    input_wait: float = None  # input-wait fraction (result JSON), None: n/a

    @property
    def ok(self):
        """True when the run has a speed and takes part in the statistics."""
        return self.excluded is None


def counted_intervals(intervals, warmup_batches, train_batches):
    """The intervals inside ``[warmup_batches, train_batches]``, in order."""
    return [iv for iv in intervals
            if iv.start_step >= warmup_batches and iv.end_step <= train_batches]


def _steps(intervals, limit=6):
    """Short listing of interval steps for messages: '0-100, 100-200, ...'."""
    text = ", ".join("%d-%d" % (iv.start_step, iv.end_step)
                     for iv in intervals[:limit])
    return text + (", ..." if len(intervals) > limit else "")


def _last_step(intervals):
    """End step of the last interval, None without intervals."""
    return max((iv.end_step for iv in intervals), default=None)


def completeness_problem(parsed, intervals, train_batches):
    """Why the run cannot be trusted to have finished, or None if it did.

    Reaching ``train_batches`` is enough: DLPerf's logs have no finish line.
    """
    if parsed.finished:
        return None
    last = _last_step(intervals)
    if last is not None and last >= train_batches:
        return None
    where = ("the last TimeHistory interval ends at step %d" % last
             if last is not None else "there are no TimeHistory lines")
    if parsed.traceback_line:
        return ("crashed: Traceback at line %d (%s), no '%s' line, and %s"
                % (parsed.traceback_line, parsed.exception or "exception line "
                   "missing", logparse.FINISH_MARKER, where))
    return ("truncated: no '%s' line and %s (train_batches is %d)"
            % (logparse.FINISH_MARKER, where, train_batches))


def traceback_warning(parsed, intervals, train_batches):
    """Warning for a traceback in a run counted as complete, else None.

    A run with the finish line handled its exception itself; one without it
    whose intervals reach ``train_batches`` measured everything that counts,
    whatever happened after (often an "Exception ignored" at shutdown).
    """
    if parsed.finished or not parsed.traceback_line:
        return None
    return ("Traceback at line %d (%s) but the intervals reach step %d "
            "(train_batches %d): counted as complete, as DLPerf does"
            % (parsed.traceback_line, parsed.exception or "exception line "
               "missing", _last_step(intervals), train_batches))


def _where(interval):
    """Where an interval came from, for messages."""
    return "line %d" % interval.line_no if interval.line_no else "result JSON"


def order_problem(intervals):
    """Describe steps that go backward or overlap, or None when they increase."""
    for prev, cur in zip(intervals, intervals[1:]):
        if cur.start_step < prev.end_step:
            return ("steps go backward: interval %d-%d (%s) after %d-%d (%s); "
                    "two processes or a restart in one log?"
                    % (cur.start_step, cur.end_step, _where(cur),
                       prev.start_step, prev.end_step, _where(prev)))
    return None


def _malformed_problem(malformed, warmup_batches, train_batches, warnings):
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


def _gap_warnings(counted, warmup_batches, train_batches):
    """Warnings about missing intervals and a window cut short."""
    warnings = []
    for prev, cur in zip(counted, counted[1:]):
        if cur.start_step != prev.end_step:
            warnings.append("no interval between steps %d and %d"
                            % (prev.end_step, cur.start_step))
    if counted[-1].end_step < train_batches:
        warnings.append("counted steps end at %d, before train_batches %d "
                        "(run finished early or log_steps does not divide it)"
                        % (counted[-1].end_step, train_batches))
    if counted[0].start_step > warmup_batches:
        warnings.append("counted steps start at %d, after warmup_batches %d "
                        "(log_steps does not divide it)"
                        % (counted[0].start_step, warmup_batches))
    return warnings


def mean_speed(counted):
    """DLPerf's per-run speed: mean examples/second of the counted intervals
    (numpy's summation order, so that log values give DLPerf's float)."""
    return rounding.numpy_mean([iv.examples_per_second for iv in counted])


def time_speed(log_intervals, counted, global_batch):
    """Speed from clock times; returns ``(speed, problem)`` (see module doc)."""
    first, last = counted[0], counted[-1]
    before = [iv for iv in log_intervals
              if iv.end_step == first.start_step and iv.line_no < first.line_no]
    if before and before[-1].timestamp is not None:
        ref = before[-1]
        t_start, start_desc = ref.timestamp, "line %d" % ref.line_no
        clock = ref.clock
    elif first.timestamp is not None:
        t_start = first.timestamp - first.seconds
        start_desc = "line %d minus its %.2f s" % (first.line_no, first.seconds)
        clock = first.clock
    else:
        return None, ("no clock time on TimeHistory line %d (needed by "
                      "--method time)" % first.line_no)
    if last.timestamp is None:
        return None, ("no clock time on TimeHistory line %d (needed by "
                      "--method time)" % last.line_no)
    if last.clock != clock:
        return None, ("TimeHistory lines use different clock formats (%s, %s)"
                      % (clock, last.clock))
    # Whole microseconds, as DLPerf's datetime difference gives them.
    duration = round((last.timestamp - t_start) * 1e6) / 1e6
    if duration <= 0:
        return None, ("clock time does not increase from %s to line %d "
                      "(%.3f s); clock changed during the run?"
                      % (start_desc, last.line_no, duration))
    steps = last.end_step - first.start_step
    return float(global_batch) / (duration / steps), None


def _cross_check(json_intervals, log_intervals, warmup_batches, train_batches):
    """Warnings where the result JSON and the log lines disagree (window only)."""
    if not log_intervals:
        return ["result JSON has intervals but the log has no TimeHistory "
                "lines to cross-check them"]
    from_json = {(iv.start_step, iv.end_step): iv.examples_per_second
                 for iv in counted_intervals(json_intervals, warmup_batches,
                                             train_batches)}
    from_log = {(iv.start_step, iv.end_step): iv.examples_per_second
                for iv in counted_intervals(log_intervals, warmup_batches,
                                            train_batches)}
    problems = []
    for steps in sorted(set(from_json) | set(from_log)):
        a, b = from_json.get(steps), from_log.get(steps)
        if a is None or b is None:
            problems.append("steps %d-%d only in the %s" % (
                steps[0], steps[1], "log" if a is None else "result JSON"))
        elif abs(a - b) > _ROUNDING_TOLERANCE:
            problems.append("steps %d-%d: %.4f examples/s in the result JSON, "
                            "%.2f in the log" % (steps[0], steps[1], a, b))
    if not problems:
        return []
    return ["result JSON and log disagree in %d interval(s), using the JSON: %s"
            % (len(problems), "; ".join(problems[:3]))]


def _json_warnings(run, run_json):
    """Warnings where the result JSON contradicts the log's name or directory."""
    warnings = []
    if run_json.num_replicas and run_json.num_replicas != run.num_devices:
        warnings.append("result JSON says num_replicas=%d but directory %s "
                        "means %d devices" % (run_json.num_replicas, run.case,
                                              run.num_devices))
    expected = run.batch_size * run.num_devices
    if run_json.global_batch_size and run_json.global_batch_size != expected:
        warnings.append("result JSON says global_batch_size=%d, file name and "
                        "directory give %d x %d = %d; using %d"
                        % (run_json.global_batch_size, run.batch_size,
                           run.num_devices, expected, run_json.global_batch_size))
    if run_json.dtype and run_json.dtype != run.dtype:
        warnings.append("result JSON says dtype %s, file name says %s"
                        % (run_json.dtype, run.dtype))
    return warnings


def measure_run(run, parsed, run_json=None, warmup_batches=100,
                train_batches=600, method="mean"):
    """Decide one run's speed from its parsed log and optional result JSON.

    ``parsed`` is a :class:`logparse.ParsedLog`, ``run_json`` a
    :class:`runjson.RunResultFile` or None. Returns a :class:`RunOutcome`;
    nothing is raised for bad logs (a bad run is an outcome, not an error).
    """
    if method not in METHODS:
        raise ValueError("method %r is not one of %s" % (method, ", ".join(METHODS)))
    out = RunOutcome(run, parsed.path,
                     global_batch_size=run.batch_size * run.num_devices)
    use_json = run_json is not None and method == "mean"
    if use_json and not run_json.intervals:
        use_json = False
        out.warnings.append("result JSON has no intervals; using the log lines")
    if run_json is not None:
        out.environment = run_json.environment
        out.gpu_utilisation = run_json.gpu_utilisation
        out.input_wait = run_json.input_wait
        out.warnings += _json_warnings(run, run_json)
        out.warnings += ["trainer: " + w for w in run_json.warnings]
        if run_json.global_batch_size:
            out.global_batch_size = run_json.global_batch_size
    intervals = run_json.intervals if use_json else parsed.intervals
    out.source = "result_json" if use_json else "log"
    # Whether the run got through is the log's to say: a result JSON next to
    # a log that stops early may be left over from another run.
    out.excluded = completeness_problem(parsed, parsed.intervals, train_batches)
    if out.excluded:
        return out
    warning = traceback_warning(parsed, parsed.intervals, train_batches)
    if warning:
        out.warnings.append(warning)
    if not intervals:
        out.excluded = "no TimeHistory lines (nothing to measure)"
        if parsed.malformed:
            out.excluded += "; malformed " + parsed.malformed[0].describe()
        return out
    if use_json:
        out.warnings += ["log: malformed TimeHistory " + m.describe()
                         for m in parsed.malformed]
        out.warnings += _cross_check(intervals, parsed.intervals,
                                     warmup_batches, train_batches)
    else:
        out.excluded = _malformed_problem(parsed.malformed, warmup_batches,
                                          train_batches, out.warnings)
    out.excluded = out.excluded or order_problem(intervals)
    if out.excluded:
        return out
    counted = counted_intervals(intervals, warmup_batches, train_batches)
    if not counted:
        out.excluded = ("no TimeHistory interval inside steps [%d, %d] "
                        "(intervals found: %s)" % (warmup_batches, train_batches,
                                                   _steps(intervals)))
        return out
    out.warnings += _gap_warnings(counted, warmup_batches, train_batches)
    out.counted_steps = (counted[0].start_step, counted[-1].end_step)
    out.num_intervals = len(counted)
    if method == "mean":
        out.speed = mean_speed(counted)
    else:
        out.speed, out.excluded = time_speed(intervals, counted,
                                             out.global_batch_size)
    return out
