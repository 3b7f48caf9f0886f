"""TimeHistory: interval arithmetic, the log line, sync points, statistics."""

import pytest

from official_bench.contracts.throughput import Interval
from official_bench.measure import stats, timing
from support.helpers import DLPERF_REGEX


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Loss:
    """A 'tensor' whose float() records that the host waited for it."""

    def __init__(self, value, reads):
        self.value, self.reads = value, reads

    def __float__(self):
        self.reads.append(self.value)
        return self.value


def drive(th, clock, step_seconds, reads=None, test_at=None):
    reads = [] if reads is None else reads
    th.on_train_begin()
    for i, sec in enumerate(step_seconds):
        clock.now += sec
        th.on_train_batch_end(i, {"loss": Loss(float(i), reads)})
        if test_at is not None and i == test_at:
            th.on_test_begin()
            clock.now += 100.0  # evaluation must not count
            th.on_test_end()
    th.on_train_end()
    return reads


def test_intervals_use_global_batch_and_exact_line_format():
    clock, lines = FakeClock(), []
    th = timing.TimeHistory(global_batch=256, log_steps=2, total_steps=6,
                            progress_seconds=1e9,
                            log_fn=lambda fmt, *a: lines.append(fmt % a
                                                                if a else fmt),
                            clock=clock)
    drive(th, clock, [1.0, 1.0, 0.5, 0.5, 0.25, 0.25])
    th_lines = [l for l in lines if "TimeHistory" in l]
    assert th_lines[0] == ("TimeHistory: 2.00 seconds, 256.00 examples/second "
                           "between steps 0 and 2")
    assert th_lines[1].endswith("512.00 examples/second between steps 2 and 4")
    assert th_lines[2].endswith("1024.00 examples/second between steps 4 "
                                "and 6")
    rates = [float(DLPERF_REGEX.search(l).group(1)) for l in th_lines]
    assert rates == [256.0, 512.0, 1024.0]


def test_syncs_only_where_it_logs_or_samples():
    clock = FakeClock()
    th = timing.TimeHistory(8, log_steps=3, total_steps=9,
                            progress_seconds=1e9, log_fn=lambda *a: None,
                            clock=clock, sample_every=100)
    reads = drive(th, clock, [1.0] * 9)
    # Steps 3, 6 and 9 close intervals (0-based batch 2, 5, 8); 9 is also
    # the last step. No other step waits for the device.
    assert reads == [2.0, 5.0, 8.0]
    assert not any(th.synced)


def test_sampled_steps_are_bracketed_by_syncs():
    """Every sample_every-th step (default: 5 per interval) is timed with
    the device drained at both its ends: the clock reads the loss of the
    step before it and its own."""
    clock = FakeClock()
    th = timing.TimeHistory(8, log_steps=20, total_steps=20,
                            progress_seconds=1e9, log_fn=lambda *a: None,
                            clock=clock)
    assert th.sample_every == 4
    reads = drive(th, clock, [1.0] * 20)
    assert reads == [2.0, 3.0, 6.0, 7.0, 10.0, 11.0, 14.0, 15.0, 18.0, 19.0]
    assert [k + 1 for k, ok in enumerate(th.synced) if ok] == \
        [4, 8, 12, 16, 20]


class AsyncDevice:
    """A device that runs each step for `device_seconds` once the host has
    handed it over (`dispatch_seconds` of host time), queueing steps; a
    step's loss, read, waits for that step to finish."""

    def __init__(self, clock, device_seconds, dispatch_seconds):
        self.clock, self.busy_until = clock, 0.0
        self.device_seconds, self.dispatch = device_seconds, dispatch_seconds

    def step(self):
        self.clock.now += self.dispatch
        start = max(self.clock.now, self.busy_until)
        self.busy_until = start + self.device_seconds
        return self._Loss(self, self.busy_until)

    class _Loss:
        def __init__(self, device, done_at):
            self.device, self.done_at = device, done_at

        def __float__(self):
            clock = self.device.clock
            clock.now = max(clock.now, self.done_at)
            return 0.0


def _async_run(sample_every):
    clock = FakeClock()
    device = AsyncDevice(clock, device_seconds=0.05, dispatch_seconds=0.001)
    th = timing.TimeHistory(8, log_steps=20, total_steps=100,
                            progress_seconds=1e9, log_fn=lambda *a: None,
                            clock=clock, sample_every=sample_every)
    th.on_train_begin()
    for i in range(100):
        th.on_train_batch_end(i, {"loss": device.step()})
    th.on_train_end()
    return th, stats.compute_stats(
        th.intervals, th.step_times, 20, total_steps=100,
        wall_time=th.wall_time, global_batch=8, num_replicas=1,
        log_steps=20, synced=th.synced)


