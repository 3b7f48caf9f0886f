"""model.learning_rate.compat: model_garden_r23 reproduces Model Garden r2.3's
piecewise_constant_with_warmup for DLPerf's YAMLs.

Expected values are worked out by hand from r2.3's formula (learning_rate.py
PiecewiseConstantDecayWithWarmup, fed the global batch by classifier_trainer):
steps_per_epoch = examples_per_epoch // global_batch, peak = 0.1 * global_batch
/ 256, warm-up peak * step / warmup_steps while step < warmup_steps, then
peak * multipliers[i], switching when step > boundary steps.
"""

import json
import os

import numpy as np
import pytest

from official_bench import config as C, trainer
from official_bench.training import lr_math
from official_bench.training.schedules import (
    ModelGardenR23Piecewise,
    build_schedule,
)
from support.helpers import DLPERF_CONFIGS, tiny

R23 = "model.learning_rate.compat=model_garden_r23"


def dlperf_lr(name, override=R23):
    """The learning_rate section of one of DLPerf's YAMLs (plus override)."""
    cfg = C.load_config(config_file=os.path.join(DLPERF_CONFIGS, name),
                        params_override=override)
    return cfg.model.learning_rate


def f32_warmup(peak, step, warmup_steps):
    """peak * (step / warmup_steps) in float32, as r2.3 computed it."""
    return float(np.float32(peak)
                 * (np.float32(step) / np.float32(warmup_steps)))


@pytest.mark.parametrize("yaml,replicas", [
    ("two_node_gpu.yaml", 16), ("two_node_gpu_fp16.yaml", 16)])
def test_two_node_yaml_reproduces_r23(yaml, replicas):
    lr = dlperf_lr(yaml)
    assert lr.initial_lr == 1.024 and lr.examples_per_epoch == 640512
    per_replica = 128 if yaml == "two_node_gpu.yaml" else 256
    gb = per_replica * replicas
    s = build_schedule(lr, global_batch=gb, total_steps=600)
    if gb == 2048:
        # 640512 // 2048 = 312 steps per epoch; peak 0.1 * 2048 / 256 = 0.8
        # (honouring initial_lr would give 1.024 * 8 = 8.192); warm-up 1 epoch
        # = 312 steps; boundaries 30/60/80 epochs = 9360, 18720, 24960 steps.
        expected = {0: 0.0, 1: f32_warmup(0.8, 1, 312), 156: 0.4,
                    311: f32_warmup(0.8, 311, 312), 312: 0.8, 600: 0.8,
                    9360: 0.8, 9361: 0.08, 18720: 0.08, 18721: 0.008,
                    24960: 0.008, 24961: 0.0008}
    else:
        # 640512 // 4096 = 156; peak 1.6; boundaries 4680, 9360, 12480
        expected = {0: 0.0, 78: 0.8, 155: f32_warmup(1.6, 155, 156), 156: 1.6,
                    4680: 1.6, 4681: 0.16, 9361: 0.016, 12481: 0.0016}
    for step, value in expected.items():
        assert float(s(step)) == pytest.approx(value, rel=1e-6), step
        assert float(s(step)) == float(np.float32(value)), step


def test_four_node_yaml_peak_is_r23s_not_16():
    lr = dlperf_lr("multi_node_gpu.yaml")
    s = build_schedule(lr, global_batch=128 * 32, total_steps=600)
    # 640512 // 4096 = 156 steps per epoch, peak 0.1 * 4096 / 256 = 1.6
    assert float(s(156)) == pytest.approx(1.6)
    assert float(s(78)) == pytest.approx(0.8)
    ours = build_schedule(dlperf_lr("multi_node_gpu.yaml", override=None),
                          global_batch=4096, total_steps=600)
    # 1.024 x 16: what compat avoids
    assert float(ours(156)) == pytest.approx(16.384)


def test_single_gpu_yaml_without_warmup():
    # gpu.yaml: warmup_epochs 0, batch 128 on 1 GPU: 5004 steps per epoch,
    # peak 0.1 * 128 / 256 = 0.05 from step 0; first boundary 150120.
    s = build_schedule(dlperf_lr("gpu.yaml"), global_batch=128,
                       total_steps=600)
    assert [float(s(k)) for k in (0, 1, 600, 150120)] == \
        [pytest.approx(0.05)] * 4
    assert float(s(150121)) == pytest.approx(0.005)


