"""What a run is doing, on the launcher's terminal, read from its log.

The trainer writes into the run's log file (not through the launcher), so
the launcher follows that file while the run trains: every TimeHistory line
(read with contracts/throughput.py's LINE_RE, the extractor's contract)
becomes one console line such as

    [1n1g run 1/5] step 40/600, 312.4 img/s, ETA 2m10s

at most one every MIN_SECONDS (the last one is always shown), and every
stage line the trainer says before its first step (contracts/stage_line.py)
as "[1n1g run 1/5] building the model ..."; none with QUIET=1. The ETA
uses the latest interval's seconds per step, and none is given while only
the first (warm-up, compiling) interval is in. When the run ends, `RunRate`
gives its measured img/s: the median of its counted intervals, and the
extractor window that counts them. The A/B runner feeds the same reader
the lines of its runs' output (`RunProgress.feed`).

Counted intervals, as the extractor counts them (contracts/counting.py,
the rule's one home): those inside DLPerf's window [100, 600] when the run
covers it, else those after the run's first (warm-up) interval, which is
the window the extractor's own hint proposes (extractor.window_hint).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from typing import Callable, List, Optional, Tuple

from official_bench.contracts import stage_line
from official_bench.contracts.counting import (
    common_window,
    counted_alone,
    covers_dlperf_window,
    steps_covered,
)
from official_bench.contracts.throughput import (
    LINE_RE,
    PEER_WAIT_RE,
    Interval,
    format_eta,
)

MIN_SECONDS = 5.0


def parse_interval(line: str) -> Optional[Interval]:
    """The TimeHistory interval a log line holds, or None (also for a
    malformed one: the extractor reports those, the console need not)."""
    m = LINE_RE.search(line)
    if not m:
        return None
    try:
        return Interval(int(m.group("start")), int(m.group("end")),
                        float(m.group("seconds")), float(m.group("eps")))
    except ValueError:
        return None


@dataclasses.dataclass(frozen=True)
class RunRate:
    """A finished run's measured img/s and how it was taken."""
    images_per_second: float
    intervals: int  # counted intervals
    window: Tuple[int, int]  # steps they span (first start, last end)
    dlperf: bool  # True: DLPerf's window; False: after the first interval

    def describe(self) -> str:
        """'1075.3 img/s (median of 5 intervals, steps 100-600)'."""
        how = "" if self.dlperf else " after the first"
        return (f"{self.images_per_second:.1f} img/s (median of "
                f"{self.intervals} "
                f"interval{'s' if self.intervals != 1 else ''}"
                f"{how}, steps {self.window[0]}-{self.window[1]})")


def run_rate(intervals: List[Interval]) -> Optional[RunRate]:
    """The run's img/s (median of its counted intervals); None when it has
    no interval after the warm-up one."""
    chosen, dlperf = counted_alone(intervals)
    if not chosen:
        return None
    return RunRate(statistics.median(iv.examples_per_second for iv in chosen),
                   len(chosen), (chosen[0].start_step, chosen[-1].end_step),
                   dlperf)


def extractor_window(runs: List[List[Interval]]) -> Optional[Tuple[int, int]]:
    """The --warmup_batches / --train_batches the runs need, or None when
    DLPerf's defaults count every run. As the extractor's hint: from the
    latest end of a first interval to the earliest last step; (0, 0) when
    the runs share no window after their warm-up."""
    if all(covers_dlperf_window(r) for r in runs):
        return None
    return common_window([steps_covered(r) for r in runs if r]) or (0, 0)


def read_intervals(path: str) -> List[Interval]:
    """Every TimeHistory interval of a finished run's log (RESUME=1 reads
    a kept run's rate back); [] when it cannot be read."""
    follower = LogFollower(path)
    lines = follower.new_lines() + [follower.partial]
    return [iv for iv in map(parse_interval, lines) if iv is not None]


