"""Per-interval throughput of each counted run, for the plot and the HTML
report.

A run's speed is one number; warm-up, jitter and a slow node show only in its
TimeHistory intervals. This module reads them again for the runs that took
part in the statistics, from the same source their speed came from (the result
JSON's unrounded intervals or the log lines, ``RunOutcome.source``), so the
plot shows what was measured. Reading them again here, rather than carrying
every interval on each outcome, keeps the measuring code free of plotting data;
the files are small and were just read.

Every interval is kept, warm-up included: showing the warm-up is the point.
Each point says whether it was counted (inside the run's counted steps,
``RunOutcome.counted_steps``), so the plot can draw the warm-up apart from
the points the speed was computed from.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Dict, Iterable, List, Optional

from official_bench.contracts import log_tree, result_json
from official_bench.contracts.throughput import ReadInterval
from official_bench.extract import cases, logparse
from official_bench.extract.speeds import RunOutcome


@dataclasses.dataclass
class RunSeries:
    """One run's intervals: examples/second (all workers) against end step."""

    case: str
    log_name: str
    index: int
    speed: float  # the run's measured speed, unrounded
    end_steps: List[int]
    examples_per_second: List[float]
    hostname: Optional[str] = None  # from the run's result JSON, when present
    median: bool = False  # the run whose speed is the case's (lower) median
    # per point: inside the counted window (else warm-up or after the window)
    counted: List[bool] = dataclasses.field(default_factory=list)


def _intervals(outcome: RunOutcome) -> List[ReadInterval]:
    """The run's intervals from the source its speed was computed from.

    A file that cannot be read any more gives no points rather than an error:
    the numbers are already computed, only the picture loses a line.
    """
    if outcome.source == "result_json":
        run_json, _ = result_json.load_run_json(
            log_tree.json_path(outcome.log_path))
        if run_json is not None and run_json.intervals:
            return run_json.intervals
    try:
        return logparse.parse_log_file(outcome.log_path).intervals
    except OSError:
        return []


def _series(outcome: RunOutcome) -> RunSeries:
    """RunSeries of one counted run, intervals in step order."""
    intervals = sorted(_intervals(outcome), key=lambda iv: iv.end_step)
    env = outcome.environment or {}
    first, last = outcome.counted_steps or (0, -1)
    return RunSeries(outcome.run.case, outcome.run.log_name, outcome.run.index,
                     outcome.speed, [iv.end_step for iv in intervals],
                     [iv.examples_per_second for iv in intervals],
                     env.get("hostname"),
                     counted=[first <= iv.start_step and iv.end_step <= last
                              for iv in intervals])


def _mark_median(runs: List[RunSeries]) -> None:
    """Flag the run whose speed is the lower median of the case's runs.

    With an even number of runs DLPerf's median lies between two runs; the
    lower one is drawn so that a single real run stands for the case.
    """
    if not runs:
        return
    middle = statistics.median_low([r.speed for r in runs])
    next(r for r in runs if r.speed == middle).median = True


def collect(outcomes: Iterable[RunOutcome]
            ) -> Dict[str, Dict[str, List[RunSeries]]]:
    """``{model_key: {case: [RunSeries]}}`` for the counted runs of
    ``outcomes``.

    Model keys are the result's (``rn50``, ``rn50_fp16``, ...), so a series
    can be matched to its table section; runs are in index order.
    """
    keys = cases.model_keys({cases.group_key(o.run) for o in outcomes})
    out: Dict[str, Dict[str, List[RunSeries]]] = {}
    for o in sorted(outcomes, key=lambda o: o.run.index):
        if not o.ok:
            continue
        model_key = keys[cases.group_key(o.run)]
        out.setdefault(model_key, {}).setdefault(o.run.case, []).append(
            _series(o))
    for model in out.values():
        for runs in model.values():
            _mark_median(runs)
    return out