def test_the_log_line_says_which_schedule_runs():
    text = lr_math.describe_schedule(dlperf_lr("two_node_gpu.yaml"), 2048)
    assert "Model Garden r2.3's piecewise_constant_with_warmup" in text
    assert "peak 0.8 (initial_lr 1.024 ignored" in text
    assert "warm-up 312 steps" in text and "[9360, 18720, 24960]" in text
    ours = lr_math.describe_schedule(
        dlperf_lr("two_node_gpu.yaml", override=None), 2048)
    assert "initial_lr 1.024 x 8 (global batch 2048" in ours
    assert "peak 8.192" in ours
    assert ("model.learning_rate.compat=model_garden_r23 trains as it did"
            in ours)


def test_compat_only_for_the_piecewise_schedule():
    with pytest.raises(C.ConfigError, match=(
            "model.learning_rate.compat: model_garden_r23 reproduces r2.3's "
            "piecewise_constant_with_warmup only; name is "
            "'cosine_with_warmup'")):
        C.load_config(params_override=R23 + ",model.learning_rate.name="
                      "cosine_with_warmup")
    with pytest.raises(C.ConfigError,
                       match="unknown learning-rate compat mode "
                             "'model_garden_r24'; valid: model_garden_r23, "
                             "or null"):
        C.load_config(params_override="model.learning_rate.compat="
                      "model_garden_r24")


def test_r23_warmup_ends_at_its_step_on_the_first_multiplier():
    # r2.3 warms up while step < warmup_steps, so the warm-up's last step
    # already has peak * multipliers[0]: 2560 // 256 = 10 steps per epoch,
    # peak 0.1, warm-up 10 steps, x0.5 up to step 20, x0.05 after it.
    s = ModelGardenR23Piecewise(global_batch=256, examples_per_epoch=2560,
                                warmup_epochs=1, boundaries=[2],
                                multipliers=[0.5, 0.05])
    expected = {9: 0.09, 10: 0.05, 20: 0.05, 21: 0.005}
    for step, value in expected.items():
        assert float(s(step)) == pytest.approx(value), step


def _schedule_at_256(total_steps, **keys):
    """The schedule of model.learning_rate `keys` at global batch 256."""
    lr = C.load_config(params_override=",".join(
        f"model.learning_rate.{k}={v}" for k, v in keys.items())
    ).model.learning_rate
    return build_schedule(lr, global_batch=256, total_steps=total_steps)


def test_piecewise_boundaries_in_fractional_epochs_of_whole_steps():
    # 2700 // 256 = 10 whole steps per epoch (not 10.5 rounded to 11):
    # warm-up 10 steps, the boundary at 2.5 epochs = step 25; peak 0.1.
    s = _schedule_at_256(40, initial_lr=0.1, examples_per_epoch=2700,
                         warmup_epochs=1, boundaries="[2.5]",
                         multipliers="[1.0,0.1]")
    expected = {5: 0.05, 10: 0.1, 24: 0.1, 25: 0.01}
    for step, value in expected.items():
        assert float(s(step)) == pytest.approx(value), step


def test_cosine_decays_over_the_steps_after_a_fractional_warmup():
    # 2560 // 256 = 10 steps per epoch; warm-up 1.5 epochs = 15 steps;
    # the cosine spans the 35 - 15 = 20 steps after it; peak 0.1.
    s = _schedule_at_256(35, name="cosine_with_warmup", initial_lr=0.1,
                         warmup_epochs=1.5, examples_per_epoch=2560)
    expected = {0: 0.0, 6: 0.1 * 6 / 15, 15: 0.1,
                25: 0.05,  # half way: 0.5 * 0.1 * (1 + cos(pi / 2))
                35: 0.0, 40: 0.0}
    for step, value in expected.items():
        assert float(s(step)) == pytest.approx(value, abs=1e-7), step


def test_a_run_trains_with_the_r23_schedule(tmp_path):
    cfg = tiny(model={"learning_rate": {
        "name": "piecewise_constant_with_warmup", "compat": "model_garden_r23",
        "initial_lr": 1.024, "warmup_epochs": 1, "examples_per_epoch": 24,
        "boundaries": [1], "multipliers": [1.0, 0.1]}})
    result = trainer.run(cfg, model_dir=str(tmp_path))
    assert result.stats.total_steps == 6
    opt = result.model.optimizer
    # global batch 8: 24 // 8 = 3 steps per epoch, peak 0.1 * 8 / 256; after
    # 6 steps (step 6 > boundary 3) the rate is peak * 0.1
    # The fused (legacy) optimizer keeps the schedule; ask it for this step.
    lr = opt.learning_rate
    lr = lr(opt.iterations) if callable(lr) else lr
    assert float(lr) == pytest.approx(0.1 * 8 / 256 * 0.1)
    record = json.loads((tmp_path / "result.json").read_text())
    assert record["config"]["model"]["learning_rate"]["compat"] == \
        "model_garden_r23"
