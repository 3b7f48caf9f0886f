"""Horovod: the decisions on CPU in this venv, and Horovod for real
(horovodrun -np 2 --gloo) in the TF 2.18 venv that
scripts/install_horovod.sh builds (`make horovod`). The trainer's CLI under
horovodrun, with XLA, is tested through the run scripts
(system/test_run_scripts.py::test_single_node_horovod_end_to_end).

The same venv checks that official_bench itself runs on TensorFlow 2.18.
Without that venv those tests skip with the reason; the install hint for a
missing Horovod is covered in unit/training/test_training.py on every machine.
"""

import json
import os
import subprocess

import numpy as np
import pytest

from official_bench import config as C
from official_bench.measure import timing
from official_bench.runtime import horovod_backend as hb
from official_bench.runtime.keras_setup import keras, tf
from official_bench.training import checkpoints
from support.callback_logs import forces_numpy_batch_logs
from support.helpers import (
    REPO,
    failure_text,
    horovod_env,
    horovod_venv,
    horovodrun,
    tiny,
)

TESTS = os.path.join(REPO, "tests")


# ------------------------------------------------ GPU of a local rank (CPU)

def _gpus(n):
    return [f"/physical_device:GPU:{i}" for i in range(n)]


def test_one_visible_gpu_is_used_whatever_the_local_rank():
    # CUDA_VISIBLE_DEVICES=3 for local rank 3 of 4: TensorFlow lists one GPU.
    assert hb.gpu_for_local_rank(3, 4, _gpus(1)) == 0
    assert hb.gpu_for_local_rank(0, 1, _gpus(1)) == 0


def test_shared_gpus_go_by_local_rank():
    assert [hb.gpu_for_local_rank(r, 4, _gpus(4)) for r in range(4)] == \
        [0, 1, 2, 3]
    assert hb.gpu_for_local_rank(1, 2, _gpus(8)) == 1


@pytest.mark.parametrize("local_rank,local_size,visible", [
    (2, 4, 2), (0, 1, 0), (5, 8, 3)])
def test_local_rank_without_a_gpu_names_rank_size_and_list(
        local_rank, local_size, visible):
    with pytest.raises(C.ConfigError) as e:
        hb.gpu_for_local_rank(local_rank, local_size, _gpus(visible))
    msg = str(e.value)
    assert f"local rank {local_rank} (local size {local_size})" in msg
    assert f"{visible} visible" in msg
    assert "[" + ", ".join(_gpus(visible)) + "]" in msg


def test_pinned_process_must_see_exactly_its_gpu():
    hb.check_pinned_gpu(_gpus(4)[2:3], _gpus(4)[2], 2)
    for visible in (_gpus(0), _gpus(2), _gpus(1)):
        # none, all, or GPU 0 pinned earlier for every rank
        with pytest.raises(C.ConfigError, match=f"sees {len(visible)} GPU"):
            hb.check_pinned_gpu(visible, _gpus(4)[2], 2)


class _FakeHvd:
    def __init__(self, local_rank, local_size):
        self.local_rank = lambda: local_rank
        self.local_size = lambda: local_size


def _fake_gpus(monkeypatch, physical, initialised_with=None):
    """tf.config with `physical` GPUs; set_visible_devices records, or
    raises as after initialisation (visible stays `initialised_with`)."""
    devs = [tf.config.PhysicalDevice(n, "GPU") for n in physical]
    state = {"visible": devs if initialised_with is None else
             [d for d in devs if d.name in initialised_with]}

    def set_visible(device, kind):
        if initialised_with is not None:
            raise RuntimeError("Visible devices cannot be modified after "
                               "being initialized")
        state["visible"] = [device]

    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind: devs if kind == "GPU" else [])
    monkeypatch.setattr(tf.config, "get_visible_devices",
                        lambda kind: state["visible"])
    monkeypatch.setattr(tf.config, "set_visible_devices", set_visible)
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth",
                        lambda device, on: None)
    return state


def test_pin_gpu_with_one_gpu_per_rank(monkeypatch):
    state = _fake_gpus(monkeypatch, _gpus(1))
    hb._pin_gpu(_FakeHvd(3, 4), 1)
    assert [d.name for d in state["visible"]] == _gpus(1)


def test_pin_gpu_by_local_rank(monkeypatch):
    state = _fake_gpus(monkeypatch, _gpus(4))
    hb._pin_gpu(_FakeHvd(2, 4), 1)
    assert [d.name for d in state["visible"]] == [_gpus(4)[2]]


def test_pin_gpu_after_tensorflow_initialised_fails(monkeypatch):
    _fake_gpus(monkeypatch, _gpus(4), initialised_with=_gpus(4)[:1])
    with pytest.raises(C.ConfigError, match="fresh process"):
        hb._pin_gpu(_FakeHvd(2, 4), 1)


# ------------------------------------------- per-batch numpy logs (CPU)

