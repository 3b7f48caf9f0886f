"""training/tf_trainer.py's steps one at a time on a tiny set-up (CPU):
the epoch resume starts from, the callbacks fit is given, the input wait,
and what the backend hands the end of the run (training/run_end.py)."""

import types

import pytest

from official_bench import config as C
from official_bench.config import ConfigError
from official_bench.measure import wait_meter
from official_bench.runtime import cpu_kernels, precision
from official_bench.runtime.keras_setup import tf
from official_bench.training import tf_trainer
from official_bench.training.setup import prepare_runtime, setup_run
from support.helpers import tiny


def _prepared(tmp_path=None, **sections):
    cfg = C.load_config(tiny(**sections), None,
                        {"model_dir": str(tmp_path)} if tmp_path else {})
    devices, cluster = prepare_runtime(cfg.runtime)
    dtype = C.compute_dtype(cfg)
    try:
        return setup_run(cfg, cluster, devices, dtype,
                         precision.set_policy(dtype))
    finally:
        precision.reset_policy()


@pytest.fixture(scope="module")
def prep():
    return _prepared()


def test_callbacks_in_their_order_and_the_clock_from_the_resumed_step(prep):
    cbs = tf_trainer._callbacks(prep, initial_step=12)
    kinds = [type(c).__name__ for c in cbs.keras_callbacks]
    assert kinds.index("TimeHistory") < kinds.index("NanGuard")
    assert cbs.timed and cbs.time_history in cbs.keras_callbacks
    assert cbs.time_history.first_step == 12 == cbs.guard.first_step
    assert (cbs.time_history.global_batch, cbs.time_history.log_steps) == \
        (prep.plan.global_batch, 2)


def test_no_time_history_means_an_untimed_run():
    prep = _prepared(train={"callbacks": {"enable_time_history": False}})
    cbs = tf_trainer._callbacks(prep, 0)
    assert not cbs.timed
    assert "TimeHistory" not in [type(c).__name__
                                 for c in cbs.keras_callbacks]


def test_resume_starts_at_the_checkpoints_epoch(tmp_path, monkeypatch):
    prep = _prepared(tmp_path, train={"resume_checkpoint": True,
                                      "epochs": 3})
    assert tf_trainer._resume(prep) == 0  # no checkpoint yet: from scratch
    per_epoch = prep.plan.steps_per_epoch
    monkeypatch.setattr(tf_trainer.checkpoints, "latest_checkpoint",
                        lambda model_dir: "ckpt")
    monkeypatch.setattr(tf_trainer.checkpoints, "restore",
                        lambda model, path, **kw: 2 * per_epoch + 1)
    assert tf_trainer._resume(prep) == 2
    monkeypatch.setattr(tf_trainer.checkpoints, "restore",
                        lambda model, path, **kw: 3 * per_epoch)
    with pytest.raises(ConfigError, match="train.epochs 3 leaves nothing"):
        tf_trainer._resume(prep)


def test_input_wait_skips_the_warm_up_elements(prep):
    wait_meter.TRAIN_METER.reset()
    try:
        for k in range(6):  # element k waits k/10 s, one per 1 s
            wait_meter.TRAIN_METER.record(k - k / 10, k)
        wait = tf_trainer._input_wait(prep.cfg, prep)
    finally:
        wait_meter.TRAIN_METER.reset()
    warmup = prep.cfg.train.time_history.warmup_steps
    assert wait["skipped_elements"] == max(1, warmup)
    assert wait["elements"] == 6 - max(1, warmup)


def test_input_wait_skips_the_warm_up_of_every_local_replica(prep):
    """4 replicas on 2 workers: this process's pipeline hands out one
    element per local replica and step, 2 a step, so its warm-up is twice
    max(1, warmup_steps) elements."""
    two_local = types.SimpleNamespace(
        cfg=prep.cfg, plan=types.SimpleNamespace(num_replicas=4),
        dist=types.SimpleNamespace(num_workers=2, traits=types.SimpleNamespace(
            measures_input_wait=True)))
    wait_meter.TRAIN_METER.reset()
    try:
        for k in range(10):
            wait_meter.TRAIN_METER.record(k - 0.1, k)
        wait = tf_trainer._input_wait(prep.cfg, two_local)
    finally:
        wait_meter.TRAIN_METER.reset()
    skip = 2 * max(1, prep.cfg.train.time_history.warmup_steps)
    assert (wait["skipped_elements"], wait["elements"]) == (skip, 10 - skip)


def test_the_input_bound_warning_gives_input_bench_the_runs_params_yaml(
        tmp_path, absl_messages):
    """The chief wrote the run's whole config to model_dir/params.yaml:
    the command the warning gives reads it, so data_dir, model_type and
    dataset need not be copied (they were dropped, measuring ImageNet's
    defaults)."""
    run = _prepared(tmp_path)
    wait_meter.TRAIN_METER.reset()
    try:
        for k in range(6):  # every element waits 0.5 s of each 1 s
            wait_meter.TRAIN_METER.record(k - 0.5, k)
        tf_trainer._input_wait(run.cfg, run)
    finally:
        wait_meter.TRAIN_METER.reset()
    bound = [m for m in absl_messages if "input-bound" in m]
    params = tmp_path / "params.yaml"
    assert params.is_file() and len(bound) == 1, bound
    assert f"input_bench --config_file={params} --seconds=30" in bound[0]


