"""The step's communication timed in training's pattern
(official_bench/allreduce/in_step.py): what is timed per cycle, and how the
processes' cycles combine. The real all-reduces are timed by
tests/system/test_allreduce_bench.py and tests/system/test_scaling_netem.py."""

import pytest

from official_bench.allreduce import in_step


class FakeLink:
    """A clock only the calls move: the gradient's all-reduce takes 10 s,
    plus a 40 s stall every third cycle; the small collectives 1 s; a
    compute step 5 s."""

    def __init__(self):
        self.now = 0.0
        self.calls = []

    def clock(self):
        return self.now

    def gradient(self):
        self.calls.append("gradient")
        stalls = sum(1 for c in self.calls if c == "gradient") % 3 == 0
        self.now += 10.0 + (40.0 if stalls else 0.0)

    def small(self):
        self.calls.append("small")
        self.now += 1.0

    def step(self):
        self.calls.append("step")
        self.now += 5.0


def test_each_cycle_is_gradient_small_then_a_compute_step():
    link = FakeLink()
    t = in_step.measure(link.gradient, link.small, link.step, 6,
                             clock=link.clock)
    cycles = in_step.WARMUP_CYCLES + 6
    assert link.calls == ["gradient", "small", "step"] * cycles
    # warm-up cycles are not kept; the compute step is not in any time
    assert t.small == [1.0] * 6
    assert t.gradient == [10.0, 10.0, 50.0, 10.0, 10.0, 50.0]


def test_no_small_collectives_times_zero():
    link = FakeLink()
    t = in_step.measure(link.gradient, None, link.step, 2,
                             clock=link.clock)
    assert "small" not in link.calls and t.small == [0.0, 0.0]
    # not even the clock's own read-to-read time
    ticks = iter(range(100))
    t = in_step.measure(lambda: None, None, lambda: None, 2,
                             clock=lambda: float(next(ticks)))
    assert t.small == [0.0, 0.0] and t.gradient == [1.0, 1.0]


def test_one_process_whose_communication_took_least_and_its_mean():
    # Cycle 2: the peer's small collectives stalled 30 s (a late ACK) and
    # the chief, whose compute then began 30 s earlier, waited as long in
    # the next gradient all-reduce; cycle 3 stalled on both (40 s). The
    # step paid each stall once, so the peer's own times are the answer;
    # cycle by cycle minima (10, 10, 50, 10 and 1, 1, 1, 1) would drop
    # the 30 s stall twice.
    chief = in_step.Timings([10.0, 10.0, 80.0, 10.0], [1.0, 1.0, 1.0, 1.0])
    peer = in_step.Timings([11.0, 10.0, 50.0, 10.0], [1.0, 31.0, 1.0, 1.0])
    r = in_step.summarize(6, [chief, peer])
    # peer: 81 + 34 = 115 s in total against the chief's 110 + 4 = 114:
    # the chief it is, mean 27.5 (a stall in 2 of 4 cycles), median 10
    assert (r.gradient_seconds, r.gradient_median_seconds) == (27.5, 10.0)
    assert (r.small_seconds, r.small_median_seconds) == (1.0, 1.0)
    assert r.seconds == 28.5
    # the other one when it is the one that communicated least
    slower = in_step.Timings(chief.gradient, [1.0, 1.0, 30.0, 1.0])
    r = in_step.summarize(6, [slower, peer])
    assert (r.gradient_seconds, r.small_seconds) == (20.25, 8.5)
    assert (r.small_collectives, r.cycles, r.processes) == (6, 4, 2)
    assert r.as_dict()["gradient_seconds"] == 20.25
    assert ("gradient all-reduce 20250.00 ms mean (median 10500.00), 6 "
            "small collectives 8500.00 ms mean (median 1000.00); 4 cycles "
            "over 2 processes") in r.line()


def test_cycles_only_all_processes_timed_count():
    short = in_step.Timings([5.0, 5.0], [1.0, 1.0])
    long = in_step.Timings([1.0, 1.0, 100.0], [0.0, 0.0, 100.0])
    # long's third cycle is not compared: over two cycles it took 2 s
    r = in_step.summarize(0, [short, long])
    assert (r.gradient_seconds, r.small_seconds, r.cycles) == (1.0, 0.0, 2)


def test_no_cycles_is_refused():
    with pytest.raises(ValueError, match="cycles must be >= 1, got 0"):
        in_step.measure(lambda: None, None, lambda: None, 0)
