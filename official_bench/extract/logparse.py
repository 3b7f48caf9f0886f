"""Reading benchmark logs: finding them and the throughput lines in them.

The run scripts write one log per run at
``{log_dir}/{N}n{G}g/rn50_b{B}_{dtype}_{i}.log`` (N nodes, G devices per node,
B images per device, dtype fp32/fp16/bf16, i the run index; the names are
built and parsed by :mod:`official_bench.contracts.log_tree`), and the trainer
writes, through absl logging, one line per ``log_steps`` interval::

    I1121 23:59:40.123456 140234 callbacks.py:88] TimeHistory: 12.34 seconds, \
256.00 examples/second between steps 0 and 100

This module turns a log into facts only (intervals with their clock time,
malformed throughput lines, whether the run finished or crashed); deciding what
a run's speed is belongs to :mod:`official_bench.extract.speeds`.

Clock times. absl prints month/day and local time but no year, so each
TimeHistory line's time is turned into seconds on a running calendar: year
2000 at the start; when a reading is more than 12 hours earlier than the
previous one the log crossed a boundary -- the next year if the month/day went
backward (Dec 31 -> Jan 1), otherwise one more day (a clock showing only the
time of day, crossing midnight). Smaller backward steps (a DST change, NTP) are
left alone so that a run measured across them is caught as suspicious instead
of being silently stretched by a day. Lines starting with a full
``YYYY-MM-DD HH:MM:SS`` date or a bare ``HH:MM:SS`` are understood too.
"""

from __future__ import annotations

import dataclasses
import datetime
import glob
import math
import os
import re
from typing import Dict, Iterable, List, Optional, Tuple, Union

from official_bench.contracts import dtypes, log_tree, throughput
from official_bench.contracts.throughput import ReadInterval

DTYPES = dtypes.SHORT_NAMES
FINISH_MARKER = throughput.FINISH_MARK
TRACEBACK_MARKER = "Traceback (most recent call last)"
THROUGHPUT_MARKER = throughput.THROUGHPUT_MARK

_THROUGHPUT_RE = throughput.LINE_RE
_STEPS_RE = re.compile(r"between steps (\d+) and (\d+)")
# absl: "I1121 23:59:40.123456 140234 callbacks.py:88]"; searched anywhere in
# the line because launchers prefix it ("[1,0]<stderr>:") and Keras progress
# bars without a newline can precede it.
_ABSL_TIME_RE = re.compile(
    r"[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) +\d+ [^\s\]]+:\d+\]")
_ISO_TIME_RE = re.compile(
    r"^\s*(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?")
_BARE_TIME_RE = re.compile(r"^\s*(\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?\b")
_EXCEPTION_RE = re.compile(r"^[A-Za-z_][\w.]*(: |$)")
_DAY = 86400.0
# Larger step numbers are no real run's, and would overflow a float.
_MAX_STEP = 2 ** 63 - 1
_WRAP_THRESHOLD = 12 * 3600.0
# Day numbers count from here, so that clock seconds stay below ~1e9 and a
# float keeps them to better than a microsecond (from year 1 they would be
# ~6e10 s, where doubles are only 8 microseconds apart).
_EPOCH_DAY = datetime.date(2000, 1, 1).toordinal()


@dataclasses.dataclass(frozen=True)
class RunId:
    """Who a log belongs to, as encoded in its directory and file name."""

    num_nodes: int
    gpus_per_node: int
    batch_size: int  # per device
    dtype: str
    index: int

    @property
    def case(self) -> str:
        """The run case key used in result files, e.g. ``"2n8g"``."""
        return log_tree.case_name(self.num_nodes, self.gpus_per_node)

    @property
    def num_devices(self) -> int:
        """Devices (replicas) taking part: nodes times devices per node."""
        return self.num_nodes * self.gpus_per_node

    @property
    def log_name(self) -> str:
        """The log's file name, e.g. ``rn50_b128_fp32_1.log``."""
        return log_tree.log_name(self.batch_size, self.dtype, self.index)


@dataclasses.dataclass(frozen=True)
class MalformedLine:
    """A line that claims to be a TimeHistory line but does not parse."""

    line_no: int
    text: str
    problem: str
    # (start, end) when at least those could be read
    steps: Optional[Tuple[int, int]] = None

    def describe(self) -> str:
        """One-line description for warnings and exclusion reasons."""
        shown = self.text.strip()[:160]
        return f"line {self.line_no}: {self.problem} ({shown!r})"


@dataclasses.dataclass
class ParsedLog:
    """Everything the extractor needs from one log file."""

    path: str
    intervals: List[ReadInterval]
    malformed: List[MalformedLine]
    finished: bool
    traceback_line: Optional[int] = None  # first "Traceback" line, 1-based
    # the exception line that ended the traceback
    exception: Optional[str] = None
    num_lines: int = 0