def test_an_evaluation_the_records_cannot_fill_is_refused(tmp_path):
    """Keras ran out of data after 1 of 1250 batches and the run reported
    that batch's accuracy, exit 0; now the validation input is refused
    before it is built, as on JAX (set_counts.check_eval_pass)."""
    import json
    (tmp_path / "build_records.json").write_text(json.dumps(
        {"classes": ["a"], "splits": {"validation": {"records": 12}}}))
    run = _prepared(validation_dataset={
        "builder": "records", "data_dir": str(tmp_path),
        "num_examples": 10000, "batch_size": 8})
    with pytest.raises(ConfigError, match=r"gives at most 1 batches of 8 "
                       r"\(12 records\), the evaluation takes 1250 .*set "
                       "validation_dataset.num_examples=12"):
        run.validation_data()


def test_a_cut_validation_file_stops_the_run_before_training_as_on_jax(
        tmp_path, absl_messages):
    """An evaluation that stopped short of the damage trained, evaluated
    and logged "every one is whole" (for the training files); JAX refused
    the file before training. Now both give the same line then, and with
    skip_bad_records a warning naming it."""
    from official_bench.data.records import (
        file_verdict,
        framing,
        host_examples,
    )
    from official_bench.jax_backend import host_feed
    data = b"".join(framing.frame(bytes([i]) * 20) for i in range(10))
    cut = tmp_path / "validation-00000-of-00001"
    cut.write_bytes(data[:36 * 4 + 10])
    val = {"builder": "records", "data_dir": str(tmp_path),
           "num_examples": 4, "batch_size": 2}
    with pytest.raises(file_verdict.BadRecordFile) as tf_line:
        _prepared(validation_dataset=val).validation_data()
    ds = C.DatasetConfig(builder="records", data_dir=str(tmp_path),
                         split="validation")
    with pytest.raises(file_verdict.BadRecordFile) as jax_line:
        host_feed.check_eval_pass(
            host_examples.process_files(ds, 0, 1, False), 2, 2)
    assert str(tf_line.value) == str(jax_line.value)
    assert f"bad record 4 in {cut}: corrupt or truncated" in \
        str(tf_line.value)
    absl_messages.clear()
    _prepared(validation_dataset=dict(
        val, skip_bad_records=True)).validation_data()
    assert [m for m in absl_messages if str(cut) in m] == [
        str(tf_line.value).split(";")[0] +
        "; skipped (skip_bad_records: true)"]


def test_a_remote_validation_file_is_answered_after_the_evaluation():
    """A remote file (a read per record) is not walked before training:
    its check runs beside it and is answered after the evaluation."""
    from official_bench.data.records import file_verdict, framing
    data = b"".join(framing.frame(bytes([i]) * 20) for i in range(10))
    cut = "ram://cut_validation/validation-00000-of-00001"
    tf.io.gfile.makedirs("ram://cut_validation")
    with tf.io.gfile.GFile(cut, "wb") as f:
        f.write(data[:36 * 4 + 10])
    run = _prepared(validation_dataset={
        "builder": "records", "data_dir": "ram://cut_validation",
        "num_examples": 4, "batch_size": 2})
    run.validation_data()
    assert run.validation_check is not None
    with pytest.raises(file_verdict.BadRecordFile,
                       match=f"bad record 4 in {cut}: corrupt or truncated"):
        run.finish_validation()


def test_unmetered_strategies_have_no_input_wait(prep, monkeypatch):
    monkeypatch.setattr(prep.dist, "traits", types.SimpleNamespace(
        measures_input_wait=False))
    assert tf_trainer._input_wait(prep.cfg, prep) is None


def test_the_run_end_holds_this_backends_facts(prep):
    cbs = tf_trainer._callbacks(prep, 0)
    hist = {"loss": [2.0, 1.5], "val_accuracy": [0.25, 0.5]}
    end = tf_trainer._run_end(prep, hist, {"accuracy": 0.5}, 3.5, cbs, None)
    assert end.clock is cbs.time_history and end.guard is cbs.guard
    assert (end.wall_time, end.history, end.evaluation) == \
        (3.5, hist, {"accuracy": 0.5})
    # TensorFlow's own TF32 switch (the peak ignores it on a CPU)
    assert end.tf32 is tf.config.experimental.\
        tensor_float_32_execution_enabled()
    assert end.environment["backend"] == "tensorflow"
    assert end.task == prep.task() and end.num_workers == 1
    assert end.summary_note == cpu_kernels.kernels_note(
        prep.cfg.runtime.cpu_kernels, prep.dtype, prep.cfg.runtime.num_gpus,
        cpu_kernels.cpu_features.read_flags(), cpu_kernels.onednn_enabled())
    untimed = tf_trainer._run_end(prep, hist, {}, 1.0, types.SimpleNamespace(
        **dict(vars(cbs), timed=False)), None)
    assert untimed.clock is None and untimed.input_wait is None
