"""The trainer's stage lines: what a run is doing before its first step.

Loading TensorFlow, building the model, compiling the first step can take
tens of seconds with no TimeHistory line; the trainer says each stage as it
starts, while it lasts (a heartbeat every few seconds) and when it is done:

    official_bench: stage: building the model ...
    official_bench: stage: compiling the first step, 20 s so far
    official_bench: stage: building the model: done in 3.1 s

The stage "training steps 1-30" spans the steps (`training`), so that a
reader that does not know the run's length learns it (`last_step`).
The launcher's progress reader (launch/progress.py) and the A/B runner show
them as "[1n1g run 1/1] building the model ..." with `console_text`. None of
these lines can be mistaken for a TimeHistory line (contracts/throughput.py).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

STAGE_MARK = "official_bench: stage:"
START, RUNNING, DONE = "start", "running", "done"
_TRAINING_RE = re.compile(r"^training steps (\d+)-(\d+)$")
_LINE_RE = re.compile(
    re.escape(STAGE_MARK) + r" (?P<what>.+?)(?: \.\.\.|, (?P<so_far>\d+) s "
    r"so far|: done in (?P<done>\d+(?:\.\d+)?) s)\s*$")


@dataclasses.dataclass(frozen=True)
class StageLine:
    """One stage line: what the stage is, its state and seconds so far."""
    what: str
    state: str  # START, RUNNING or DONE
    seconds: Optional[float] = None


def format_line(line: StageLine) -> str:
    """The log line for a stage (without the logger's prefix)."""
    if line.state == START:
        return f"{STAGE_MARK} {line.what} ..."
    if line.state == RUNNING:
        return f"{STAGE_MARK} {line.what}, {line.seconds:.0f} s so far"
    return f"{STAGE_MARK} {line.what}: done in {line.seconds:.1f} s"


def parse_line(text: str) -> Optional[StageLine]:
    """The stage line a log line holds (after any prefix), or None."""
    m = _LINE_RE.search(text)
    if not m:
        return None
    if m.group("so_far") is not None:
        return StageLine(m.group("what"), RUNNING, float(m.group("so_far")))
    if m.group("done") is not None:
        return StageLine(m.group("what"), DONE, float(m.group("done")))
    return StageLine(m.group("what"), START)


def training(first_step: int, last_step: int) -> str:
    """The training stage's name: 'training steps 1-30'."""
    return f"training steps {first_step}-{last_step}"


def last_step(line: StageLine) -> Optional[int]:
    """The last step of a training stage line; None for other stages."""
    m = _TRAINING_RE.match(line.what)
    return int(m.group(2)) if m else None


def console_text(line: StageLine) -> str:
    """How a launcher shows it: 'compiling the first step, 20 s'."""
    if line.state == START:
        return f"{line.what} ..."
    if line.state == RUNNING:
        return f"{line.what}, {line.seconds:.0f} s"
    return f"{line.what}: {line.seconds:.1f} s"