def _run_callbacks(model_dir):
    """The callbacks a Horovod rank 0 passes to fit (trainer._fit), with
    checkpoints and TensorBoard on."""
    cfg = C.build_config([("test", tiny(model_dir=str(model_dir), train={
        "callbacks": {"enable_checkpoint_and_export": True,
                      "enable_tensorboard": True}}))])
    return hb.callbacks(hvd=None) + \
        [timing.TimeHistory(8, 2, 6)] + checkpoints.build_callbacks(cfg)


def test_horovod_callbacks_keep_batch_logs_as_tensors(tmp_path):
    pytest.importorskip("tensorboard")
    cbs = keras.callbacks.CallbackList(_run_callbacks(tmp_path),
                                       add_history=True)
    assert cbs._should_call_train_batch_hooks  # TimeHistory has one
    assert not forces_numpy_batch_logs(cbs)


def test_a_batch_hook_without_tensor_logs_is_detected(tmp_path):
    """What BroadcastGlobalVariablesCallback did (shown with the real one in
    the Horovod venv below): a per-batch hook, no _supports_tf_logs."""
    class BatchHook(keras.callbacks.Callback):
        def on_batch_end(self, batch, logs=None):
            pass
    cbs = keras.callbacks.CallbackList(
        _run_callbacks(tmp_path) + [BatchHook()], add_history=True)
    assert forces_numpy_batch_logs(cbs)


# -------------------------------------------- optimizer slots (CPU)

def _tiny_model(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.layers.Dense(6, input_shape=(8,)),
                             keras.layers.BatchNormalization(),
                             keras.layers.Dense(3)])


OPTIMIZERS = {
    "new": lambda: keras.optimizers.SGD(0.1, momentum=0.9),
    "legacy": lambda: keras.optimizers.legacy.SGD(0.1, momentum=0.9),
    "new+lso": lambda: keras.mixed_precision.LossScaleOptimizer(
        keras.optimizers.SGD(0.1, momentum=0.9)),
    "legacy+lso": lambda: keras.mixed_precision.LossScaleOptimizer(
        keras.optimizers.legacy.SGD(0.1, momentum=0.9)),
}


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_optimizer_slots_exist_before_the_first_step(kind):
    """Broadcasting before fit needs the slots that the first apply would
    create; both optimizer generations, bare or loss-scaled."""
    model = _tiny_model()
    model.compile(optimizer=OPTIMIZERS[kind](), loss="mse")
    trainable = model.trainable_variables
    before = hb.optimizer_variables(model.optimizer)
    hb.build_optimizer_slots(model.optimizer, trainable)
    after = hb.optimizer_variables(model.optimizer)
    new = [v for v in after if all(v is not b for b in before)]
    assert sorted(tuple(v.shape) for v in new if v.shape.rank) == \
        sorted(tuple(v.shape) for v in trainable)
    hb.build_optimizer_slots(model.optimizer, trainable)  # idempotent
    assert len(hb.optimizer_variables(model.optimizer)) == len(after)


# --------------------------------------------------- XLA train step (CPU)

class _Reducer:
    """Stands in for Horovod's DistributedOptimizer: the XLA step calls its
    _allreduce(grads, vars) outside XLA. Scales the gradients by `factor`
    and counts calls in a variable."""

    def __init__(self, factor):
        self.factor = factor
        self.calls = tf.Variable(0, trainable=False)

    def __call__(self, grads, variables):
        self.calls.assign_add(1)
        return [g * self.factor for g in grads]


def _reducing(optimizer, reducer):
    optimizer._allreduce_grads = None
    optimizer._allreduce = reducer
    return optimizer


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(24, 8)).astype("float32"), \
        rng.integers(0, 3, size=(24,))


def _fit(model, optimizer, xla_step, steps=3):
    model.compile(optimizer=optimizer, jit_compile=xla_step,
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True), metrics=["accuracy"])
    if xla_step:
        hb.install_xla_gradient_step(model)
        assert model.jit_compile is False
    x, y = _data()
    return model.fit(x[:8 * steps], y[:8 * steps], batch_size=8, epochs=1,
                     shuffle=False, verbose=0)


@pytest.mark.parametrize("kind", ["new", "legacy"])
def test_xla_gradient_step_matches_keras_step(kind):
    reference, xla = _tiny_model(1), _tiny_model(2)
    xla.set_weights(reference.get_weights())
    _fit(reference, OPTIMIZERS[kind](), xla_step=False)
    reducer = _Reducer(1.0)
    _fit(xla, _reducing(OPTIMIZERS[kind](), reducer), xla_step=True)
    assert int(reducer.calls.numpy()) == 3
    for a, b in zip(reference.get_weights(), xla.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_xla_gradient_step_applies_the_reduced_gradients():
    """Zero gradients after the reduction: BN statistics move (the forward
    pass ran), the trainable weights do not."""
    model = _tiny_model(3)
    start = [w.numpy().copy() for w in model.weights]
    _fit(model, _reducing(keras.optimizers.SGD(0.5), _Reducer(0.0)), True)
    moved = {w.name: not np.array_equal(s, w.numpy())
             for s, w in zip(start, model.weights)}
    assert not any(moved[w.name] for w in model.trainable_weights), moved
    assert any(moved[w.name] for w in model.non_trainable_weights), moved


def test_xla_gradient_step_with_loss_scaling():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = _tiny_model(4)
        start = [w.numpy().copy() for w in model.trainable_weights]
        reducer = _Reducer(1.0)
        opt = keras.mixed_precision.LossScaleOptimizer(
            _reducing(keras.optimizers.SGD(0.1), reducer))
        history = _fit(model, opt, xla_step=True)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert np.isfinite(history.history["loss"][0])
    assert int(reducer.calls.numpy()) == 3
    assert all(not np.array_equal(s, w.numpy())
               for s, w in zip(start, model.trainable_weights))


def test_xla_gradient_step_compiles_the_forward_pass():
    """A forward op XLA cannot compile fails the step: it is under XLA."""
    keras.utils.set_random_seed(5)
    model = keras.Sequential([
        keras.layers.Dense(3, input_shape=(8,)),
        keras.layers.Lambda(lambda t: t + tf.stop_gradient(tf.ensure_shape(
            tf.numpy_function(lambda a: a, [t], tf.float32,
                              stateful=False), t.shape)))])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="unsupported operations.*XLA_CPU_JIT"):
        _fit(model, _reducing(keras.optimizers.SGD(0.1), _Reducer(1.0)),
             True, steps=1)


