"""A stage's lines: start, heartbeats while it lasts (from a thread that
stops with it), done with its seconds; no done line after an error; the
stage an error was raised in."""

import threading
import time

import pytest

from official_bench.contracts import stage_line as sl
from official_bench.measure.stages import Stage, stage_of


def _read(lines):
    return [sl.parse_line(x) for x in lines]


def test_heartbeats_while_it_lasts_then_done_and_the_thread_stops():
    lines = []
    stage = Stage("compiling the first step", heartbeat=0.05,
                  log=lines.append)
    stage.start()
    deadline = time.monotonic() + 30
    while sum(x.startswith(sl.STAGE_MARK) for x in lines) < 3 and \
            time.monotonic() < deadline:  # a loaded machine may be slow
        time.sleep(0.01)
    stage.end()
    stage.end()  # idempotent: one done line
    assert not any(t.name.startswith("stage: ") for t in threading.enumerate())
    read = _read(lines)
    assert read[0] == sl.StageLine("compiling the first step", sl.START)
    assert {x.state for x in read[1:-1]} == {sl.RUNNING}
    assert len(read) >= 4 and read[-1].state == sl.DONE
    assert read[-1].seconds == pytest.approx(stage.seconds, abs=0.06)
    count = len(lines)
    time.sleep(0.2)
    assert len(lines) == count  # nothing after the done line


def test_context_manager_says_done_only_without_an_error():
    lines = []
    with Stage("building the model", heartbeat=0, log=lines.append):
        pass
    assert [x.state for x in _read(lines)] == [sl.START, sl.DONE]
    lines.clear()
    with pytest.raises(ValueError):
        with Stage("building the model", heartbeat=0, log=lines.append):
            raise ValueError("bad")
    assert [x.state for x in _read(lines)] == [sl.START]


def test_an_error_names_the_innermost_stage_it_was_raised_in():
    quiet = dict(heartbeat=0, log=lambda line: None)
    with pytest.raises(KeyboardInterrupt) as e:
        with Stage("loading TensorFlow", **quiet):
            with Stage("building the model", **quiet):
                raise KeyboardInterrupt
    assert stage_of(e.value) == "building the model"
    # A stage started, not yet ended, holds errors raised outside a with
    before = stage_of(KeyboardInterrupt())  # another test's, in this process
    training = Stage("training steps 1-30", **quiet).start()
    assert stage_of(KeyboardInterrupt()) == "training steps 1-30"
    training.end()
    assert stage_of(KeyboardInterrupt()) == before
