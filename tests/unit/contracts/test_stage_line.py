"""The stage-line contract: written and read back, shown on a console,
never read as a TimeHistory line."""

import pytest

from official_bench.contracts import stage_line as sl
from official_bench.contracts.throughput import LINE_RE

LINES = [sl.StageLine("building the model", sl.START),
         sl.StageLine("compiling the train step (XLA, 2 replica(s) on cpu)",
                      sl.RUNNING, 12.0),
         sl.StageLine("loading TensorFlow", sl.DONE, 3.1)]


@pytest.mark.parametrize("line", LINES)
def test_written_lines_read_back_behind_a_log_prefix(line):
    text = "I1126 14:04:51.398 140664 stages.py:40] " + sl.format_line(line)
    assert sl.parse_line(text) == line
    assert not LINE_RE.search(text)


def test_console_text_and_what_is_not_a_stage_line():
    assert [sl.console_text(x) for x in LINES] == [
        "building the model ...",
        "compiling the train step (XLA, 2 replica(s) on cpu), 12 s",
        "loading TensorFlow: 3.1 s"]
    assert sl.parse_line("official_bench: step 2/6 (33%), ETA 1s") is None
    assert sl.parse_line(sl.STAGE_MARK + " half a line") is None


def test_the_training_stage_carries_the_last_step():
    line = sl.parse_line(sl.format_line(
        sl.StageLine(sl.training(101, 600), sl.START)))
    assert sl.last_step(line) == 600
    assert sl.last_step(LINES[0]) is None
