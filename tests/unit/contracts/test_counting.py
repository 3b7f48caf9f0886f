"""Which TimeHistory intervals count (contracts/counting.py): the window,
a short run's window after its first interval, the A/B runner's first N,
and the trainer's own rule read back from result.json's stats."""

from official_bench.contracts import counting
from official_bench.contracts.throughput import Interval


def _runs(*bounds):
    return [Interval(a, b, 1.0, 100.0 + a) for a, b in bounds]


def test_a_window_counts_only_intervals_wholly_inside_it():
    ivs = _runs((0, 100), (100, 200), (150, 250), (500, 600), (600, 700))
    assert counting.in_window(ivs, 100, 600) == [ivs[1], ivs[2], ivs[3]]
    assert counting.in_window(ivs, 120, 600) == [ivs[2], ivs[3]]
    assert counting.in_window(ivs, 500) == ivs[3:]  # no upper bound


def test_steps_covered_and_the_window_every_run_covers():
    assert counting.steps_covered([]) is None
    assert counting.steps_covered(_runs((0, 10), (10, 20), (20, 60))) == \
        (10, 60)
    assert counting.common_window([(10, 60), (20, 40)]) == (20, 40)
    assert counting.common_window([(10, 20), (20, 40)]) is None
    assert counting.common_window([]) is None


def test_a_lone_run_counts_dlperfs_window_or_after_its_first_interval():
    full = _runs(*[(s, s + 100) for s in range(0, 700, 100)])
    assert counting.covers_dlperf_window(full)
    chosen, dlperf = counting.counted_alone(full)
    assert dlperf and [iv.start_step for iv in chosen] == [100, 200, 300,
                                                           400, 500]
    short = _runs((0, 10), (10, 20), (20, 30))
    assert not counting.covers_dlperf_window(short)
    assert counting.counted_alone(short) == (short[1:], False)
    assert counting.counted_alone([]) == ([], False)


def test_the_ab_runner_leaves_out_the_first_n_intervals():
    ivs = _runs((0, 5), (5, 10), (10, 15))
    assert counting.after_first(ivs, 2) == ivs[2:]
    assert counting.after_first(ivs, 0) == ivs


def test_the_trainers_rule_as_result_json_records_it():
    ivs = _runs((0, 10), (10, 20), (20, 30), (30, 40), (40, 50))
    # After warm-up, none touching the profiled steps 21-30.
    assert counting.recorded_counted(
        {"warmup_steps": 10, "excluded_steps": [21, 30]}, ivs) == \
        [ivs[1], ivs[3], ivs[4]]
    assert counting.trainer_counted(ivs, 10, (21, 30)) == \
        [ivs[1], ivs[3], ivs[4]]
    # Too short to leave the warm-up out: every unprofiled interval.
    assert counting.recorded_counted({"warmup_steps": 100}, ivs) == ivs
    assert counting.recorded_counted({}, ivs) == ivs


def test_a_resumed_runs_warm_up_counts_from_its_first_step():
    # result.json of a run resumed at step 300: the readers (compare,
    # history) leave its first interval out, as the trainer did.
    ivs = _runs((300, 310), (310, 320), (320, 330))
    assert counting.recorded_counted({"warmup_steps": 10}, ivs) == ivs[1:]
    assert counting.warmup_start(ivs, 10) == 310
    assert counting.warmup_start([], 10) == 10
