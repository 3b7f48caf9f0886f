"""Which TimeHistory intervals count: the one rule that the extractor, the
launcher's end-of-run rate, the compare command, the A/B runner and the
run history apply.

* A window ``[warmup, train]`` counts the intervals wholly inside it
  (``start_step >= warmup`` and ``end_step <= train``), found by their
  "between steps a and b", so any ``log_steps`` works; an interval that
  straddles a bound is not counted. DLPerf's window, the extractor's
  default, is steps 100-600.
* A run shorter than that is counted after its first interval, the warm-up
  (graph tracing, autotuning): from the end of its first interval to the
  end of its last, and for several runs the steps they all cover. The
  extractor's ``--window auto`` and its hint pick that window; the
  launcher's end-of-run rate does the same for one run.
* The A/B runner leaves out the first N intervals of each side's output,
  the same number on every side, whatever steps a side logs.
* The trainer's own mean (measure/timing.py) leaves out the intervals
  before ``warmup_steps`` (counted from the run's first step, also in a
  resumed run) and any touching the profiled steps, or counts
  every unprofiled interval when that leaves none; result.json records
  both settings, so a reader applies the same rule to its intervals.

Standard library only: the launcher and the extractor run without
TensorFlow.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple, TypeVar

from official_bench.contracts.throughput import Interval

# DLPerf's counted steps (its extractor's --warmup_batches/--train_batches
# defaults): ours and the launcher's end-of-run rate use the same.
DLPERF_WINDOW = (100, 600)

IntervalT = TypeVar("IntervalT", bound=Interval)


def in_window(intervals: Sequence[IntervalT], warmup: int,
              train: Optional[int] = None) -> List[IntervalT]:
    """The intervals inside ``[warmup, train]`` (no upper bound when
    ``train`` is None), in order."""
    return [iv for iv in intervals if iv.start_step >= warmup
            and (train is None or iv.end_step <= train)]


def steps_covered(intervals: Sequence[Interval]) -> Optional[Tuple[int, int]]:
    """(end of the first interval, end of the last): the steps a run covers
    once its first interval, the warm-up (graph tracing, autotuning), is
    left out; None without intervals."""
    if not intervals:
        return None
    return intervals[0].end_step, intervals[-1].end_step


def common_window(spans: Sequence[Tuple[int, int]]
                  ) -> Optional[Tuple[int, int]]:
    """The steps every span covers, ``(latest start, earliest end)``; None
    when there are no spans or they share no step."""
    if not spans:
        return None
    start = max(first for first, _ in spans)
    end = min(last for _, last in spans)
    return (start, end) if start < end else None


def covers_dlperf_window(intervals: Sequence[Interval]) -> bool:
    """Whether the extractor's defaults count this run: an interval ends by
    step 100 (so one starts at or after it) and the run reaches step 600."""
    if not intervals:
        return False
    start, end = DLPERF_WINDOW
    return intervals[0].end_step <= start and intervals[-1].end_step >= end


def counted_alone(intervals: Sequence[IntervalT]
                  ) -> Tuple[List[IntervalT], bool]:
    """(the intervals the extractor would count of this run alone, whether
    in DLPerf's window): DLPerf's window when the run covers it, else every
    interval after the first."""
    if covers_dlperf_window(intervals):
        return in_window(intervals, *DLPERF_WINDOW), True
    return list(intervals[1:]), False


def after_first(intervals: Sequence[IntervalT],
                warmup_intervals: int) -> List[IntervalT]:
    """The intervals after the first ``warmup_intervals`` (the A/B
    runner's rule)."""
    return list(intervals[warmup_intervals:])


def trainer_counted(intervals: Sequence[IntervalT], warmup_steps: int,
                    excluded_steps: Optional[Sequence[int]] = None
                    ) -> List[IntervalT]:
    """The intervals the trainer's mean counts: those starting
    ``warmup_steps`` or more steps after the run's first step (the first
    interval's start: 0, or the checkpoint's step in a resumed run, whose
    first interval holds the tracing too) that do not touch
    ``excluded_steps`` (first, last: the profiled steps); every untouched
    interval when the run was too short to leave the warm-up out."""
    lo, hi = excluded_steps or (0, -1)
    start = warmup_start(intervals, warmup_steps)
    used = [iv for iv in intervals if iv.end_step < lo or iv.start_step >= hi]
    after = [iv for iv in used if iv.start_step >= start]
    return after if after else used


def warmup_start(intervals: Sequence[Interval], warmup_steps: int) -> int:
    """The first step the trainer counts: ``warmup_steps`` after the run's
    first step, which its first interval starts at (a resumed run's
    intervals carry the checkpoint's step numbers)."""
    return (intervals[0].start_step if intervals else 0) + warmup_steps


def recorded_counted(stats: Mapping[str, Any],
                     intervals: Sequence[IntervalT]) -> List[IntervalT]:
    """trainer_counted with the settings a result.json's ``stats`` object
    recorded (``warmup_steps``, ``excluded_steps``)."""
    return trainer_counted(intervals, stats.get("warmup_steps") or 0,
                           stats.get("excluded_steps"))