def test_xla_step_needs_a_horovod_optimizer():
    model = _tiny_model()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    with pytest.raises(TypeError, match="DistributedOptimizer"):
        hb.install_xla_gradient_step(model)


# ------------------------------------------------- the Horovod venv

@pytest.fixture(scope="module")
def venv():
    return horovod_venv()


def _run(venv, cmd, timeout=600, env=None):
    return subprocess.run(cmd, cwd=REPO, env=horovod_env(venv, env), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout)


@pytest.mark.multiworker
def test_broadcast_and_xla_step_for_every_optimizer_kind(venv):
    """Model and optimizer state equal to rank 0's after the broadcast, and
    still equal after XLA gradient steps, for new and legacy SGD, bare and
    loss-scaled (tests/support/horovod_ranks_check.py)."""
    kinds = sorted(OPTIMIZERS)
    p = _run(venv, horovodrun(
        venv, os.path.join(TESTS, "support/horovod_ranks_check.py"), *kinds),
        timeout=300)
    assert p.returncode == 0, failure_text(p.stdout)
    for kind in kinds:
        assert f"RANKS OK {kind}" in p.stdout, failure_text(p.stdout)


def test_horovod_fit_keeps_batch_logs_as_tensors(venv, tmp_path):
    """The CallbackList model.fit builds in a Horovod run (rank 0, with
    checkpoints and TensorBoard) does not force numpy logs; with Horovod's
    BroadcastGlobalVariablesCallback added it would. The same run (mode
    train_and_eval, checkpoints and export on) shows the package supports
    the Horovod environment's TensorFlow too."""
    p = _run(venv, [os.path.join(venv, "bin", "python"),
                    os.path.join(TESTS,
                                 "support/horovod_fit_callbacks_check.py"),
                    str(tmp_path)], timeout=300)
    assert p.returncode == 0, failure_text(p.stdout)
    line = [l for l in p.stdout.splitlines() if l.startswith("CALLBACKS ")]
    assert line, failure_text(p.stdout)
    got = json.loads(line[0][len("CALLBACKS "):])
    assert "BroadcastGlobalVariablesCallback" not in got["names"]
    assert {"AverageMetrics", "TimeHistory"} <= set(got["names"])
    # training/checkpoints.py's subclass (a full disk as one line)
    assert any(n.endswith("ModelCheckpoint") for n in got["names"]), got
    assert got["calls_batch_hooks"] is True
    assert got["forces_numpy"] is False
    assert got["with_broadcast_callback_forces_numpy"] is True
    result = json.load(open(tmp_path / "result.json"))
    assert result["environment"]["tensorflow"].startswith("2.18")
    assert result["evaluation"]["accuracy"] >= 0.0
    assert os.path.exists(tmp_path / "saved_model" / "saved_model.pb")


XLA_PROBE = """
import horovod.tensorflow as hvd, tensorflow as tf
hvd.init()
f = tf.function(lambda x: hvd.allreduce(x, op=hvd.Sum), jit_compile=True)
try:
    f(tf.constant([1.0]))
    print("XLA ALLREDUCE RAN")
except tf.errors.InvalidArgumentError as e:
    print("XLA ALLREDUCE FAILED", str(e).splitlines()[0])
"""


def test_allreduce_inside_xla_fails_on_this_build(venv):
    """Why enable_xla compiles only forward and backward: on CPU a
    jit-compiled HorovodAllreduce has no XLA kernel, even with
    HOROVOD_ENABLE_XLA_OPS=1 (its XLA op is built for CUDA/ROCm only)."""
    p = _run(venv, [os.path.join(venv, "bin", "python"), "-c", XLA_PROBE],
             timeout=300, env={"HOROVOD_ENABLE_XLA_OPS": "1"})
    assert p.returncode == 0, failure_text(p.stdout)
    assert "XLA ALLREDUCE FAILED" in p.stdout, failure_text(p.stdout)
    assert "HorovodAllreduce" in p.stdout