def test_step_times_are_device_step_times_under_async_dispatch():
    """A backend that returns before the device finishes (JAX, TensorFlow
    on GPUs): the step-time statistics come from the sampled steps, so
    they match elapsed / steps over the window (within 5%), where every
    step's hand-off time would say 1 ms."""
    th, s = _async_run(sample_every=None)
    window = sum(i.seconds for i in s.intervals[1:]) / 80
    assert s.step_time_synced and s.step_time_samples == 20
    for value in (s.step_time_mean, s.step_time_median, s.step_time_p99):
        assert value == pytest.approx(window, rel=0.05)
    # Without the sampled syncs the same run's step times are hand-offs.
    _, unsampled = _async_run(sample_every=1000)
    assert not unsampled.step_time_synced
    assert unsampled.step_time_median < window / 10


def test_evaluation_time_is_left_out():
    clock = FakeClock()
    th = timing.TimeHistory(10, log_steps=2, total_steps=4,
                            progress_seconds=1e9, log_fn=lambda *a: None,
                            clock=clock)
    drive(th, clock, [1.0] * 4, test_at=2)
    assert [round(i.seconds, 6) for i in th.intervals] == [2.0, 2.0]
    assert th.wall_time == pytest.approx(4.0)
    # nor in the time of the step after it (100 s of evaluation after the
    # third step would make the fourth 101 s)
    assert th.step_times == pytest.approx([1.0] * 4)


def test_progress_lines_on_long_runs():
    clock, lines = FakeClock(), []
    th = timing.TimeHistory(4, log_steps=100, total_steps=10,
                            progress_seconds=2.5,
                            log_fn=lambda fmt, *a: lines.append(fmt % a),
                            clock=clock)
    drive(th, clock, [1.0] * 10)
    progress = [l for l in lines if "official_bench: step" in l]
    assert progress[0].startswith("official_bench: step 3/10 (30%), 4.00 "
                                  "examples/second so far")  # 3 x 4 in 3 s
    assert "ETA" in progress[0] and "loss 2.0000" in progress[0]
    assert progress[-1].startswith("official_bench: step 10/10 (100%)")


def test_progress_eta_leaves_out_the_compiling_first_step():
    """The first step traces and compiles (here 20 s, then 1 s a step): the
    ETA is read from the steps after it, not from the time since the start
    (which said 30 s with 13 s left, issue 40)."""
    clock, lines = FakeClock(), []
    th = timing.TimeHistory(4, log_steps=100, total_steps=20,
                            progress_seconds=2.5,
                            log_fn=lambda fmt, *a: lines.append(fmt % a),
                            clock=clock)
    drive(th, clock, [20.0] + [1.0] * 19)
    progress = [l for l in lines if "official_bench: step" in l]
    assert progress[0].startswith("official_bench: step 1/20") and \
        "ETA" not in progress[0]  # nothing after the first step yet
    seven = next(l for l in progress
                 if l.startswith("official_bench: step 7/"))
    assert seven.endswith("ETA 13s"), seven  # 13 steps of 1 s left


def test_stats_leave_out_warmup_and_report_spread():
    intervals = [Interval(0, 10, 10.0, 10.0),
                 Interval(10, 20, 1.0, 100.0),
                 Interval(20, 30, 0.5, 200.0),
                 Interval(30, 40, 1.0, 100.0)]
    steps = [1.0] * 10 + [0.1] * 10 + [0.05] * 10 + [0.1] * 9 + [0.3]
    s = stats.compute_stats(intervals, steps, 10, total_steps=40,
                             wall_time=12.5, global_batch=10, num_replicas=2,
                             log_steps=10)
    assert s.warmup_excluded
    assert s.average_examples_per_second == pytest.approx(400 / 3)
    assert s.median_examples_per_second == 100.0
    assert s.per_replica_examples_per_second == pytest.approx(200 / 3)
    assert s.step_time_median == pytest.approx(0.1)
    assert s.step_time_p99 == pytest.approx(0.3)
    assert s.num_images == 400 and s.per_replica_batch_size == 5
    assert "official_bench: run finished" in s.summary()


