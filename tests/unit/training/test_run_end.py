"""training/run_end.py: the end of a run both backends hand one RunEnd to
(statistics, summary line, result.json, history, RunResult), with a real
interval clock on a fake time source and no framework."""

import dataclasses
import json
from types import SimpleNamespace

from official_bench import config as C
from official_bench.measure.intervals import IntervalClock
from official_bench.training import run_end
from official_bench.training.batch_plan import batch_plan
from official_bench.training.nan_check import NanCheck
from support.helpers import tiny


class _Clock:
    now = 0.0

    def __call__(self):
        return self.now


def _timed_clock(plan, log_steps, step_seconds=None, initial_step=0):
    """An IntervalClock driven through `step_seconds` (default 0.5 s for
    each of the plan's steps), the run resumed at `initial_step`."""
    t = _Clock()
    clock = IntervalClock(plan.global_batch, log_steps, plan.total_steps,
                          progress_seconds=1e9, initial_step=initial_step,
                          log_fn=lambda *a: None, clock=t)
    clock.on_train_begin()
    if step_seconds is None:
        step_seconds = [0.5] * plan.total_steps
    for i, seconds in enumerate(step_seconds):
        t.now += seconds
        clock.on_train_batch_end(i, {"loss": 1.0})
    clock.on_train_end()
    return clock


def _end(tmp_path, clock=True, **fields):
    cfg = C.load_config(tiny(history={"enabled": False}), None,
                        {"model_dir": str(tmp_path)})
    plan = batch_plan(cfg, 1)
    model = SimpleNamespace(name="tiny", trainable_weights=[],
                            count_params=lambda: 7)
    return run_end.RunEnd(**dict(dict(
        cfg=cfg, plan=plan, dtype="float32",
        clock=_timed_clock(plan, 2) if clock else None,
        guard=NanCheck(True, 2), history={"loss": [1.0]}, evaluation={},
        model=model, environment={"backend": "test", "gpu_names": []},
        task={"type": "worker", "index": 0, "tag": "worker0",
              "is_chief": True},
        result_path=str(tmp_path / "result.json"), num_workers=1), **fields))


def test_result_json_and_the_summary_line(tmp_path, absl_messages):
    wait = {"fraction": 0.25, "mean_wait_ms": 125.0}
    result = run_end.finish(_end(tmp_path, input_wait=wait,
                                 summary_note=", the backend's words",
                                 extra={"feed": {"workers": 3}}))
    record = json.loads((tmp_path / "result.json").read_text())
    assert record["environment"] == {"backend": "test", "gpu_names": []}
    assert record["input_wait"] == wait and record["feed"] == {"workers": 3}
    assert record["task"]["tag"] == "worker0"
    assert record["model"]["name"] == "tiny"
    stats = record["stats"]
    assert stats["total_steps"] == 6 and stats["step_time_synced"]
    assert stats["average_examples_per_second"] == 16.0  # 8 images / 0.5 s
    assert result.stats.average_examples_per_second == 16.0
    assert result.result_path == str(tmp_path / "result.json")
    summary = [m for m in absl_messages if "run finished" in m]
    assert len(summary) == 1, absl_messages
    # The parts in their order: statistics, input wait, backend's words.
    assert summary[0].endswith(", input wait 25.0% (125.0 ms per element)"
                               ", the backend's words"), summary[0]


def test_an_untimed_run_writes_no_statistics(tmp_path, absl_messages):
    result = run_end.finish(_end(tmp_path, clock=False))
    record = json.loads((tmp_path / "result.json").read_text())
    assert record["stats"] is None and result.stats is None
    assert not [m for m in absl_messages if "run finished" in m]
    assert record["input_wait_note"].startswith("not measured: the run is "
                                                "untimed")


def test_a_run_without_an_input_wait_says_why(tmp_path, absl_messages):
    """A 6-step run at the default warm-up (100 steps) had input_wait null
    and no word, which read as 'not measured for this strategy'."""
    end = _end(tmp_path)
    run_end.finish(dataclasses.replace(end, cfg=C.replace_keys(
        end.cfg, {"train.time_history.warmup_steps": 100})))
    record = json.loads((tmp_path / "result.json").read_text())
    note = ("not measured: 6 step(s), too few past the 100 warm-up step(s) "
            "it leaves out (train.time_history.warmup_steps 100); run more "
            "steps or lower warmup_steps")
    assert record["input_wait"] is None and record["input_wait_note"] == note
    summary = [m for m in absl_messages if "run finished" in m]
    assert summary[0].endswith(", input wait " + note), summary[0]
    run_end.finish(_end(tmp_path, input_wait={"fraction": 0.1,
                                              "mean_wait_ms": 1.0}))
    record = json.loads((tmp_path / "result.json").read_text())
    assert record["input_wait_note"] is None  # measured


