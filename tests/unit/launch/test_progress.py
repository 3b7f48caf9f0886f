"""The launcher's progress lines and a run's measured img/s (issue 28 §2),
from TimeHistory lines written with the contract's own formatter."""

import re

from official_bench.contracts import counting, stage_line, throughput
from official_bench.contracts.throughput import Interval, format_line
from official_bench.launch import progress


def _write(path, *intervals, prefix="I1125 12:00:00.000 timing.py:1] "):
    with open(path, "a") as f:
        for iv in intervals:
            f.write(prefix + format_line(iv) + "\n")


def _iv(start, end, rate, seconds=1.0):
    return Interval(start, end, seconds, rate)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_contract_lines_are_read_back():
    line = "I1125 timing.py:2] " + format_line(_iv(10, 20, 312.44, 2.5))
    assert progress.parse_interval(line) == _iv(10, 20, 312.44, 2.5)
    assert progress.parse_interval("official_bench: step 2/6 (33%)") is None


def test_lines_are_rate_limited_but_the_last_is_shown(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("# header\n")
    shown, clock = [], Clock()
    watch = progress.RunProgress(str(log), "1n1g run 1/5", 600, False,
                                 shown.append, min_seconds=5, clock=clock)
    _write(log, _iv(0, 20, 100.0, 4.0))
    watch.poll()
    # no ETA from the warm-up interval alone (eta_seconds)
    assert shown == ["[1n1g run 1/5] step 20/600, 100.0 img/s"]
    clock.now = 2.0
    _write(log, _iv(20, 40, 312.4, 2.0))
    watch.poll()
    assert len(shown) == 1  # held back: less than 5 s since the last line
    clock.now = 3.0
    _write(log, _iv(40, 60, 320.0, 2.0))
    rate = watch.finish()
    # the last one is always shown; ETA from the latest interval
    assert shown[-1] == "[1n1g run 1/5] step 60/600, 320.0 img/s, ETA 54s"
    assert rate.intervals == 2 and rate.images_per_second == 316.2
    assert rate.describe() == ("316.2 img/s (median of 2 intervals after "
                               "the first, steps 20-60)")


def test_partial_line_waits_for_its_end(tmp_path):
    log = tmp_path / "run.log"
    text = format_line(_iv(0, 2, 50.0))
    log.write_text(text[:10])
    shown = []
    watch = progress.RunProgress(str(log), "x", None, False, shown.append,
                                 min_seconds=0)
    watch.poll()
    assert shown == []
    with open(log, "a") as f:
        f.write(text[10:] + "\n")
    watch.poll()
    assert shown == ["[x] step 2, 50.0 img/s"]


def test_quiet_shows_nothing_but_still_measures(tmp_path):
    log = tmp_path / "run.log"
    _write(log, _iv(0, 2, 1.0), _iv(2, 4, 3.0), _iv(4, 6, 5.0),
           _iv(6, 8, 4.0))
    shown = []
    watch = progress.RunProgress(str(log), "x", 8, True, shown.append)
    rate = watch.finish()
    assert shown == [] and rate.images_per_second == 4.0


def test_dlperf_window_when_the_run_covers_it():
    ivs = [_iv(s, s + 100, 1000.0 + s) for s in range(0, 700, 100)]
    chosen, dlperf = counting.counted_alone(ivs)
    assert dlperf and [iv.start_step for iv in chosen] == [100, 200, 300,
                                                           400, 500]
    rate = progress.run_rate(ivs)
    assert rate.describe() == ("1300.0 img/s (median of 5 intervals, "
                               "steps 100-600)")
    assert progress.extractor_window([ivs, ivs]) is None


def test_extractor_window_for_short_runs():
    short = [_iv(0, 10, 1.0), _iv(10, 20, 1.0), _iv(20, 60, 1.0)]
    shorter = [_iv(0, 20, 1.0), _iv(20, 40, 1.0)]
    assert progress.extractor_window([short, shorter]) == (20, 40)
    assert progress.extractor_window([[_iv(0, 10, 1.0)]]) == (0, 0)
    assert progress.run_rate([_iv(0, 10, 1.0)]) is None


def test_eta_format():
    assert [throughput.format_eta(s) for s in (42, 130, 7500)] == \
        ["42s", "2m10s", "2h05m"]


def test_eta_from_the_latest_interval_not_the_warm_up():
    # issue 40: the first interval holds the first step's compile (20 s for
    # 10 steps); the steps after it take 0.1 s each
    warm_up, steady = _iv(0, 10, 5.0, 20.0), _iv(10, 20, 100.0, 1.0)
    assert progress.eta_seconds([warm_up], 40) is None
    assert progress.eta_seconds([warm_up, steady], 40) == 2.0
    slower = _iv(20, 30, 50.0, 2.0)  # the latest rate wins
    assert progress.eta_seconds([warm_up, steady, slower], 40) == 2.0
    assert progress.eta_seconds([warm_up, steady, slower], 30) is None
    assert progress.eta_seconds([warm_up, steady], None) is None


def _stage(what, state, seconds=None):
    line = stage_line.format_line(stage_line.StageLine(what, state, seconds))
    return "I1126 14:04:51.398493 140664 stages.py:40] " + line


def test_stage_lines_are_shown_at_once_and_fed_lines_are_read(tmp_path):
    shown, clock = [], Clock()
    watch = progress.RunProgress(None, "A round 1/2", None, False,
                                 shown.append, min_seconds=5, clock=clock)
    training = stage_line.training(1, 30)  # the run's length, for a reader
    watch.feed([_stage(training, stage_line.START),  # that did not know it
                _stage("loading TensorFlow", stage_line.START),
                _stage("loading TensorFlow", stage_line.RUNNING, 6.2),
                _stage("loading TensorFlow", stage_line.DONE, 7.04),
                "I1126 timing.py:1] " + format_line(_iv(0, 10, 8.0, 20.0))])
    clock.now = 1.0  # stage lines are not held back by the rate limit;
    # an interval held back by it is shown before the next stage line
    watch.feed(["I1126 timing.py:1] " + format_line(_iv(10, 20, 9.0)),
                _stage(training, stage_line.DONE, 9.0)])
    assert shown == ["[A round 1/2] training steps 1-30 ...",
                     "[A round 1/2] loading TensorFlow ...",
                     "[A round 1/2] loading TensorFlow, 6 s",
                     "[A round 1/2] loading TensorFlow: 7.0 s",
                     "[A round 1/2] step 10/30, 8.0 img/s",
                     "[A round 1/2] step 20/30, 9.0 img/s, ETA 1s",
                     "[A round 1/2] training steps 1-30: 9.0 s"]
    assert watch.finish().images_per_second == 9.0
    quiet = []
    progress.RunProgress(None, "q", 30, True, quiet.append).feed(
        [_stage("x", stage_line.START)])
    assert quiet == []


def test_a_tasks_wait_for_its_peers_is_on_the_console(tmp_path, capsys):
    """A trainer that waits for a peer that never starts (a stand-in under
    the real start-up watchdog, real processes): node 0's console shows
    the watchdog's wait line, not only the run's FAILED line at the end."""
    from official_bench.contracts import exit_status as es
    from official_bench.launch.runner import Runner
    from support.launch_stand_in import make_plan

    assert Runner(make_plan(tmp_path, "peer_wait")).run_all() == es.FAILED
    out = capsys.readouterr().out
    assert re.search(r"^\[1n1g run 1/1\] worker 0 waiting for peers \(\d s "
                     r"left\); not reachable yet: worker 1 at 127\.0\.0\.1:9$",
                     out, re.M), out
    assert "1n1g run 1: FAILED (exit 137" in out


def test_peer_wait_lines_are_read_back_and_quiet_drops_them():
    line = "W1130 05:34:21 x] " + throughput.peer_wait_message(
        "worker 1", 150.2, ["worker 0 at 10.0.0.1:5000"])
    shown = []
    p = progress.RunProgress(None, "2n1g run 1/5", 60, False, shown.append)
    p.feed([line, "official_bench: worker 1 waiting for peers, soon"])
    assert shown == ["[2n1g run 1/5] worker 1 waiting for peers (150 s "
                     "left); not reachable yet: worker 0 at 10.0.0.1:5000"]
    quiet = []
    progress.RunProgress(None, "x", 60, True, quiet.append).feed([line])
    assert quiet == []
