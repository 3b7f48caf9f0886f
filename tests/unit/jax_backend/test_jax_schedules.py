"""The learning-rate schedules on both backends give the same rates: the
TensorFlow schedule objects (training/schedules.py, here in the pytest
process) and the Keras 3 ones (jax_backend/schedules.py, on keras.ops in a
child Python with Keras 3 on JAX), from the same config, at many steps
(every warm-up and boundary edge among them), to float32 precision."""

import json
import os

import numpy as np
import pytest

from official_bench import config as C
from official_bench.training import lr_math
from support.helpers import DLPERF_CONFIGS, DLPERF_NAMES, keras3_child

# name -> (config file or None, params_override, global batch, total steps)
OWN = "model.learning_rate.examples_per_epoch=25600,"  # 100 steps/epoch
CASES = {
    "piecewise_constant_with_warmup": (None, OWN + (
        "model.learning_rate.name=piecewise_constant_with_warmup,"
        "model.learning_rate.initial_lr=0.1,"
        "model.learning_rate.warmup_epochs=5,"
        "model.learning_rate.boundaries=[30,60,80]"), 256, 9000),
    "cosine_with_warmup": (None, OWN + (
        "model.learning_rate.name=cosine_with_warmup,"
        "model.learning_rate.initial_lr=0.4,"
        "model.learning_rate.warmup_epochs=2"), 512, 4000),
    "exponential": (None, OWN + (
        "model.learning_rate.name=exponential,"
        "model.learning_rate.initial_lr=0.1,"
        "model.learning_rate.warmup_epochs=1,"
        "model.learning_rate.decay_epochs=2.5,"
        "model.learning_rate.decay_rate=0.94"), 256, 9000),
    "exponential_staircase": (None, OWN + (
        "model.learning_rate.name=exponential,"
        "model.learning_rate.initial_lr=0.1,"
        "model.learning_rate.warmup_epochs=1,"
        "model.learning_rate.decay_epochs=2.5,"
        "model.learning_rate.decay_rate=0.94,"
        "model.learning_rate.staircase=true"), 256, 9000),
    "constant": (None, OWN + (
        "model.learning_rate.name=constant,"
        "model.learning_rate.initial_lr=0.05,"
        "model.learning_rate.warmup_epochs=0"), 128, 1000),
}
# DLPerf's YAMLs with r2.3's schedule, at the global batch each ran with.
DLPERF_BATCH = {"gpu.yaml": 256, "gpu_fp16.yaml": 256,
                "two_node_gpu.yaml": 2 * 8 * 128,
                "two_node_gpu_fp16.yaml": 2 * 8 * 256,
                "multi_node_gpu.yaml": 4 * 8 * 128,
                "multi_node_gpu_fp16.yaml": 4 * 8 * 256}
for _name in DLPERF_NAMES:
    CASES["r23_" + _name] = (
        os.path.join(DLPERF_CONFIGS, _name),
        "train_dataset.builder=synthetic,validation_dataset.builder=synthetic,"
        "model.learning_rate.compat=model_garden_r23",
        DLPERF_BATCH[_name], 90 * 640512 // DLPERF_BATCH[_name])


def _spec(name):
    path, override, batch, total = CASES[name]
    cfg = C.load_config(path, override)
    return cfg.model.learning_rate, batch, total


def _steps(name):
    """Edges of every phase (warm-up end, each boundary or decay step, the
    end) and their neighbours, plus a spread of other steps."""
    lr, batch, total = _spec(name)
    spec = lr_math.schedule_of(lr, batch, total)
    if isinstance(spec, lr_math.R23Piecewise):
        edges = [spec.warmup_steps] + spec.step_boundaries
    else:
        edges = [spec.warmup_steps] + list(spec.boundaries)
        if spec.decay_steps:
            edges += [spec.decay_steps * k for k in range(1, 6)]
    steps = {0, 1, 2, total - 1, total, total + 50}
    for e in edges:
        steps.update(int(e) + d for d in (-1, 0, 1))
    steps.update(np.linspace(0, total, 41).astype(int).tolist())
    return sorted(s for s in steps if s >= 0)


def keras3_rates():
    """In the child: every case's rates from the Keras 3 schedule."""
    import keras

    from official_bench.jax_backend import schedules
    out = {}
    for name in CASES:
        lr, batch, total = _spec(name)
        schedule = schedules.build_schedule(
            keras, lr_math.schedule_of(lr, batch, total))
        # one call per step, as the optimizer calls it with its iterations
        out[name] = [float(schedule(keras.ops.convert_to_tensor(s, "int32")))
                     for s in _steps(name)]
    out["backend"] = keras.backend.backend()
    print(json.dumps(out))


@pytest.fixture(scope="module")
def on_keras3():
    return keras3_child(__file__, "keras3_rates")


def _tf_rates(name):
    from official_bench.runtime.keras_setup import tf
    from official_bench.training import schedules
    lr, batch, total = _spec(name)
    schedule = schedules.build_schedule(lr, batch, total)
    return [float(schedule(tf.constant(s, tf.int64))) for s in _steps(name)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_both_backends_give_the_same_rates(on_keras3, name):
    assert on_keras3["backend"] == "jax"
    tf_rates = np.asarray(_tf_rates(name), np.float32)
    jax_rates = np.asarray(on_keras3[name], np.float32)
    np.testing.assert_allclose(jax_rates, tf_rates, rtol=2e-6, atol=1e-9)
    # a schedule that changes (warm-up, decay), not a flat line
    if name != "constant":
        assert len(set(tf_rates.tolist())) > 3
    assert tf_rates.max() > 0


def test_r23_schedule_differs_from_our_own_reading_of_dlperf():
    """The compat cases test what they say: DLPerf's 0.256 per 256 images
    is not r2.3's 0.1, so both schedules are compared, not one twice."""
    r23, batch, total = _spec("r23_gpu.yaml")
    own = C.load_config(os.path.join(DLPERF_CONFIGS, "gpu.yaml"),
                        "train_dataset.builder=synthetic,"
                        "validation_dataset.builder=synthetic"
                        ).model.learning_rate
    assert lr_math.schedule_of(r23, batch, total).peak == pytest.approx(0.1)
    assert lr_math.schedule_of(own, batch, total).peak == pytest.approx(0.256)
