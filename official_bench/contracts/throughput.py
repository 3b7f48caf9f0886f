"""The trainer's log-line contract: the TimeHistory line and the marks.

The TimeHistory line is read by DLPerf's tooling as well as by our own
extractor, so its text must not change by a byte:

    TimeHistory: {seconds:.2f} seconds, {examples_per_second:.2f} examples/second between steps {a} and {b}

DLPerf keeps lines containing "TimeHistory" and takes the rate with
`, (\\d+.\\d+) examples/second ` (DLPERF_RATE_RE). examples/second counts
the GLOBAL batch (all workers and replicas). The run-finished mark ends a
completed run's log; the timeout mark starts the line a task prints when
its peers did not come up in time (the launcher looks for it), and a JAX
process's join line names the coordinator the launcher blames when JAX
aborts the process (launch/outcome.py).
"""  # noqa: E501

from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Optional

LINE_FORMAT = ("TimeHistory: {seconds:.2f} seconds, {examples_per_second:.2f}"
               " examples/second between steps {start} and {end}")
# Our extractor finds lines by this mark; DLPerf's by DLPERF_KEYWORD.
THROUGHPUT_MARK = "TimeHistory:"
DLPERF_KEYWORD = "TimeHistory"
DLPERF_RATE_RE = re.compile(r", (\d+.\d+) examples/second ")
# Lenient on purpose: each field is taken as written, so that a malformed
# number can be reported by name instead of the line going unnoticed.
LINE_RE = re.compile(
    r"TimeHistory: (?P<seconds>\S+) seconds, (?P<eps>\S+) examples/second "
    r"between steps (?P<start>\S+) and (?P<end>\S+?)\s*$")
FINISH_MARK = "official_bench: run finished"
TIMEOUT_MARK = "official_bench: timeout:"
# A task still waiting for its peers to start (every 30 s): the launcher
# shows these lines on node 0's console (launch/progress.py).
PEER_WAIT_RE = re.compile(r"official_bench: (?P<text>\S+ \d+ waiting for "
                          r"peers \(\d+ s left\); not reachable yet: .*)$")
# A JAX process meeting the others at worker 0's host:port (jax.distributed's
# coordinator): jax_join_message writes it, the launcher reads it back.
JAX_JOIN_RE = re.compile(r"official_bench: (?P<me>\S+ \d+) joins \d+ "
                         r"process\(es\) at (?P<coordinator>\S+) "
                         r"\(jax\.distributed\)")


@dataclasses.dataclass(frozen=True)
class Interval:
    """One TimeHistory interval, as the trainer logs it.

    ReadInterval extends it with where and when the extractor read it.
    """
    start_step: int
    end_step: int
    seconds: float
    examples_per_second: float


@dataclasses.dataclass(frozen=True)
class ReadInterval(Interval):
    """One TimeHistory interval: ``examples_per_second`` counts all workers.

    The trainer's fields, and where the extractor read them: ``timestamp``
    is seconds on extract/logparse.py's running calendar (only differences
    between lines of one log mean anything); ``clock`` names the timestamp
    format so that differences are only taken within one format.
    """

    line_no: int = 0
    timestamp: Optional[float] = None
    clock: Optional[str] = None


def format_eta(seconds: float) -> str:
    """2h05m, 2m10s or 42s: the trainer's and the launcher's progress
    lines."""
    seconds = max(0, int(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


# result.json's stats key and the summary line's name for images / time.
OVER_WINDOW_KEY = "images_per_second_over_window"


def images_per_second_over_window(intervals: Iterable[Interval]
                                  ) -> Optional[float]:
    """Images trained over the counted window / its wall time.

    ``average_examples_per_second`` is the arithmetic mean of the interval
    rates (DLPerf's convention); this is images / time over the same
    intervals, their time-weighted (for equal intervals harmonic) mean,
    never larger. None when the window holds no time.
    """
    items = list(intervals)
    seconds = sum(i.seconds for i in items)
    if seconds <= 0:
        return None
    return sum(i.examples_per_second * i.seconds for i in items) / seconds


def format_line(interval: Interval) -> str:
    """The TimeHistory line for an interval (without the log prefix)."""
    return LINE_FORMAT.format(seconds=interval.seconds,
                              examples_per_second=interval.examples_per_second,
                              start=interval.start_step,
                              end=interval.end_step)


def peer_wait_message(me: str, left: float,
                      not_reachable: Iterable[str]) -> str:
    """The line a task prints every 30 s while it waits for its peers
    (PEER_WAIT_RE reads it back)."""
    return (f"official_bench: {me} waiting for peers ({left:.0f} s left); "
            f"not reachable yet: {'; '.join(not_reachable) or 'none'}")


def jax_join_message(me: str, processes: int, coordinator: str) -> str:
    """A JAX process's line as it joins the others (JAX_JOIN_RE)."""
    return (f"official_bench: {me} joins {processes} process(es) at "
            f"{coordinator} (jax.distributed)")


def timeout_message(me: str, waited: float, not_reachable: Iterable[str],
                    waiting_for: str = "") -> str:
    """The one line a task prints when its peers did not come up within
    runtime.peer_timeout_seconds; waiting_for says for what (" for the
    cluster"), not_reachable names each missing peer ("worker 1 at h:1")."""
    return (f"{TIMEOUT_MARK} {me} waited {waited:.0f} s "
            f"(runtime.peer_timeout_seconds){waiting_for}; not reachable: "
            + "; ".join(not_reachable))
