"""--profile_steps: a real profiler trace of the chosen steps, left out of
the statistics."""

import glob
import os

import pytest

from official_bench import config as C, trainer
from official_bench.contracts.throughput import Interval
from official_bench.measure import stats
from support.helpers import TINY_OVERRIDE, cli, tiny


def _xplane(model_dir):
    files = glob.glob(os.path.join(model_dir, "profile", "plugins", "profile",
                                   "*", "*.xplane.pb"))
    assert len(files) == 1, files
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    space = xplane_pb2.XSpace()
    with open(files[0], "rb") as f:
        space.ParseFromString(f.read())
    return space


def test_trace_is_written_and_its_steps_left_out(tmp_path):
    r = trainer.run(tiny(train={"steps": 8, "time_history": {
        "log_steps": 2, "warmup_steps": 0}},
        runtime={"profile_steps": [5, 6]}), model_dir=str(tmp_path))
    space = _xplane(str(tmp_path))
    # A real trace: the host plane has the traced steps' events.
    events = sum(len(line.events) for plane in space.planes
                 for line in plane.lines)
    assert events > 0
    assert r.stats.excluded_steps == [5, 6]
    ends = [i.end_step for i in r.stats.intervals]
    assert ends == [2, 4, 6, 8]  # every interval is logged ...
    # ... but the one holding steps 5-6 is not in the rates.
    kept = [i.examples_per_second for i in r.stats.intervals
            if i.end_step != 6]
    assert r.stats.median_examples_per_second == pytest.approx(
        sorted(kept)[1])
    assert len([t for t in r.stats.intervals]) == 4
    assert "profiled steps 5..6 left out" in r.stats.summary()


def test_stats_exclusion_arithmetic():
    intervals = [Interval(0, 2, 1.0, 8.0),
                 Interval(2, 4, 1.0, 8.0),
                 Interval(4, 6, 10.0, 0.8),
                 Interval(6, 8, 0.5, 16.0)]
    steps = [0.5] * 4 + [5.0, 5.0] + [0.25, 0.25]
    s = stats.compute_stats(intervals, steps, 0, total_steps=8,
                             wall_time=12.5, global_batch=4, num_replicas=1,
                             log_steps=2, excluded_steps=(5, 6))
    assert s.average_examples_per_second == pytest.approx((8 + 8 + 16) / 3)
    assert max(s.step_time_p99, s.step_time_mean) < 1.0


def test_cli_flag_and_bad_value(tmp_path):
    with pytest.raises(C.ConfigError, match="runtime.profile_steps"):
        C.load_config(params_override="runtime.profile_steps=[0,3]")
    p = cli([f"--model_dir={tmp_path}", "--profile_steps=3,4",
             f"--params_override={TINY_OVERRIDE}"])
    assert p.returncode == 0, p.stdout[-3000:]
    assert "profiler trace of steps 3..4 written" in p.stdout
    _xplane(str(tmp_path))
    bad = cli([f"--model_dir={tmp_path}/b", "--profile_steps=3-4",
               f"--params_override={TINY_OVERRIDE}"])
    assert bad.returncode == 2
    assert "runtime.profile_steps" in bad.stdout
