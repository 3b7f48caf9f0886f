"""train.stop_on_nan: a NaN/infinite loss stops the run naming the step, with
no per-step host sync; switched off, the run finishes with a warning in its
summary line and result.json."""

import json
import os
import re
import threading

import pytest

from official_bench import trainer
from official_bench.contracts import exit_status
from official_bench.measure import stages, timing
from official_bench.runtime.keras_setup import keras
from official_bench.training.nan_check import NonFiniteLossError
from official_bench.training.nan_guard import NanGuard
from support.helpers import TINY_OVERRIDE, cli, tiny


class CountingLoss:
    """A loss 'tensor' that counts how often it is read back to the host."""
    reads = 0

    def __init__(self, value):
        self.value = value

    def __float__(self):
        CountingLoss.reads += 1
        return self.value


def run_guard(guard, losses, epochs=1):
    """Feed one running-mean loss per step to the guard (Keras's call
    order)."""
    per_epoch = len(losses) // epochs
    for e in range(epochs):
        guard.on_epoch_begin(e)
        for b in range(per_epoch):
            guard.on_train_batch_end(b, {"loss": losses[e * per_epoch + b]})
        guard.on_epoch_end(e, {"loss": losses[(e + 1) * per_epoch - 1]})


# ---- the callback alone -----------------------------------------------------

def test_reads_the_loss_only_at_checks():
    CountingLoss.reads = 0
    guard = NanGuard(stop=True, check_steps=4)
    run_guard(guard, [CountingLoss(1.0) for _ in range(10)])
    assert CountingLoss.reads == 3  # steps 4, 8 and the epoch end (10)
    assert guard.bad is None and guard.result_fields() == {}
    assert guard.summary_note() == ""


def test_keras_keeps_tensor_logs_with_the_guard():
    # Keras converts every step's logs to numpy (a device sync) unless every
    # callback with batch hooks declares _supports_tf_logs.
    th = timing.TimeHistory(8, 2, 6)
    cbs = keras.callbacks.CallbackList([th, NanGuard(True, 2)],
                                       add_history=True, add_progbar=False)
    assert cbs._batch_hooks_support_tf_logs


def test_stop_names_the_step_and_the_window():
    guard = NanGuard(stop=True, check_steps=20, initial_step=100)
    losses = [2.0] * 30 + [float("nan")] * 10
    with pytest.raises(NonFiniteLossError) as e:
        run_guard(guard, losses)
    # checks at 120 (finite) and 140 (nan): the bad step is in 121-140
    assert str(e.value).startswith(
        "official_bench: loss is nan at step 140 (non-finite from a step in "
        "121-140; checked every 20 steps and at epoch ends): training "
        "stopped.")
    assert "train.stop_on_nan=false" in str(e.value)
    # CLI's error line
    assert "]" not in str(e.value) and "\n" not in str(e.value)


def test_infinity_caught_at_the_epoch_end():
    guard = NanGuard(stop=True, check_steps=100)
    with pytest.raises(NonFiniteLossError, match=r"loss is inf at step 30 "
                       r"\(non-finite from a step in 1-30;"):
        run_guard(guard, [1.0] * 29 + [float("inf")])


def test_second_epoch_window_starts_at_the_epoch():
    guard = NanGuard(stop=True, check_steps=8)
    with pytest.raises(NonFiniteLossError, match="at step 16 .non-finite from "
                       "a step in 11-16;"):
        run_guard(guard, [1.0] * 10 + [1.0, float("nan")] + [float("nan")] * 8,
                  epochs=2)  # epoch 2 = steps 11-20, first check at 16


def test_without_stop_the_first_bad_check_is_recorded():
    warned = []
    guard = NanGuard(stop=False, check_steps=2,
                     warn=lambda fmt, *a: warned.append(fmt % a))
    run_guard(guard, [1.0, 1.0, float("nan"), float("nan"), float("nan"), 7.0])
    assert guard.bad.step == 4 and guard.bad.last_good == 2
    assert len(warned) == 1 and "training goes on" in warned[0]
    fields = guard.result_fields()
    assert fields["non_finite_loss"]["step"] == 4
    assert fields["warnings"][0].startswith("loss is nan at step 4 ")
    assert guard.summary_note().startswith("; WARNING: loss is nan at step 4 ")


# ---- a real run that diverges -----------------------------------------------

HUGE_LR = {"learning_rate": {"initial_lr": 1e30}}


def test_diverging_run_stops_naming_the_step(tmp_path):
    with pytest.raises(NonFiniteLossError) as e:
        trainer.run(tiny(model=HUGE_LR), model_dir=str(tmp_path))
    step = int(re.search(r"loss is (?:nan|inf) at step (\d+) ", str(e.value))
               .group(1))
    assert step in (2, 4, 6)  # log_steps 2: checks at 2, 4, 6
    assert not os.path.exists(tmp_path / "result.json")  # no success claimed
    # The failed fit skipped on_train_end; the sampler thread still ended.
    assert not [t for t in threading.enumerate()
                if t.name == "utilisation-sampler" and t.is_alive()]
    # ... and its training stage ended (a later error names no stale one)
    assert e.value.official_bench_stage.startswith("training steps 1-")
    assert stages.stage_of(KeyboardInterrupt()) is None


def test_throughput_only_run_goes_on_with_warnings(tmp_path, absl_messages):
    result = trainer.run(tiny(model=HUGE_LR, train={"stop_on_nan": False}),
                         model_dir=str(tmp_path))
    assert result.stats.total_steps == 6
    summary = [m for m in absl_messages
               if m.startswith("official_bench: run finished")]
    assert len(summary) == 1 and "; WARNING: loss is " in summary[0]
    record = json.loads((tmp_path / "result.json").read_text())
    assert record["warnings"][0].startswith("loss is ")
    assert "train.stop_on_nan false" in record["warnings"][0]
    assert record["non_finite_loss"]["step"] in (2, 4, 6)


def test_cli_exits_1_with_the_step(tmp_path):
    p = cli([f"--model_dir={tmp_path}", "--mode=train",
             f"--params_override={TINY_OVERRIDE},"
             "model.learning_rate.name=constant,"
             "model.learning_rate.warmup_epochs=0,"
             "model.learning_rate.initial_lr=1.0e+30"], timeout=300)
    assert p.returncode == exit_status.FAILED, p.stdout[-3000:]
    assert re.search(r"^error: official_bench: loss is (nan|inf) at step \d+ ",
                     p.stdout, re.M), p.stdout[-3000:]
    assert "official_bench: run finished" not in p.stdout
    # One line, no traceback above it (--verbose would add it).
    assert "Traceback" not in p.stdout
    assert len(re.findall(r"^error:", p.stdout, re.M)) == 1
    assert not os.path.exists(tmp_path / "result.json")


def test_counts_steps_of_multi_step_loops():
    # train.steps_per_loop 4: Keras calls the hook after steps 4, 8, 12 with
    # the loop's last batch index 3, 7, 11
    CountingLoss.reads = 0
    guard = NanGuard(stop=False, check_steps=8, warn=lambda *a: None)
    guard.on_epoch_begin(0)
    for batch, value in ((3, 1.0), (7, 1.0), (11, float("nan"))):
        guard.on_train_batch_end(batch, {"loss": CountingLoss(value)})
    assert CountingLoss.reads == 1 and guard.step == 12  # read at step 8 only
    guard.on_epoch_end(0, {"loss": CountingLoss(float("nan"))})
    assert guard.bad.step == 12 and guard.bad.last_good == 8
