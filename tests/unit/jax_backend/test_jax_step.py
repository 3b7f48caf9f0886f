"""jax_backend/step.py on two CPU devices: MirroredStrategy's semantics.

One child Python (JAX fixes its device count per process) trains tiny
Keras 3 models one step on a 2-device mesh and on a 1-device mesh, and
reports the weights; the tests compare them:
- gradients are averaged over replicas: without batch norm, a step over a
  batch split on 2 replicas is the step over the whole batch on one;
- batch norm uses each replica's own batch statistics: with BN, the
  2-replica step is the mean of the 1-replica steps on each half (plain
  SGD is linear in the gradient, BN's moving update in the statistics),
  and the moving variance is the per-replica one, not the whole batch's;
- the running sums: the epoch's loss is the mean of the step losses,
  accuracy the hits over every replica's images, images counted globally.
"""

import json

import numpy as np
import pytest

from support.helpers import keras3_child

MOMENTUM = 0.9  # the BN layer's
LR = 0.1


def _data(rng, n, shift):
    """n rows of 4 features; the two halves far apart (means +-shift), so
    per-replica and whole-batch BN statistics differ a lot."""
    x = rng.standard_normal((n, 4)).astype("float32")
    x[: n // 2] += shift
    x[n // 2:] -= shift
    return x


def _model(keras, bn):
    """The same weights every time (seeded initialisers; not
    keras.utils.set_random_seed, which imports TensorFlow where it is
    installed)."""
    def dense(units, name, activation, seed):
        return keras.layers.Dense(
            units, activation=activation, name=name,
            kernel_initializer=keras.initializers.GlorotUniform(seed=seed),
            bias_initializer=keras.initializers.RandomNormal(
                stddev=0.1, seed=seed + 1))
    inputs = keras.Input((4,))
    x = keras.layers.BatchNormalization(momentum=MOMENTUM, name="bn")(
        inputs) if bn else inputs
    x = dense(5, "hidden", "relu", 1)(x)
    outputs = dense(6, "out", "softmax", 3)(x)
    return keras.Model(inputs, outputs)


def _steps(jax, keras, bn, mesh, sparse=False):
    from official_bench.jax_backend import step as step_lib
    model = _model(keras, bn)
    optimizer = keras.optimizers.SGD(LR)
    optimizer.build(model.trainable_variables)
    loss = keras.losses.SparseCategoricalCrossentropy() if sparse else \
        keras.losses.CategoricalCrossentropy()
    steps = step_lib.build(jax, keras, model, optimizer, loss, mesh,
                           one_hot=not sparse)
    steps.state["sums"] = step_lib.replicated(jax, mesh,
                                              step_lib.zero_sums(jax))
    return model, loss, steps


def _put(jax, mesh, *arrays):
    from jax.sharding import NamedSharding, PartitionSpec
    sharding = NamedSharding(mesh, PartitionSpec("batch"))
    return [jax.device_put(a, sharding) for a in arrays]


def _values(tree):
    return [np.array(v, copy=True).tolist() for v in tree]


def _trainer(jax, keras, bn, mesh):
    """One step from the model's initial state, as often as asked: the
    step is compiled once per batch shape, the state made afresh (the step
    donates it)."""
    _, _, steps = _steps(jax, keras, bn, mesh)
    initial = jax.tree.map(lambda v: np.array(v, copy=True), steps.state)

    def one_step(x, y):
        state = jax.tree.map(jax.numpy.asarray, initial)
        state, _ = steps.train(state, *_put(jax, mesh, x, y))
        return {"trainable": _values(state["trainable"]),
                "non_trainable": _values(state["non_trainable"])}
    one_step.initial = _values(initial["trainable"])
    return one_step


def _running_sums(jax, keras, mesh, rng):
    """Three train steps and two eval steps of a BN-free model with sparse
    labels; each step's loss and hits computed again outside the step."""
    from official_bench.jax_backend import step as step_lib
    model, loss_fn, steps = _steps(jax, keras, False, mesh, sparse=True)

    def check(trainable, non_trainable, x, y):
        probs = np.asarray(model.stateless_call(trainable, non_trainable,
                                                x)[0])
        return (float(loss_fn(y, probs)),
                int((probs.argmax(-1) == y).sum()))
    out = {"train": [], "eval": []}
    for i in range(3):
        x, y = _data(rng, 8, 1.0), rng.integers(0, 6, 8).astype("int32")
        before = [np.array(v, copy=True) for v in steps.state["trainable"]]
        nt = [np.array(v, copy=True) for v in steps.state["non_trainable"]]
        out["train"].append(check(before, nt, x, y))
        steps.state, running = steps.train(steps.state,
                                           *_put(jax, mesh, x, y))
        out.setdefault("running", []).append(float(running))
    sums = steps.state["sums"]
    out["train_metrics"] = step_lib.epoch_metrics(sums, True, True)
    out["train_counts"] = [float(sums["steps"]), float(sums["images"])]
    state = steps.state
    eval_sums = step_lib.replicated(jax, mesh, step_lib.zero_sums(jax))
    for i in range(2):
        x, y = _data(rng, 8, 1.0), rng.integers(0, 6, 8).astype("int32")
        out["eval"].append(check(state["trainable"], state["non_trainable"],
                                 x, y))
        eval_sums = steps.evaluate(state["trainable"],
                                   state["non_trainable"],
                                   *_put(jax, mesh, x, y), eval_sums)
    out["eval_metrics"] = step_lib.epoch_metrics(eval_sums, True, False)
    out["eval_counts"] = [float(eval_sums["steps"]),
                          float(eval_sums["images"])]
    return out


def step_report():
    """In the child (2 CPU devices)."""
    import jax
    import keras
    from jax.sharding import Mesh
    devices = jax.devices()
    two = Mesh(np.array(devices[:2]), ("batch",))
    one = Mesh(np.array(devices[:1]), ("batch",))
    rng = np.random.default_rng(0)
    x = _data(rng, 8, 3.0)
    y = np.eye(6, dtype="float32")[rng.integers(0, 6, 8)]
    out = {"devices": len(devices), "x": x.tolist()}
    for bn in (False, True):
        on_two, on_one = (_trainer(jax, keras, bn, mesh)
                          for mesh in (two, one))
        out[f"bn={bn}"] = {"initial": on_two.initial, "two": on_two(x, y),
                           "one": on_one(x, y)}
        if bn:
            out[f"bn={bn}"]["halves"] = [on_one(x[:4], y[:4]),
                                         on_one(x[4:], y[4:])]
    out["sums"] = _running_sums(jax, keras, two, rng)
    print(json.dumps(out))


@pytest.fixture(scope="module")
def report():
    r = keras3_child(__file__, "step_report", cpu_devices=2)
    assert r["devices"] == 2
    return r


def _arrays(run, kind="trainable"):
    return [np.asarray(v) for v in run[kind]]


def test_gradients_are_averaged_over_replicas(report):
    r = report["bn=False"]
    two, one = _arrays(r["two"]), _arrays(r["one"])
    initial = [np.asarray(v) for v in r["initial"]]
    # the step moved the weights, so the comparison means something
    assert max(np.abs(o - i).max() for o, i in zip(one, initial)) > 1e-3
    for a, b in zip(two, one):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_batch_norm_statistics_are_per_replica(report):
    r = report["bn=True"]
    for kind in ("trainable", "non_trainable"):
        halves = [_arrays(h, kind) for h in r["halves"]]
        for a, h0, h1 in zip(_arrays(r["two"], kind), *halves):
            np.testing.assert_allclose(a, (h0 + h1) / 2, rtol=1e-5,
                                       atol=1e-6)
    # ... which is not the whole batch's step
    assert max(np.abs(a - b).max() for a, b in
               zip(_arrays(r["two"]), _arrays(r["one"]))) > 1e-3


def test_moving_statistics_average_the_replicas_batch_statistics(report):
    x = np.asarray(report["x"], dtype=np.float64)
    halves = (x[:4], x[4:])
    mean, var = _arrays(report["bn=True"]["two"], "non_trainable")
    per_replica_var = np.mean([h.var(axis=0) for h in halves], axis=0)
    np.testing.assert_allclose(mean, (1 - MOMENTUM) * x.mean(axis=0),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        var, MOMENTUM + (1 - MOMENTUM) * per_replica_var, rtol=1e-5)
    # The whole batch's variance (the halves 6 apart) would be far larger.
    whole = _arrays(report["bn=True"]["one"], "non_trainable")[1]
    np.testing.assert_allclose(
        whole, MOMENTUM + (1 - MOMENTUM) * x.var(axis=0), rtol=1e-5)
    assert (whole - var > 0.5).all()


def test_running_sums_give_the_epoch_means(report):
    s = report["sums"]
    losses = [loss for loss, _ in s["train"]]
    assert s["train_metrics"]["loss"] == pytest.approx(np.mean(losses),
                                                       rel=1e-5)
    # the running mean each step returns (what the clock and NaN check read)
    assert s["running"] == pytest.approx(
        [np.mean(losses[:k]) for k in (1, 2, 3)], rel=1e-5)
    hits = sum(h for _, h in s["train"])
    assert s["train_counts"] == [3.0, 24.0]  # global images, not per replica
    assert s["train_metrics"]["accuracy"] == pytest.approx(hits / 24)
    assert 0.0 <= s["train_metrics"]["top_5_accuracy"] <= 1.0
    assert s["train_metrics"]["top_5_accuracy"] >= \
        s["train_metrics"]["accuracy"]


def test_eval_sums_count_every_replica(report):
    s = report["sums"]
    assert s["eval_counts"] == [2.0, 16.0]
    assert s["eval_metrics"]["loss"] == pytest.approx(
        np.mean([loss for loss, _ in s["eval"]]), rel=1e-5)
    assert s["eval_metrics"]["accuracy"] == pytest.approx(
        sum(h for _, h in s["eval"]) / 16)
    assert set(s["eval_metrics"]) == {"loss", "accuracy"}