def test_a_process_without_a_result_file_writes_none(tmp_path):
    result = run_end.finish(_end(tmp_path, result_path=None))
    assert not (tmp_path / "result.json").exists()
    assert result.stats.total_steps == 6  # its numbers still come back


def test_a_resumed_run_counts_its_own_steps_by_their_numbers(tmp_path):
    # Resumed at step 2 of 6: the clock runs steps 3-6, 0.5 s each but
    # the profiled step 5 (1.5 s), so the run trained 4 steps of 8 images,
    # not 6, and its step times are those of steps 3, 4 and 6: 0.5 s.
    end = _end(tmp_path, excluded_steps=(5, 5))
    clock = _timed_clock(end.plan, 2, [0.5, 0.5, 1.5, 0.5], initial_step=2)
    stats = run_end.statistics(dataclasses.replace(end, clock=clock))
    assert (stats.total_steps, stats.num_images) == (4, 32)
    assert stats.step_time_mean == 0.5


def test_the_backend_s_wall_time_wins_over_the_clock_s(tmp_path):
    # The clock ran 6 steps of 0.5 s (3 s); the backend measured 9 s.
    stats = run_end.statistics(_end(tmp_path, wall_time=9.0))
    assert stats.wall_time == 9.0


def test_the_records_a_run_skipped_are_in_result_json_and_its_summary(
        tmp_path, absl_messages):
    """records_skipped: this process's count per split of each dataset
    that skips (the trainer clears it when a run starts), a warning the
    extractor passes on, and the summary line's words; none without
    skip_bad_records."""
    from official_bench.data.records import record_problems
    end = _end(tmp_path)
    skipping = dataclasses.replace(end, cfg=C.replace_keys(
        end.cfg, {"train_dataset.skip_bad_records": True}))
    record_problems.PROCESS.clear()
    try:
        record_problems.PROCESS.add("train", 3)
        record_problems.PROCESS.add("other", 5)  # no dataset reads it
        result = run_end.finish(skipping)
        record = json.loads((tmp_path / "result.json").read_text())
        assert record["records_skipped"] == {"train": 3}
        assert record["warnings"] == [
            "3 bad record(s) skipped in train (skip_bad_records: true): "
            "the run read the rest"]
        # A notebook's result says so too, without opening result.json.
        assert result.records_skipped == {"train": 3}
        assert result.warnings == record["warnings"]
        assert "records_skipped={'train': 3}" in repr(result)
        summary = [m for m in absl_messages if "run finished" in m]
        assert "; 3 bad record(s) skipped (train 3)" in summary[-1]
        result = run_end.finish(end)
        record = json.loads((tmp_path / "result.json").read_text())
        assert record["records_skipped"] is None
        assert "warnings" not in record
        assert (result.records_skipped, result.warnings) == (None, [])
    finally:
        record_problems.PROCESS.clear()


def test_model_gardens_run_stats_line_ends_a_timed_run(tmp_path,
                                                     absl_messages):
    """peers 13: Model Garden's classifier_trainer ends with `Run stats:`
    and a dict harnesses grep for avg_exp_per_second."""
    import ast
    run_end.finish(_end(tmp_path, history={"loss": [2.0, 1.5],
                                           "accuracy": [0.1, 0.25]},
                        evaluation={"loss": 1.75, "accuracy": 0.5,
                                    "top_5_accuracy": 0.9}))
    lines = [m for m in absl_messages if m.startswith("Run stats:\n")]
    assert len(lines) == 1, absl_messages
    assert ast.literal_eval(lines[0].split("\n", 1)[1]) == {
        "accuracy_top_1": 0.5, "eval_loss": 1.75, "loss": 1.5,
        "training_accuracy_top_1": 0.25, "avg_exp_per_second": 16.0}
    absl_messages.clear()
    run_end.finish(_end(tmp_path, clock=False))
    assert not [m for m in absl_messages if m.startswith("Run stats:")]


def test_run_result_carries_result_json_s_input_and_input_wait(tmp_path):
    """A notebook reads the feed's facts (decoder, input worker count) from
    what run() returns, as result.json has them; a backend without an
    `input` record (TensorFlow) gives None."""
    feed = {"builder": "records", "decoder": "simplejpeg", "decode": "cpu",
            "num_workers": 2}
    wait = {"fraction": 0.25, "mean_wait_ms": 125.0}
    result = run_end.finish(_end(tmp_path, input_wait=wait,
                                 extra={"input": feed}))
    record = json.loads((tmp_path / "result.json").read_text())
    assert result.input == record["input"] == feed
    assert result.input_wait == record["input_wait"] == wait
    assert result.input["num_workers"] == 2
    assert "simplejpeg" not in repr(result)  # the one line stays short
    bare = run_end.finish(_end(tmp_path))
    assert bare.input is None and bare.input_wait is None
