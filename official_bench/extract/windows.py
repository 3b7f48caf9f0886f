"""``--window auto``: which steps to count when the runs are shorter than
DLPerf's window (100-600), e.g. a CPU try of 60 steps.

The window is the longest one every run covers once its first interval is
left out: that interval holds the graph tracing and autotuning (warm-up),
which no speed should include. From each run, the end of its first interval
to the end of its last (contracts/counting.steps_covered); over the runs,
the latest start and the earliest end (counting.common_window, which the
extractor's hint for a default window no run reaches uses too). DLPerf's
defaults apply unless this is asked for.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from official_bench.contracts import run_status
from official_bench.contracts.counting import common_window, steps_covered
from official_bench.extract import logparse
from official_bench.extract.errors import ExtractError
from official_bench.extract.logparse import RunId

AUTO = "auto"  # the flag's value


def flag_conflict(window: Optional[str], warmup: Optional[int],
                  train: Optional[int]) -> Optional[str]:
    """The usage error of --window given with the window's own flags (the
    extractor's and the comparison's), or None."""
    if window and (warmup is not None or train is not None):
        return (f"--window {window} chooses --warmup_batches and "
                "--train_batches; give one or the other")
    return None


def auto_window(runs: Sequence[Tuple[RunId, str]]) -> Tuple[int, int]:
    """``--window auto``: the longest window every run covers after its
    first (warm-up) interval, as ``(warmup_batches, train_batches)``.

    Runs that cannot count anyway (unreadable, failed for the launcher,
    crashed with a traceback before the finish line) do not shorten it;
    they are excluded later with their reason. DLPerf's defaults are never
    changed by this: it applies only when asked for.
    """
    spans = []
    for _, path in runs:
        try:
            parsed = logparse.parse_log_file(path)
        except OSError:
            continue
        failed = run_status.exclusion(run_status.load_status(path)[0])
        if failed or (parsed.traceback_line and not parsed.finished):
            continue
        span = steps_covered(parsed.intervals)
        if span:
            spans.append(span)
    window = common_window(spans)
    if window is None:
        raise ExtractError(
            "--window auto: the runs share no steps after their first "
            "(warm-up) interval (steps covered: " + (", ".join(
                f"{a}-{b}" for a, b in spans) or "none") + "); give "
            "--warmup_batches and --train_batches")
    return window
