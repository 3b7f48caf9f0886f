"""The step's communication timed in training's pattern
(official_bench/comm_in_step.py): what is timed per cycle, and how the
processes' cycles combine. The real all-reduces are timed by
tests/test_allreduce_bench.py and tests/test_scaling_netem.py."""

import pytest

from official_bench import comm_in_step


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
    t = comm_in_step.measure(link.gradient, link.small, link.step, 6,
                             clock=link.clock)
    cycles = comm_in_step.WARMUP_CYCLES + 6
    assert link.calls == ["gradient", "small", "step"] * cycles
    # warm-up cycles are not kept; the compute step is not in any time
    assert t.small == [1.0] * 6
    assert t.gradient == [10.0, 10.0, 50.0, 10.0, 10.0, 50.0]


def test_no_small_collectives_times_zero():
    link = FakeLink()
    t = comm_in_step.measure(link.gradient, None, link.step, 2,
                             clock=link.clock)
    assert "small" not in link.calls and t.small == [0.0, 0.0]
    # not even the clock's own read-to-read time
    ticks = iter(range(100))
    t = comm_in_step.measure(lambda: None, None, lambda: None, 2,
                             clock=lambda: float(next(ticks)))
    assert t.small == [0.0, 0.0] and t.gradient == [1.0, 1.0]


def test_the_fastest_process_per_cycle_and_the_mean_over_cycles():
    # The chief waited 30 s for its peer's compute in cycle 2; the peer's
    # own time there is the transfer. Cycle 3 stalled on both (40 s).
    chief = comm_in_step.Timings([10.0, 40.0, 50.0, 10.0], [1.0, 1.0, 2.0, 1.0])
    peer = comm_in_step.Timings([11.0, 10.0, 50.0, 12.0], [1.0, 3.0, 2.0, 1.0])
    r = comm_in_step.summarize(6, [chief, peer])
    # per cycle min: 10, 10, 50, 10 -> mean 20 (a stall in 1 of 4 cycles
    # costs throughput 10 s per step), median 10
    assert (r.gradient_seconds, r.gradient_median_seconds) == (20.0, 10.0)
    assert (r.small_seconds, r.small_median_seconds) == (1.25, 1.0)
    assert (r.small_collectives, r.cycles, r.processes) == (6, 4, 2)
    assert r.seconds == 21.25
    assert r.as_dict()["gradient_seconds"] == 20.0
    assert ("gradient all-reduce 20000.00 ms mean (median 10000.00), 6 "
            "small collectives 1250.00 ms mean (median 1000.00); 4 cycles "
            "over 2 processes") in r.line()


def test_no_cycles_is_refused():
    with pytest.raises(ValueError, match="cycles must be >= 1, got 0"):
        comm_in_step.measure(lambda: None, None, lambda: None, 0)
