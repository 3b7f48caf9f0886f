"""FitTail: a line when training ends saying what model.fit still does,
and one with how long that took, only when it was long."""

import pytest

from official_bench.measure import fit_tail


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def run(seconds, long_seconds=2.0):
    """Lines logged and the seconds returned for a wait this long."""
    log, clock = [], Clock()
    tail = fit_tail.FitTail(long_seconds, log=lambda *a: log.append(a),
                            clock=clock)
    tail.on_train_end()
    clock.now += seconds
    seconds = tail.returned()
    return [fmt % tuple(args) for fmt, *args in log], seconds


def test_training_end_says_what_comes():
    lines, _ = run(0.01)
    assert lines == ["official_bench: training done; model.fit returns "
                     f"after {fit_tail.WHAT}"]


def test_a_short_wait_adds_nothing():
    lines, seconds = run(0.2)
    assert len(lines) == 1 and seconds == pytest.approx(0.2)


def test_a_long_wait_is_one_line_with_its_seconds():
    lines, seconds = run(12.34)
    assert lines[1:] == [f"official_bench: {fit_tail.WHAT} took 12.3 s"]
    assert seconds == pytest.approx(12.34)


def test_fit_that_raised_before_the_end_says_nothing():
    log = []
    tail = fit_tail.FitTail(0.0, log=lambda *a: log.append(a))
    assert tail.returned() is None and log == []
