"""runtime.loss_scale_update (jax_backend/loss_scale.py): fp16's
loss-scaled update without lax.cond.

One child Python with 2 CPU devices trains test_jax_step.py's tiny model
in float16 through step.py, on 1 and on 2 devices, once with Keras'
conditional (cond) and once with select: steps that skip (an inf in the
batch), that count and that double the scale (a growth period of 3). The
tests compare every variable after every step, and look for XLA's
`conditional` in each compiled step. The same child then checks that a
run (official_bench.run) hands the key to step.build. TensorFlow's one-line
refusal of the key: config/test_speed_options.py.
"""

import json

import numpy as np
import pytest
from unit.jax_backend import test_jax_step as base

from support.helpers import config_error_lines, keras3_child

SKIPPED = (1, 5)  # steps whose batch holds an inf
STEPS = 7
GROWTH = 3  # the scale doubles after 3 finite steps in a row: at step 4
INITIAL_SCALE = 2.0 ** 15


def _run(jax, keras, mesh, how):
    """Every variable after each of STEPS steps, and the compiled step's
    HLO text."""
    from official_bench.jax_backend import step as step_lib
    keras.config.set_dtype_policy("mixed_float16")
    try:
        model = base._model(keras, False, float32_output=True)
        optimizer = keras.optimizers.LossScaleOptimizer(
            keras.optimizers.SGD(base.LR, momentum=0.9),
            dynamic_growth_steps=GROWTH)
        optimizer.build(model.trainable_variables)
        steps = step_lib.build(jax, keras, model, optimizer,
                               keras.losses.CategoricalCrossentropy(), mesh,
                               one_hot=True, loss_scale_update=how)
    finally:
        keras.config.set_dtype_policy("float32")
    steps.state["sums"] = step_lib.replicated(jax, mesh,
                                              step_lib.zero_sums(jax))
    rng = np.random.default_rng(5)
    out = {"names": [v.path.split("/", 1)[1] for v in optimizer.variables],
           "counter": step_lib.step_counter_index(optimizer), "steps": []}
    for i in range(STEPS):
        x = base._data(rng, 8, 1.0)
        if i in SKIPPED:
            x[3, 2] = np.inf
        y = np.eye(6, dtype="float32")[rng.integers(0, 6, 8)]
        batch = base._put(jax, mesh, x, y)
        if i == 0:
            out["hlo"] = steps.train.lower(steps.state, *batch).compile(
            ).as_text()
        steps.state, _ = steps.train(steps.state, *batch)
        out["steps"].append({k: base._values(steps.state[k])
                             for k in ("trainable", "optimizer")})
    return out


def select_report():
    """In the child (2 CPU devices)."""
    import jax
    import keras
    from jax.sharding import Mesh
    devices = jax.devices()
    meshes = {n: Mesh(np.array(devices[:n]), ("batch",)) for n in (1, 2)}
    out = {f"{how} {n}": _run(jax, keras, mesh, how)
           for n, mesh in meshes.items() for how in ("cond", "select")}
    for run in out.values():
        run["conditionals"] = run.pop("hlo").count(" conditional(")
    # The trainer's part in the same child (one start, not two).
    out["trainer"] = _trainer_report()
    print(json.dumps(out))


@pytest.fixture(scope="module")
def report():
    return keras3_child(__file__, "select_report", cpu_devices=2)


def _scalar(run, step, suffix):
    names = [i for i, n in enumerate(run["names"]) if n == suffix]
    assert len(names) == 1, (suffix, run["names"])
    return run["steps"][step]["optimizer"][names[0]]


@pytest.mark.parametrize("devices", [1, 2])
def test_select_gives_conds_variables_exactly(report, devices):
    """Every trainable, optimizer (momentum, iterations) and loss-scale
    variable after every step, bit for bit."""
    cond, select = report[f"cond {devices}"], report[f"select {devices}"]
    assert cond["names"] == select["names"]
    for i, (a, b) in enumerate(zip(cond["steps"], select["steps"])):
        for kind in ("trainable", "optimizer"):
            for name, x, y in zip(cond["names"] if kind == "optimizer"
                                  else range(len(a[kind])), a[kind],
                                  b[kind]):
                np.testing.assert_array_equal(
                    np.asarray(x), np.asarray(y),
                    err_msg=f"step {i}, {kind} {name}")


@pytest.mark.parametrize("devices", [1, 2])
def test_the_steps_skip_count_and_grow_as_keras_does(report, devices):
    """The run covers each branch: skipped steps halve the scale and keep
    the weights, step 4 doubles it, and the schedule's counter counts
    every step (step.py's counted_step)."""
    run = report[f"select {devices}"]
    scales = [_scalar(run, i, "dynamic_scale") for i in range(STEPS)]
    s = INITIAL_SCALE
    assert scales == [s, s / 2, s / 2, s / 2, s, s / 2, s / 2]
    assert [_scalar(run, i, "step_counter") for i in range(STEPS)] == \
        [1, 0, 1, 2, 0, 0, 1]
    assert [run["steps"][i]["optimizer"][run["counter"]]
            for i in range(STEPS)] == list(range(1, STEPS + 1))
    for i in SKIPPED:
        assert run["steps"][i]["trainable"] == \
            run["steps"][i - 1]["trainable"]
    assert run["steps"][4]["trainable"] != run["steps"][3]["trainable"]


@pytest.mark.parametrize("devices", [1, 2])
def test_only_cond_compiles_a_conditional(report, devices):
    assert report[f"cond {devices}"]["conditionals"] >= 1
    assert report[f"select {devices}"]["conditionals"] == 0


def test_an_unknown_update_names_the_choices():
    from official_bench.jax_backend import loss_scale
    with pytest.raises(ValueError, match="unknown loss_scale_update 'where'; "
                       "valid: cond, select"):
        loss_scale.check("where")
    lines = config_error_lines(
        "runtime.backend=jax,runtime.loss_scale_update=where")
    assert len(lines) == 1 and lines[0].startswith(
        "runtime.loss_scale_update: unknown loss_scale_update 'where'; "
        "valid: cond, select"), lines


def _trainer_report():
    """In select_report's child, after its runs: the key as
    official_bench.run passes it to step.build (the build stops there,
    before anything compiles)."""
    import tempfile

    import official_bench
    from official_bench.jax_backend import step as step_lib
    seen = []

    class Stop(BaseException):
        """Not an Exception: no handler on the way takes it."""

    def build(*args, **kwargs):
        seen.append(list(args[7:]) + list(kwargs.values()))
        raise Stop
    real_build, step_lib.build = step_lib.build, build
    cfg = official_bench.load_config(None, json.dumps({
        "model_dir": tempfile.mkdtemp(),
        "runtime": {"backend": "jax", "num_gpus": 0,
                    "distribution_strategy": "one_device",
                    "loss_scale_update": "select"},
        "model": {"name": "resnet_cifar", "model_params": {"depth": 8}},
        "train_dataset": {"builder": "synthetic", "image_size": 8,
                          "num_classes": 3, "batch_size": 4,
                          "dtype": "float16"},
        "train": {"steps": 2, "epochs": 1},
        "evaluation": {"skip_eval": True}}))
    try:
        official_bench.run(cfg)
    except Stop:
        pass
    finally:
        step_lib.build = real_build
    return {"seen": seen}


def test_the_trainer_passes_the_key_to_the_step(report):
    assert report["trainer"]["seen"] == [["select"]]
