"""measure/wait_meter.py: the input wait's arithmetic and the input-bound
warning, shared by both backends."""

import pytest

from official_bench.measure import wait_meter


def _meter(waits, period=1.0):
    """Element k asked for at k*period and handed out waits[k] later."""
    meter = wait_meter.InputWaitMeter("test measure")
    for k, wait in enumerate(waits):
        meter.record(k * period, k * period + wait)
    return meter


def test_fraction_leaves_out_the_skipped_and_the_first_counted_wait():
    summary = _meter([5.0, 0.5, 0.2, 0.2, 0.2]).summary(skip=1)
    # counted elements 1-4; waits inside the span: elements 2-4
    assert summary["elements"] == 4 and summary["skipped_elements"] == 1
    assert summary["wait_seconds"] == pytest.approx(0.6)
    assert summary["span_seconds"] == pytest.approx(2.7)
    assert summary["fraction"] == pytest.approx(0.6 / 2.7)
    # 0.6 s over the 3 waits inside the span: 200 ms each
    assert summary["mean_wait_ms"] == pytest.approx(200.0)
    assert summary["measure"] == "test measure"
    assert _meter([0.1]).summary(skip=0) is None  # nothing to measure


def test_the_warning_names_the_hint_only_when_input_bound(absl_messages):
    wait_meter.warn_if_input_bound(
        _meter([0.0, 0.05, 0.05]).summary(0), "HINT-A")
    assert not [m for m in absl_messages if "input-bound" in m]
    wait_meter.warn_if_input_bound(
        _meter([0.0, 0.5, 0.5]).summary(0), "HINT-B")
    bound = [m for m in absl_messages if "input-bound" in m]
    assert len(bound) == 1 and bound[0].endswith("; HINT-B"), bound
    wait_meter.warn_if_input_bound(_meter([0.0, 0.5, 0.5]).summary(0))
    assert "official_bench.data.input_bench" in [
        m for m in absl_messages if "input-bound" in m][-1]


def test_the_warm_up_skip_is_the_warm_up_steps_waits():
    # At least the first step's (start-up, tracing), `waits_per_step` each:
    # TensorFlow one per local replica, JAX one per step.
    assert wait_meter.warmup_skip(0, 1) == 1
    assert wait_meter.warmup_skip(3, 1) == 3
    assert wait_meter.warmup_skip(3, 4) == 12
    assert wait_meter.warmup_skip(0, 2) == 2
    assert wait_meter.warmup_skip(2, 0) == 2  # no replica count: one wait


def test_the_tf_data_hint_gives_the_runs_params_yaml_or_the_flags():
    """The command reproduces the run: its params.yaml (the whole config),
    else the trainer's flags that shape the input, named to copy."""
    own = wait_meter.tf_data_hint("/runs/my run/params.yaml")
    assert "python -m official_bench.data.input_bench --config_file=" \
           "'/runs/my run/params.yaml' --seconds=30" in own
    copy = wait_meter.tf_data_hint(None)
    for flag in ("--config_file", "--params_override", "--model_type",
                 "--dataset", "--data_dir", "--num_gpus"):
        assert flag in copy, copy


def test_why_a_run_has_no_input_wait():
    def why(**kw):
        return wait_meter.unmeasured_note(**dict(dict(
            unmetered_strategy=None, timed=True, steps=6, warmup_steps=2),
            **kw))
    assert why(unmetered_strategy="horovod") == (
        "not measured under horovod (its datasets are not metered)")
    assert "untimed" in why(timed=False)
    assert why(steps=3).startswith("not measured: 3 step(s), too few past "
                                   "the 2 warm-up step(s)")
    assert why(steps=2, warmup_steps=0).startswith(
        "not measured: 2 step(s), too few past the 1 warm-up")
    assert why(steps=4) == ("not measured: fewer than two input elements "
                            "after the warm-up")
    assert wait_meter.note(None, "not measured: x") == \
        ", input wait not measured: x"
    assert wait_meter.note(None) == ""