def test_steps_after_the_last_interval_are_not_in_the_step_times():
    """37 steps at log_steps 10: the img/s are over steps 11-30 (the
    intervals after warm-up); steps 31-37 end no interval, so their times
    are left out of the step-time statistics too (they were in them, 27
    samples for a 20-step window)."""
    intervals = [Interval(0, 10, 10.0, 10.0), Interval(10, 20, 1.0, 100.0),
                 Interval(20, 30, 1.0, 100.0)]
    steps = [1.0] * 10 + [0.1] * 20 + [0.5] * 7
    s = stats.compute_stats(intervals, steps, 10, total_steps=37,
                             wall_time=13.0, global_batch=10, num_replicas=1,
                             log_steps=10)
    assert s.step_time_samples == 20
    assert s.step_time_mean == pytest.approx(0.1)
    assert s.step_time_p99 == pytest.approx(0.1)


def test_warmup_is_left_out_when_one_interval_is_left_after_it():
    # warm-up 10 steps = the first interval; the second starts at step 10:
    # 100 img/s, steps of 0.1 s, none of the first interval's 1 s steps.
    intervals = [Interval(0, 10, 10.0, 10.0), Interval(10, 20, 1.0, 100.0)]
    s = stats.compute_stats(intervals, [1.0] * 10 + [0.1] * 10, 10,
                             total_steps=20, wall_time=11.0, global_batch=10,
                             num_replicas=1, log_steps=10)
    assert s.warmup_excluded
    assert s.average_examples_per_second == 100.0
    assert s.step_time_mean == pytest.approx(0.1)
    assert "too short" not in s.summary()


def test_images_over_time_is_the_harmonic_mean_never_above_the_mean():
    """Issue 29 §6: 300 images in 2.5 s of counted window is 120 img/s,
    while the mean of the interval rates (DLPerf's) is 133.3."""
    intervals = [Interval(0, 10, 10.0, 10.0),
                 Interval(10, 20, 1.0, 100.0),
                 Interval(20, 30, 0.5, 200.0),
                 Interval(30, 40, 1.0, 100.0)]
    s = stats.compute_stats(intervals, [0.1] * 40, 10, total_steps=40,
                             wall_time=12.5, global_batch=10, num_replicas=1,
                             log_steps=10)
    assert s.images_per_second_over_window == pytest.approx(120.0)
    assert s.average_examples_per_second == pytest.approx(400 / 3)
    assert s.as_dict()["images_per_second_over_window"] == pytest.approx(120)
    assert ("133.33 examples/second (mean of interval rates; 120.00 images "
            "/ time over the counted window; median 100.00") in s.summary()
    # equal intervals: images / time is the rates' harmonic mean
    equal = [Interval(0, 1, 1.0, 100.0), Interval(1, 2, 4.0,
                                                                25.0)]
    s = stats.compute_stats(equal, [1.0, 4.0], 0, total_steps=2,
                             wall_time=5.0, global_batch=100,
                             num_replicas=1, log_steps=1)
    assert s.images_per_second_over_window == pytest.approx(
        2 / (1 / 100 + 1 / 25))


def test_short_run_counts_everything_and_says_so():
    intervals = [Interval(0, 2, 2.0, 4.0)]
    s = stats.compute_stats(intervals, [1.0, 1.0], 100, total_steps=2,
                             wall_time=2.0, global_batch=4, num_replicas=1,
                             log_steps=2)
    assert not s.warmup_excluded
    assert s.average_examples_per_second == 4.0
    assert "too short" in s.summary()


def test_run_shorter_than_one_interval_reports_the_whole_run():
    s = stats.compute_stats([], [2.0, 1.0, 1.0], 0, total_steps=3,
                             wall_time=4.0, global_batch=8, num_replicas=2,
                             log_steps=100)
    assert s.basis == "whole_run"
    assert s.average_examples_per_second == 6.0  # 24 images in 4 s
    assert s.per_replica_examples_per_second == 3.0
    assert "over the whole run, warm-up included" in s.summary()
    assert "6.00 examples/second" in s.summary()
    assert s.images_per_second_over_window is None  # no counted window


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert stats.percentile(values, 99) == 99
    assert stats.percentile(values, 50) == 50
    assert stats.percentile([5.0], 99) == 5.0


