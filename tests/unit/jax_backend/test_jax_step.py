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


def _model(keras, bn, float32_output=False):
    """The same weights every time (seeded initialisers; not
    keras.utils.set_random_seed, which imports TensorFlow where it is
    installed). `float32_output`: the softmax in float32 under a mixed
    policy, as the suite's models have it."""
    def dense(units, name, activation, seed):
        return keras.layers.Dense(
            units, activation=activation, name=name,
            dtype="float32" if float32_output and name == "out" else None,
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

    def top5_hits(trainable, non_trainable, x, y):
        probs = np.asarray(model.stateless_call(trainable, non_trainable,
                                                x)[0])
        return int((np.argsort(-probs, -1)[:, :5] == y[:, None]).sum())
    out = {"train": [], "eval": []}
    for i in range(3):
        x, y = _data(rng, 8, 1.0), rng.integers(0, 6, 8).astype("int32")
        before = [np.array(v, copy=True) for v in steps.state["trainable"]]
        nt = [np.array(v, copy=True) for v in steps.state["non_trainable"]]
        out["train"].append(check(before, nt, x, y))
        out.setdefault("top5", []).append(top5_hits(before, nt, x, y))
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


SKIPPED = (1, 4)  # the fp16 steps whose batch holds an inf
FP16_STEPS = 6


def _fp16_run(jax, keras, mesh, rng, policy):
    """FP16_STEPS steps of a BN-free model under `policy`; the steps in
    SKIPPED get an inf in their batch (non-finite gradients). Float16 trains
    through precision.wrap_optimizer's loss scaling, as the trainer does."""
    from official_bench.jax_backend import precision, step as step_lib
    dtype = {"mixed_float16": "float16", "float32": "float32"}[policy]
    keras.config.set_dtype_policy(policy)
    try:
        model = _model(keras, False, float32_output=True)
        optimizer = precision.wrap_optimizer(keras, keras.optimizers.SGD(LR),
                                             dtype)
        optimizer.build(model.trainable_variables)
        steps = step_lib.build(jax, keras, model, optimizer,
                               keras.losses.CategoricalCrossentropy(), mesh,
                               one_hot=True)
    finally:
        keras.config.set_dtype_policy("float32")
    steps.state["sums"] = step_lib.replicated(jax, mesh,
                                              step_lib.zero_sums(jax))
    counter = step_lib.step_counter_index(optimizer)
    out = {"weights": []}
    for i in range(FP16_STEPS):
        x = _data(rng, 8, 1.0)
        if i in SKIPPED:
            x[3, 2] = np.inf
        y = np.eye(6, dtype="float32")[rng.integers(0, 6, 8)]
        steps.state, _ = steps.train(steps.state, *_put(jax, mesh, x, y))
        out["weights"].append(_values(steps.state["trainable"]))
    names = [v.path for v in optimizer.variables]
    values = {n: np.asarray(v).tolist()
              for n, v in zip(names, steps.state["optimizer"])
              if np.asarray(v).ndim == 0}
    out.update(names=names, scalars=values, counter=counter)
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
    out["fp16"] = {policy: _fp16_run(jax, keras, two,
                                     np.random.default_rng(5), policy)
                   for policy in ("mixed_float16", "float32")}
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
    # 6 classes: a label is in the top 5 unless it is the least likely
    assert s["train_metrics"]["top_5_accuracy"] == pytest.approx(
        sum(s["top5"]) / 24)
    assert s["train_metrics"]["top_5_accuracy"] > \
        s["train_metrics"]["accuracy"]


def test_eval_sums_count_every_replica(report):
    s = report["sums"]
    assert s["eval_counts"] == [2.0, 16.0]
    assert s["eval_metrics"]["loss"] == pytest.approx(
        np.mean([loss for loss, _ in s["eval"]]), rel=1e-5)
    assert s["eval_metrics"]["accuracy"] == pytest.approx(
        sum(h for _, h in s["eval"]) / 16)
    assert set(s["eval_metrics"]) == {"loss", "accuracy"}


def _scalar(run, suffix):
    names = [n for n in run["scalars"] if n.endswith(suffix)]
    assert len(names) == 1, (suffix, sorted(run["scalars"]))
    return run["scalars"][names[0]]


def test_fp16_skipped_steps_still_advance_the_schedule(report):
    """Keras 3's LossScaleOptimizer skips a step with non-finite gradients
    without counting it; tf-keras counts it (test_loss_scaling.py), so the
    step counts it too: N steps, k skipped, iteration N."""
    run = report["fp16"]["mixed_float16"]
    assert run["counter"] is not None
    counter_name = run["names"][run["counter"]]
    assert run["scalars"][counter_name] == FP16_STEPS
    assert report["fp16"]["float32"]["counter"] is None  # no loss scaling


def test_fp16_dynamic_loss_scale_halves_on_each_skipped_step(report):
    run = report["fp16"]["mixed_float16"]
    # Keras 3 starts at 2**15; each non-finite step halves it, and the
    # 2000-step growth period is never reached here.
    assert _scalar(run, "dynamic_scale") == 2.0 ** 15 / 2 ** len(SKIPPED)
    assert _scalar(run, "step_counter") == \
        FP16_STEPS - 1 - max(SKIPPED)  # finite steps since the last skip


def test_fp16_skipped_steps_leave_the_weights_and_others_match_fp32(report):
    """A skipped step changes no weight; the applied ones are the float32
    run's steps to float16's precision (the loss was scaled and the
    gradients unscaled, on both replicas)."""
    half = [[np.asarray(w) for w in ws]
            for ws in report["fp16"]["mixed_float16"]["weights"]]
    full = [[np.asarray(w) for w in ws]
            for ws in report["fp16"]["float32"]["weights"]]
    for i in SKIPPED:
        for a, b in zip(half[i], half[i - 1]):
            np.testing.assert_array_equal(a, b)
    last = FP16_STEPS - 1
    moved = max(np.abs(a - b).max() for a, b in zip(half[last], half[0]))
    assert moved > 1e-3
    for a, b in zip(half[0], full[0]):
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-3)


def test_only_float16_gets_loss_scaling():
    """bfloat16 has float32's exponent range: no loss scaling, whose
    skipped steps would change the run."""
    from types import SimpleNamespace

    from official_bench.jax_backend import precision
    keras = SimpleNamespace(optimizers=SimpleNamespace(
        LossScaleOptimizer=lambda inner: ("scaled", inner)))
    assert precision.wrap_optimizer(keras, "sgd", "float16") == \
        ("scaled", "sgd")
    for dtype in ("float32", "bfloat16"):
        assert precision.wrap_optimizer(keras, "sgd", dtype) == "sgd"