class LogFollower:
    """Reads the lines a growing log gained since the last call (a partial
    last line waits for its end)."""

    def __init__(self, path: str):
        self.path = path
        self.offset = 0
        self.partial = ""

    def new_lines(self) -> List[str]:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                f.seek(self.offset)
                text = f.read()
                self.offset = f.tell()
        except OSError:
            return []
        text = self.partial + text
        lines = text.split("\n")
        self.partial = lines.pop()
        return lines


class RunProgress:
    """Follows one run's log (or is fed its output's lines): a console line
    per TimeHistory interval, rate-limited, one per stage line, and the
    run's intervals for its rate."""

    def __init__(self, log_path: Optional[str], label: str,
                 total_steps: Optional[int],
                 quiet: bool, out: Callable[[str], None],
                 min_seconds: float = MIN_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.follower = LogFollower(log_path) if log_path else None
        self.label = label  # "1n1g run 1/5"
        self.total = total_steps
        self.quiet = quiet
        self.out = out
        self.min_seconds = min_seconds
        self.clock = clock
        self.intervals: List[Interval] = []
        self.shown = 0  # intervals already on the console
        self.last_shown: Optional[float] = None

    def poll(self) -> None:
        """Read what the log gained and show it (``feed``)."""
        self.feed(self.follower.new_lines() if self.follower else [])

    def feed(self, lines: List[str]) -> None:
        """Show each stage line; show the newest interval unless one was
        shown less than min_seconds ago."""
        for line in lines:
            interval = parse_interval(line)
            if interval is not None:
                self.intervals.append(interval)
                continue
            if self._peer_wait(line):
                continue
            stage = stage_line.parse_line(line)
            if stage is None:
                continue
            # a fed run's length comes from its training stage
            self.total = self.total or stage_line.last_step(stage)
            if len(self.intervals) > self.shown:  # held back: say it first
                self._show(self.clock())
            if not self.quiet:
                self.out(f"[{self.label}] {stage_line.console_text(stage)}")
        now = self.clock()
        if len(self.intervals) > self.shown and (
                self.last_shown is None or
                now - self.last_shown >= self.min_seconds):
            self._show(now)

    def _peer_wait(self, line: str) -> bool:
        """Shows a task's wait for its peers (a line every 30 s), which no
        stage line says (the run's FAILED line gives the timeout that ends
        it); whether the line was one."""
        m = PEER_WAIT_RE.search(line)
        if m is None:
            return False
        if not self.quiet:
            self.out(f"[{self.label}] {m.group('text').strip()}")
        return True

    def finish(self) -> Optional[RunRate]:
        """The run ended: read the rest, show the last interval if it was
        held back, and give the run's rate."""
        self.poll()
        if self.follower and os.path.exists(self.follower.path) and \
                self.follower.partial:
            interval = parse_interval(self.follower.partial)
            if interval is not None:
                self.intervals.append(interval)
            self.follower.partial = ""
        if len(self.intervals) > self.shown:
            self._show(self.clock())
        return run_rate(self.intervals)

    def _show(self, now: float) -> None:
        self.shown = len(self.intervals)
        self.last_shown = now
        if not self.quiet:
            self.out(f"[{self.label}] {self.line()}")

    def line(self) -> str:
        """'step 40/600, 312.4 img/s, ETA 2m10s' for the newest interval
        (ETA: ``eta_seconds``)."""
        last = self.intervals[-1]
        step = f"step {last.end_step}" + (f"/{self.total}" if self.total
                                          else "")
        text = f"{step}, {last.examples_per_second:.1f} img/s"
        left = eta_seconds(self.intervals, self.total)
        if left is not None:
            text += f", ETA {format_eta(left)}"
        return text


def eta_seconds(intervals: List[Interval], total: Optional[int]
                ) -> Optional[float]:
    """Seconds left at the latest interval's seconds per step; None with
    no total, when done, or while only the first interval is in: it holds
    the trace and compile of the first step, which no later step repeats
    (issue 40: an ETA of 30 s from it with 13 s left)."""
    if not total or len(intervals) < 2:
        return None
    last = intervals[-1]
    steps = last.end_step - last.start_step
    if steps <= 0 or last.end_step >= total:
        return None
    return (total - last.end_step) * last.seconds / steps
