"""The A/B runner's runs (judge/ab.py) with a stand-in side: a Python that
prints stage and TimeHistory lines. Its progress is shown while it runs,
not after; a run past its timeout is stopped and named."""

import sys

import pytest

from official_bench.contracts import stage_line
from official_bench.contracts.throughput import Interval, format_line
from official_bench.extract.errors import ExtractError
from official_bench.judge import ab

# Says a stage, then waits (up to 60 s) for the file the runner's progress
# callback creates when it shows that stage: the wait ends at once only if
# the runner reads lines as they come.
SIDE = """
import os, sys, time
print({stage!r}, flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
print("seen" if os.path.exists(sys.argv[1]) else "never seen", flush=True)
for line in {intervals!r}:
    print(line, flush=True)
"""


def _side(tmp_path, seen):
    stage = stage_line.format_line(stage_line.StageLine(
        stage_line.training(1, 30), stage_line.START))
    intervals = [format_line(Interval(s, s + 10, 1.0, 10.0 * (s + 1)))
                 for s in (0, 10, 20)]
    code = SIDE.format(stage=stage, intervals=intervals)
    return ab.Side("A", lambda work: [sys.executable, "-c", code, str(seen)])


def test_progress_is_shown_while_the_run_runs(tmp_path):
    seen = tmp_path / "seen"
    shown = []

    def progress(line):
        shown.append(line)
        if "training steps 1-30" in line:
            seen.touch()

    record = ab.run_once(_side(tmp_path, seen), str(tmp_path / "w"), 1,
                         warmup_intervals=1, progress=progress,
                         label="A round 1/2", log_path=str(tmp_path / "a.log"))
    assert "seen\n" in (tmp_path / "a.log").read_text()
    assert shown[:2] == ["[A round 1/2] starting",
                         "[A round 1/2] training steps 1-30 ..."]
    # the last interval, with the length the training stage gave
    assert shown[-1] == "[A round 1/2] step 30/30, 210.0 img/s"
    assert record.rates == [110.0, 210.0]


def test_a_run_past_its_timeout_is_stopped_and_named(tmp_path):
    with pytest.raises(ExtractError, match=r"side A, round 1: still running "
                                           r"after 1 s"):
        ab.run_once(_side(tmp_path, tmp_path / "never"), str(tmp_path / "w"),
                    1, timeout=1, log_path=str(tmp_path / "a.log"))
    assert "official_bench: stage: training steps 1-30" in \
        (tmp_path / "a.log").read_text()  # what it printed is kept