def trees_below(path: str, limit: int = 5) -> List[str]:
    """The log trees (folders whose {N}n{G}g/ subfolders hold run logs)
    at any depth below ``path``, at most ``limit``, for the hint of a
    command given a LOG_DIR root (LOG_DIR/<backend>/resnet50/bz<B>)."""
    trees = set()
    for log in glob.iglob(os.path.join(glob.escape(path), "**", "*",
                                       "rn50_b*.log"), recursive=True):
        case_dir = os.path.dirname(log)
        if log_tree.parse_case_name(os.path.basename(case_dir)) and \
                log_tree.parse_log_name(os.path.basename(log)):
            trees.add(os.path.dirname(case_dir))
    return sorted(trees)[:limit]


def case_folder_hint(path: str) -> str:
    """'; 1n1g is a case folder of the log tree P (give P)' when ``path``
    is a {N}n{G}g folder holding run logs, else ''."""
    folder = os.path.normpath(path)
    case = os.path.basename(folder)
    if not log_tree.parse_case_name(case) or not any(
            log_tree.parse_log_name(os.path.basename(log)) for log in
            glob.iglob(os.path.join(glob.escape(folder), "rn50_b*.log"))):
        return ""
    parent = os.path.dirname(folder) or os.curdir
    return (f"; {case} is a case folder of the log tree {parent} "
            f"(give {parent})")


def below_hint(path: str) -> str:
    """'; the log trees below it: A, B (give one of them)', the case
    folder's hint for a {N}n{G}g folder given instead of its tree, or ''."""
    trees = trees_below(path)
    if not trees:
        return case_folder_hint(path)
    return f"; the log trees below it: {', '.join(trees)} (give one of them)"


def find_logs(log_dir: str) -> Tuple[List[Tuple[RunId, str]],
                                    List[Tuple[str, str]]]:
    """List the runs under ``log_dir`` as in ``{log_dir}/*/*.log``.

    Returns ``(runs, skipped)``: ``runs`` is a list of ``(RunId, path)``
    sorted by case and run; ``skipped`` lists ``(path, reason)`` for ``.log``
    files whose directory or name does not follow the layout, so that they are
    reported rather than ignored silently.
    """
    runs: List[Tuple[RunId, str]] = []
    skipped: List[Tuple[str, str]] = []
    for path in sorted(glob.glob(
            os.path.join(glob.escape(log_dir), "*", "*.log"))):
        case_dir = os.path.basename(os.path.dirname(path))
        case = log_tree.parse_case_name(case_dir)
        name = log_tree.parse_log_name(os.path.basename(path))
        if case is None:
            skipped.append((path, f"directory {case_dir!r} is not named "
                                  "{N}n{G}g (e.g. 1n8g)"))
        elif name is None:
            skipped.append((path, "file name is not rn50_b{B}_{"
                                  + "|".join(DTYPES) + "}_{i}.log"))
        else:
            runs.append((RunId(case[0], case[1], *name), path))
    runs.sort(key=lambda r: (r[0].dtype, r[0].batch_size, r[0].num_devices,
                             r[0].num_nodes, r[0].index))
    return runs, skipped


class _Clock:
    """Turns successive clock readings of one format into increasing seconds.

    See the module docstring for the rule; one instance per log and format.
    """

    def __init__(self):
        self.year = 2000  # a leap year, so that Feb 29 readings parse
        self.offset = 0.0
        self.prev: Optional[float] = None
        self.prev_date: Optional[Tuple[int, int]] = None

    def seconds(self, month_day: Optional[Tuple[int, int]],
                time_of_day: float) -> Optional[float]:
        """Seconds for a reading; ``month_day`` is None for time-only
        clocks."""
        value = self._raw(month_day, time_of_day)
        if value is None:
            return None
        if self.prev is not None and value < self.prev - _WRAP_THRESHOLD:
            if month_day is not None and month_day < self.prev_date:
                self.year += 1
                value = self._raw(month_day, time_of_day)
            while value is not None and value < self.prev - _WRAP_THRESHOLD:
                self.offset += _DAY
                value += _DAY
        if value is not None:
            self.prev, self.prev_date = value, month_day
        return value

    def _raw(self, month_day: Optional[Tuple[int, int]],
             time_of_day: float) -> Optional[float]:
        """Seconds before wrap handling; None for impossible dates."""
        days = 0
        if month_day is not None:
            try:
                days = datetime.date(self.year, *month_day).toordinal() \
                    - _EPOCH_DAY
            except ValueError:
                return None
        return days * _DAY + time_of_day + self.offset


def _fraction(digits: Optional[str]) -> float:
    """``"123"`` from ``"12:00:00.123"`` -> 0.123 seconds."""
    return int(digits) / 10 ** len(digits) if digits else 0.0


