"""Compute after a wait (official_bench/allreduce/compute_wait.py): which steps
are timed, the penalty, and the one-device config it compiles. The real
compiled step is timed by tests/system/test_allreduce_bench.py."""

import pytest

from official_bench import config as config_lib
from official_bench.allreduce import compute_wait


class FakeDevice:
    """A step that takes 3 s right after a sleep and 1 s otherwise, on a
    clock that only the sleep and the steps move."""

    def __init__(self):
        self.now = 0.0
        self.slept = False
        self.steps = 0

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        self.slept = True

    def step(self):
        self.now += 3.0 if self.slept else 1.0
        self.slept = False
        self.steps += 1


def test_times_the_step_after_the_wait_and_one_back_to_back():
    dev = FakeDevice()
    c = compute_wait.measure(dev.step, 0.25, 4, sleep=dev.sleep,
                             clock=dev.clock)
    assert (c.after, c.back) == ([3.0] * 4, [1.0] * 4)
    # warm-up, then 3 steps per cycle (the middle one untimed)
    assert dev.steps == compute_wait.WARMUP_STEPS + 3 * 4
    r = compute_wait.summarize(0.25, [c])
    assert (r.after_wait_seconds, r.back_to_back_seconds, r.penalty,
            r.gap_seconds, r.cycles, r.processes) == (3.0, 1.0, 3.0, 0.25,
                                                      4, 1)
    assert r.as_dict()["penalty"] == 3.0
    assert "3000.0 ms after a 250.0 ms wait (this process), 1000.0 ms " \
        "back to back (x3.00; 4 cycles" in r.line()


def test_the_slowest_process_per_cycle_counts():
    chief = compute_wait.Cycles([1.2, 1.1, 1.3, 1.2], [1.0, 1.0, 1.1, 0.9])
    # a slower device: 1.5 s after a wait, and one slow cycle
    other = compute_wait.Cycles([1.5, 1.0, 1.5, 4.0], [1.4, 1.4, 1.4, 1.4])
    r = compute_wait.summarize(0.1, [chief, other])
    # per cycle max: 1.5, 1.1, 1.5, 4.0 -> median 1.5; the chief's back to
    # back (where the 1n1g baseline runs) median 1.0
    assert (r.after_wait_seconds, r.back_to_back_seconds) == (1.5, 1.0)
    assert r.penalty == 1.5 and r.processes == 2
    assert r.per_process[1] == {"after_wait_seconds": 1.5,
                                "back_to_back_seconds": 1.4}
    assert "(the slowest of 2 processes)" in r.line()


def test_no_cycles_is_refused():
    with pytest.raises(ValueError, match="cycles must be >= 1, got 0"):
        compute_wait.measure(lambda: None, 0.1, 0)


def _config(override):
    return config_lib.build_config([(
        "--params_override", config_lib.parse_params_override(override))])


def test_local_config_is_one_device_of_the_step():
    cfg = _config("runtime.num_gpus=8,runtime.distribution_strategy="
                  "multi_worker_mirrored,train_dataset.batch_size=256,"
                  "train_dataset.use_per_replica_batch_size=false,"
                  "train_dataset.builder=records,runtime.enable_xla=true,"
                  "model_dir=/somewhere")
    local = compute_wait.local_config(cfg, 16)
    rt, ds = local.runtime, local.train_dataset
    assert (rt.distribution_strategy, rt.num_gpus, rt.enable_xla) == \
        ("one_device", 1, True)
    # global 256 over 16 replicas: 16 images on the one device
    assert (ds.batch_size, ds.use_per_replica_batch_size, ds.builder) == \
        (16, True, "synthetic")
    assert local.model_dir is None
    # the run's own (frozen) config is untouched
    assert (cfg.runtime.distribution_strategy, cfg.train_dataset.batch_size,
            cfg.train_dataset.builder, cfg.model_dir) == (
        "multi_worker_mirrored", 256, "records", "/somewhere")
    per_replica = _config("runtime.num_gpus=0,train_dataset.batch_size=32")
    assert compute_wait.local_config(per_replica, 2).train_dataset\
        .batch_size == 32