def test_steps_per_loop_counts_steps_from_the_batch_index():
    """Keras calls once per loop of 5 steps with the loop's last batch index;
    two epochs of 10 steps (batches restart at 0 in each epoch)."""
    clock, lines = FakeClock(), []
    th = timing.TimeHistory(8, log_steps=10, total_steps=20,
                            progress_seconds=1e9,
                            log_fn=lambda fmt, *a: lines.append(fmt % a),
                            clock=clock)
    th.on_train_begin()
    for epoch in range(2):
        th.on_epoch_begin(epoch)
        for batch in (4, 9):
            clock.now += 2.5  # 0.5 s per step
            th.on_train_batch_end(batch, {"loss": 1.0})
    th.on_train_end()
    assert th.step == 20
    assert [(i.start_step, i.end_step) for i in th.intervals] == \
        [(0, 10), (10, 20)]
    assert [i.examples_per_second for i in th.intervals] == [16.0, 16.0]
    assert th.step_times == [0.5] * 20
    # A loop's time shared by its 5 steps is no one step's device time,
    # though the device was drained at both the loop's ends.
    assert th.synced == [False] * 20
    assert lines[0].endswith("16.00 examples/second between steps 0 and 10")


def test_steps_per_loop_after_a_resume():
    clock = FakeClock()
    th = timing.TimeHistory(8, log_steps=4, total_steps=12,
                            progress_seconds=1e9, initial_step=4,
                            log_fn=lambda *a: None, clock=clock)
    th.on_train_begin()
    th.on_epoch_begin(1)
    for batch in (1, 3):
        clock.now += 1.0
        th.on_train_batch_end(batch, {"loss": 1.0})
    assert th.step == 8
    assert [(i.start_step, i.end_step) for i in th.intervals] == [(4, 8)]


def test_a_resumed_run_counts_intervals_and_samples_from_its_step():
    # Resumed at step 3: 2-step intervals end at steps 5, 7 and 9 (not
    # at 4, 6, 8), and every 4th step after it is sampled: 7, 11, 15.
    clock = FakeClock()
    th = timing.TimeHistory(8, log_steps=2, total_steps=9,
                            progress_seconds=1e9, initial_step=3,
                            log_fn=lambda *a: None, clock=clock)
    drive(th, clock, [1.0] * 6)
    assert [(i.start_step, i.end_step) for i in th.intervals] == \
        [(3, 5), (5, 7), (7, 9)]
    th = timing.TimeHistory(8, log_steps=100, total_steps=15,
                            progress_seconds=1e9, initial_step=3,
                            log_fn=lambda *a: None, clock=clock,
                            sample_every=4)
    drive(th, clock, [1.0] * 12)
    assert [4 + k for k, ok in enumerate(th.synced) if ok] == [7, 11, 15]


def test_a_resumed_run_leaves_its_own_first_interval_out():
    # Resumed at step 100 (train.resume_checkpoint): its intervals carry the
    # checkpoint's step numbers, and its first interval (tracing) must be
    # left out as in a fresh run, in the rates as in the step times.
    clock = FakeClock()
    th = timing.TimeHistory(10, log_steps=10, total_steps=140,
                            progress_seconds=1e9, initial_step=100,
                            log_fn=lambda *a: None, clock=clock)
    th.on_train_begin()
    for batch in range(40):
        clock.now += 5.0 if batch == 0 else 1.0
        th.on_train_batch_end(batch, {"loss": 1.0})
    th.on_train_end()
    assert th.intervals[0].start_step == 100
    s = stats.compute_stats(th.intervals, th.step_times, 10, total_steps=40,
                             wall_time=th.wall_time, global_batch=10,
                             num_replicas=1, log_steps=10, first_step=100,
                             synced=th.synced)
    assert s.warmup_excluded
    assert s.average_examples_per_second == pytest.approx(10.0)
    assert s.images_per_second_over_window == pytest.approx(10.0)
    assert s.step_time_mean == pytest.approx(1.0)
    assert s.step_time_samples == 30


@pytest.mark.parametrize("replicas, batch, words", [
    (1, 16, "1 replica x 16 images"), (2, 1, "2 replicas x 1 image"),
    (8, 4, "8 replicas x 4 images")])
def test_summary_counts_replicas_and_images_in_words(replicas, batch, words):
    """peers 14: the summary said '1 replicas x 16 images'."""
    intervals = [Interval(0, 1, 1.0, replicas * batch),
                 Interval(1, 2, 1.0, replicas * batch)]
    s = stats.compute_stats(intervals, [1.0, 1.0], 0, total_steps=2,
                            wall_time=2.0, global_batch=replicas * batch,
                            num_replicas=replicas, log_steps=1)
    assert f" per replica, {words}), step time" in s.summary(), s.summary()