def _timestamp(line: str, end: int, clocks: Dict[str, _Clock]
               ) -> Tuple[Optional[float], Optional[str]]:
    """Clock time of ``line`` (searching before index ``end``) as (seconds,
    kind).

    Returns ``(None, None)`` when the line carries no recognised timestamp.
    """
    absl = [m for m in _ABSL_TIME_RE.finditer(line, 0, end)]
    if absl:
        g = absl[-1].groups()
        tod = int(g[2]) * 3600 + int(g[3]) * 60 + int(g[4]) + int(g[5]) / 1e6
        clock = clocks.setdefault("absl", _Clock())
        return clock.seconds((int(g[0]), int(g[1])), tod), "absl"
    m = _ISO_TIME_RE.match(line)
    if m:
        g = m.groups()
        try:
            day = datetime.date(int(g[0]), int(g[1]), int(g[2])).toordinal() \
                - _EPOCH_DAY
        except ValueError:
            return None, None
        tod = int(g[3]) * 3600 + int(g[4]) * 60 + int(g[5]) + _fraction(g[6])
        return day * _DAY + tod, "iso"  # full dates never need wrapping
    m = _BARE_TIME_RE.match(line)
    if m:
        g = m.groups()
        tod = int(g[0]) * 3600 + int(g[1]) * 60 + int(g[2]) + _fraction(g[3])
        return clocks.setdefault("time", _Clock()).seconds(None, tod), "time"
    return None, None


def _number(text: str, what: str, integer: bool = False
            ) -> Tuple[Optional[Union[int, float]], Optional[str]]:
    """Parse a number of a TimeHistory line; returns (value, problem)."""
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        return None, f"{what} {text!r} is not a number"
    if integer and value > _MAX_STEP:
        return None, f"{what} {text!r} is too large"
    if not math.isfinite(value) or math.copysign(1, value) < 0:  # -0.0 too
        return None, f"{what} {text!r} is not a finite non-negative number"
    return value, None


def parse_throughput_line(line: str, line_no: int = 0,
                          clocks: Optional[Dict[str, _Clock]] = None
                          ) -> Union[ReadInterval, MalformedLine]:
    """Parse a line containing ``TimeHistory:``.

    Returns a :class:`ReadInterval` or a :class:`MalformedLine` saying what is
    wrong (numbers that do not parse, steps that do not increase, text that
    does not follow the contract's format).
    """
    clocks = {} if clocks is None else clocks
    pos = line.find(THROUGHPUT_MARKER)
    m = _THROUGHPUT_RE.search(line, pos if pos >= 0 else 0)
    steps_m = _STEPS_RE.search(line)
    steps = (int(steps_m.group(1)), int(steps_m.group(2))) if steps_m else None
    if not m:
        return MalformedLine(line_no, line, "not in the format 'TimeHistory: "
                             "{s} seconds, {x} examples/second between steps "
                             "{a} and {b}'", steps)
    seconds, p1 = _number(m.group("seconds"), "seconds")
    eps, p2 = _number(m.group("eps"), "examples/second")
    start, p3 = _number(m.group("start"), "start step", integer=True)
    end, p4 = _number(m.group("end"), "end step", integer=True)
    problem = p1 or p2 or p3 or p4
    if problem is None and end <= start:
        problem = f"end step {end} is not after start step {start}"
    if problem:
        return MalformedLine(line_no, line, problem, steps)
    ts, kind = _timestamp(line, pos, clocks)
    return ReadInterval(start, end, seconds, eps, line_no, ts, kind)


def _exception_after(lines: List[str], tb_index: int) -> Optional[str]:
    """The exception line of the last traceback at or after ``tb_index``.

    Python prints ``Traceback ...``, indented frames, then an unindented
    ``Type: message`` line; with chained exceptions the last traceback names
    the exception that ended the program. None when the log stops before it.
    """
    last_tb = max(i for i in range(tb_index, len(lines))
                  if TRACEBACK_MARKER in lines[i])
    for line in lines[last_tb + 1:]:
        text = line.rstrip("\r\n")
        if text and not text[0].isspace() and _EXCEPTION_RE.match(text):
            return text.strip()
    return None


def parse_log_lines(lines: Iterable[str], path: str = "<log>") -> ParsedLog:
    """Parse the lines of a log (an iterable of str) into a
    :class:`ParsedLog`."""
    lines = list(lines)
    intervals: List[ReadInterval] = []
    malformed: List[MalformedLine] = []
    finished = False
    tb_line: Optional[int] = None
    clocks: Dict[str, _Clock] = {}
    for i, line in enumerate(lines):
        if THROUGHPUT_MARKER in line:
            item = parse_throughput_line(line, i + 1, clocks)
            (intervals if isinstance(item, ReadInterval)
             else malformed).append(item)
        if FINISH_MARKER in line:
            finished = True
        if tb_line is None and TRACEBACK_MARKER in line:
            tb_line = i + 1
    exception = _exception_after(lines, tb_line - 1) if tb_line else None
    return ParsedLog(path, intervals, malformed, finished, tb_line, exception,
                     len(lines))


def parse_log_file(path: str) -> ParsedLog:
    """Read and parse one log file.

    Undecodable bytes (a log cut in the middle of a character, binary noise)
    are replaced rather than failing the whole extraction.
    """
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse_log_lines(f.read().split("\n"), path)
