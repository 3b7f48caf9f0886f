"""In-process training on synthetic data with a tiny model (CPU)."""

import contextlib
import json
import logging
import math
import os

import pytest
import yaml

import official_bench
from official_bench import config as C, trainer
from official_bench.runtime.keras_setup import keras
from official_bench.training.schedules import build_schedule
from support.helpers import DLPERF_REGEX, tiny


class _Messages(logging.Handler):
    """absl's records during a module fixture's run (absl_messages is per
    test)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _absl_messages():
    logger = logging.getLogger("absl")
    handler, level = _Messages(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.fixture(scope="module")
def fixed_batch_run():
    """One run that two tests read: the loss falling over 4 epochs of 3
    steps, and runtime.dataset_num_private_threads reaching every dataset
    the factory builds (recorded by a spy on per_replica_dataset)."""
    from official_bench.data import factory
    seen = []
    original = factory.per_replica_dataset

    def spy(*args, **kwargs):
        dataset = original(*args, **kwargs)
        seen.append(dataset.options().threading.private_threadpool_size)
        return dataset

    factory.per_replica_dataset = spy
    try:
        r = trainer.run(tiny(runtime={"seed": 3,
                                      "dataset_num_private_threads": 3},
                             train={"epochs": 4, "steps": 3},
                             model={"optimizer": {"name": "momentum"}}))
    finally:
        factory.per_replica_dataset = original
    return r, seen


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """tiny() (6 steps, log_steps 2) in mode train_and_eval with a 2-step
    evaluation, into a model_dir: its result, absl's records during it
    and the folder, for the throughput-line, result-file and evaluation
    tests."""
    model_dir = tmp_path_factory.mktemp("default_run")
    with _absl_messages() as messages:
        r = trainer.run(tiny(evaluation={"skip_eval": False, "steps": 2}),
                        model_dir=str(model_dir), mode="train_and_eval")
    return r, list(messages), model_dir


@pytest.fixture(scope="module")
def yaml_run(tmp_path_factory):
    """official_bench.run as in a notebook: a YAML path with an override
    (train.steps=5 with log_steps 100), absl's verbosity WARNING (nobody
    set it up). Its result, absl's records during it and the verbosity
    after it."""
    from absl import logging as absl_logging
    f = tmp_path_factory.mktemp("yaml_run") / "c.yaml"
    f.write_text(yaml.safe_dump(tiny()))
    with _absl_messages() as messages:
        before = absl_logging.get_verbosity()
        absl_logging.set_verbosity(absl_logging.WARNING)
        try:
            r = official_bench.run(str(f), params_override=(
                "train.steps=5,train.time_history.log_steps=100"))
            after = absl_logging.get_verbosity()
        finally:
            absl_logging.set_verbosity(before)
    return r, list(messages), after


def test_one_device_loss_finite_and_falling_on_fixed_batch(fixed_batch_run):
    r, _ = fixed_batch_run
    losses = r.history["loss"]
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]
    assert r.stats.num_replicas == 1
    assert r.stats.global_batch_size == 8
    assert r.stats.total_steps == 12
    # A notebook's repr is one line: what ran and how fast, not the config.
    assert repr(r) == (f"RunResult(model='resnet_cifar', strategy="
                       f"'one_device', replicas=1, "
                       f"{r.examples_per_second:.2f} img/s, "
                       f"result={r.result_path!r})")


def test_mirrored_over_two_cpu_devices():
    r = trainer.run(tiny(runtime={"distribution_strategy": "mirrored",
                                  "cpu_devices": 2}))
    assert r.stats.num_replicas == 2
    assert r.stats.global_batch_size == 16  # 8 per replica x 2
    # The strategy's own devices are recorded, beside what was configured.
    assert r.environment["devices"] == [
        "/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/device:CPU:1"]
    assert r.environment["configured_devices"] == ["/cpu:0", "/cpu:1"]
    assert r.environment["replicas_per_worker"] == 2
    # setup_run's derived r2.3 key reaches both datasets (a new config).
    assert r.config.train_dataset.num_devices == 2
    assert r.config.validation_dataset.num_devices == 2
    assert all(math.isfinite(x) for x in r.history["loss"])


def test_global_batch_must_divide_replicas():
    cfg = tiny(runtime={"distribution_strategy": "mirrored",
                        "cpu_devices": 2},
               train_dataset={"batch_size": 9,
                              "use_per_replica_batch_size": False})
    with pytest.raises(C.ConfigError,
                       match="global batch 9 is not divisible by 2 replicas"):
        trainer.run(cfg)


@pytest.mark.parametrize("dtype,policy", [("bf16", "mixed_bfloat16"),
                                          ("fp16", "mixed_float16")])
def test_mixed_precision_on_cpu(dtype, policy):
    """fp16 with a fixed loss scale (runtime.loss_scale 128): the loss-scale
    optimizer, not dynamic, at that scale."""
    fixed = {"loss_scale": 128} if dtype == "fp16" else {}
    r = trainer.run(tiny(train_dataset={"dtype": dtype}, runtime=fixed))
    conv = r.model.get_layer("stem_conv")
    assert conv.dtype_policy.name == policy
    assert r.model.output.dtype == "float32"
    assert all(math.isfinite(x) for x in r.history["loss"])
    opt = r.model.optimizer
    is_lso = isinstance(opt, keras.mixed_precision.LossScaleOptimizer)
    assert is_lso == (dtype == "fp16")
    if is_lso:
        assert not opt.dynamic
        assert float(opt.loss_scale) == 128.0
    # The policy does not leak into the next run in this process.
    assert keras.mixed_precision.global_policy().name == "float32"


def test_fp16_skipped_steps_advance_the_schedule():
    """tf-keras counts a step the dynamic loss scale skips (non-finite
    gradients): N steps with k skipped end at iteration N, the scale halved
    k times. The JAX backend's step matches it (test_jax_step.py)."""
    import numpy as np

    from official_bench.runtime import precision
    steps, skipped = 6, (1, 4)
    precision.set_policy("float16")
    try:
        inputs = keras.Input((4,))
        hidden = keras.layers.Dense(5, activation="relu")(inputs)
        outputs = keras.layers.Dense(3, activation="softmax",
                                     dtype="float32")(hidden)
        model = keras.Model(inputs, outputs)
        opt = precision.wrap_optimizer(keras.optimizers.SGD(0.1), "float16",
                                       "dynamic")
        model.compile(opt, "sparse_categorical_crossentropy")
    finally:
        precision.reset_policy()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((steps * 8, 4)).astype("float32")
    for i in skipped:
        x[i * 8 + 3, 2] = np.inf
    y = rng.integers(0, 3, steps * 8)
    initial = float(opt.loss_scale)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert int(opt.iterations) == steps
    assert float(opt.loss_scale) == initial / 2 ** len(skipped)


def test_xla_on_one_device():
    r = trainer.run(tiny(runtime={"enable_xla": True}))
    assert r.model._jit_compile is True
    assert all(math.isfinite(x) for x in r.history["loss"])



def test_throughput_lines_match_dlperf_regex(default_run):
    r, absl_messages, _ = default_run
    assert r.config.train.steps == 6
    assert r.config.train.time_history.log_steps == 2
    lines = [m for m in absl_messages if "TimeHistory" in m]
    assert len(lines) == 3
    assert [l.split("between steps ")[1] for l in lines] == \
        ["0 and 2", "2 and 4", "4 and 6"]
    rates = [float(DLPERF_REGEX.search(l).group(1)) for l in lines]
    assert rates == pytest.approx(
        [i.examples_per_second for i in r.stats.intervals], abs=0.01)
    # Warm-up defaults to the first interval: stats use the last two.
    assert r.stats.average_examples_per_second == pytest.approx(
        sum(i.examples_per_second for i in r.stats.intervals[1:]) / 2)
    finished = [m for m in absl_messages
                if "official_bench: run finished" in m]
    assert len(finished) == 1


def test_result_json_and_params_yaml(default_run):
    r, _, tmp_path = default_run
    data = json.load(open(tmp_path / "result.json"))
    assert data["schema"] == "official_bench.result/1"
    env = data["environment"]
    for key in ("python", "tensorflow", "tf_keras", "hostname", "gpu_names",
                "cuda_version", "cudnn_version", "num_workers",
                "num_replicas", "devices"):
        assert key in env
    assert env["tf_keras"] == keras.__version__
    stats = data["stats"]
    assert stats["global_batch_size"] == 8
    assert len(stats["intervals"]) == 3
    assert stats["average_examples_per_second"] == pytest.approx(
        r.stats.average_examples_per_second)
    # Total counts BN's moving statistics, trainable only what SGD updates.
    model = data["model"]
    assert model["trainable_parameters"] == sum(
        int(w.shape.num_elements()) for w in r.model.trainable_weights)
    assert model["parameters"] == r.model.count_params() > \
        model["trainable_parameters"]
    # params.yaml is the resolved config and loads back to the same thing.
    again = C.load_config(str(tmp_path / "params.yaml"))
    assert again == r.config
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_train_and_eval_reports_validation_metrics(default_run):
    r, absl_messages, _ = default_run
    assert set(r.evaluation) == {"loss", "accuracy", "top_5_accuracy"}
    assert 0.0 <= r.evaluation["accuracy"] <= 1.0
    # The line says how many images the evaluation covered, as on JAX.
    batch = r.config.validation_dataset.batch_size
    said = [m for m in absl_messages if "official_bench: evaluation:" in m]
    assert said == [f"official_bench: evaluation: {2 * batch} images "
                    f"(2 steps of {batch}), accuracy "
                    f"{r.evaluation['accuracy']:.4f}, loss "
                    f"{r.evaluation['loss']:.4f}, top_5_accuracy "
                    f"{r.evaluation['top_5_accuracy']:.4f}"]


def test_twice_in_one_process_and_package_api(yaml_run):
    """The first run is yaml_run's (official_bench.run too)."""
    cfg = official_bench.load_config(params_override="train.steps=2")
    assert cfg.train.steps == 2
    first, _, _ = yaml_run
    second = official_bench.run(tiny(model={"model_params": {"depth": 14}},
                                     train={"steps": 4}))
    assert first.model.name == "resnet8_cifar"
    assert second.model.name == "resnet14_cifar"
    assert second.stats.total_steps == 4
    assert len(second.stats.intervals) == 2  # fresh callback, fresh counts


def test_api_accepts_a_yaml_path_with_overrides(yaml_run):
    assert yaml_run[0].stats.total_steps == 5


def test_horovod_missing_gives_install_hint():
    pytest.importorskip("tensorflow")  # always there; Horovod is not
    try:
        import horovod.tensorflow.keras  # noqa: F401
        pytest.skip("Horovod is installed in this environment")
    except ImportError:
        pass
    with pytest.raises(C.ConfigError, match="make horovod"):
        trainer.run(tiny(runtime={"distribution_strategy": "horovod"}))


def test_parameter_server_needs_ps_tasks():
    with pytest.raises(C.ConfigError, match="needs ps and worker tasks"):
        trainer.run(tiny(runtime={"distribution_strategy":
                                  "parameter_server"}))


def test_more_gpus_than_visible_is_an_error():
    with pytest.raises(C.ConfigError, match="num_gpus is 4 but 0 GPU") as e:
        trainer.run(tiny(runtime={"num_gpus": 4}))
    assert "fix: " in str(e.value)


def test_no_gpu_error_names_the_cause(tmp_path, monkeypatch):
    """With a driver that lists a GPU but TensorFlow seeing none, the error
    blames TensorFlow's side (wheel or CUDA libraries), not the driver."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, NVIDIA A100-SXM4-40GB, 550.54.15, "
                   "8.0'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(C.ConfigError) as e:
        trainer.run(tiny(runtime={"num_gpus": 1}))
    msg = str(e.value)
    assert "no NVIDIA driver" not in msg
    assert "tensorflow[and-cuda]" in msg, msg


def test_nccl_on_cpu_is_an_error():
    with pytest.raises(C.ConfigError, match="needs GPUs"):
        trainer.run(tiny(runtime={"distribution_strategy": "mirrored",
                                  "all_reduce_alg": "nccl"}))


def test_piecewise_schedule_scales_by_global_batch():
    cfg = C.load_config(params_override=(
        "model.learning_rate.initial_lr=0.256,"
        "model.learning_rate.examples_per_epoch=5120,"
        "model.learning_rate.warmup_epochs=1,"
        "model.learning_rate.boundaries=[2],"
        "model.learning_rate.multipliers=[1.0,0.1]"))
    s = build_schedule(cfg.model.learning_rate, global_batch=512,
                       total_steps=100)
    # 10 steps per epoch; peak 0.256 * 512 / 256 = 0.512.
    assert float(s(0)) == 0.0
    assert float(s(5)) == pytest.approx(0.256)
    assert float(s(10)) == pytest.approx(0.512)
    assert float(s(19)) == pytest.approx(0.512)
    assert float(s(20)) == pytest.approx(0.0512)


def test_cosine_and_exponential_schedules():
    cfg = C.load_config(params_override=(
        "model.learning_rate.name=cosine_with_warmup,"
        "model.learning_rate.warmup_epochs=0,"
        "model.learning_rate.examples_per_epoch=2560,"
        "model.learning_rate.initial_lr=0.1"))
    s = build_schedule(cfg.model.learning_rate, 256, total_steps=10)
    assert float(s(0)) == pytest.approx(0.1)
    assert float(s(5)) == pytest.approx(0.05)
    assert float(s(10)) == pytest.approx(0.0, abs=1e-7)
    cfg = C.load_config(params_override=(
        "model.learning_rate.name=exponential,"
        "model.learning_rate.warmup_epochs=0,"
        "model.learning_rate.decay_epochs=1,"
        "model.learning_rate.decay_rate=0.5,"
        "model.learning_rate.staircase=true,"
        "model.learning_rate.examples_per_epoch=2560"))
    s = build_schedule(cfg.model.learning_rate, 256, total_steps=100)
    assert float(s(9)) == pytest.approx(0.1)
    assert float(s(10)) == pytest.approx(0.05)


@pytest.mark.parametrize("name,cls", [("momentum", "SGD"), ("sgd", "SGD"),
                                      ("rmsprop", "RMSprop"),
                                      ("adam", "Adam")])
def test_optimizers(name, cls):
    from official_bench.training.optimizers import build_optimizer
    cfg = C.load_config(params_override=f"model.optimizer.name={name},"
                                        "model.optimizer.nesterov=true")
    opt = build_optimizer(cfg.model.optimizer, 0.1, keras)
    assert type(opt).__name__ == cls
    if name == "momentum":
        assert opt.nesterov and opt.momentum == 0.9


def test_dataset_private_threads_reach_the_pipeline(fixed_batch_run):
    _, seen = fixed_batch_run
    assert seen and all(n == 3 for n in seen)


def test_steps_per_loop_keeps_timehistory_in_steps(absl_messages):
    r = trainer.run(tiny(train={"epochs": 2, "steps": 6, "steps_per_loop": 3,
                                "time_history": {"log_steps": 3}}))
    assert int(r.model._steps_per_execution.numpy()) == 3
    lines = [m for m in absl_messages if "TimeHistory" in m]
    assert [l.split("between steps ")[1] for l in lines] == \
        ["0 and 3", "3 and 6", "6 and 9", "9 and 12"]
    assert r.stats.total_steps == 12
    assert len(r.history["loss"]) == 2


def test_set_epoch_loop_runs_one_loop_per_epoch():
    r = trainer.run(tiny(train={"steps": 6, "set_epoch_loop": True,
                                "time_history": {"log_steps": 6}}))
    assert int(r.model._steps_per_execution.numpy()) == 6
    with pytest.raises(C.ConfigError, match="log_steps 4 is not a multiple "
                       "of the 6 steps of one loop"):
        trainer.run(tiny(train={"steps": 6, "set_epoch_loop": True,
                                "time_history": {"log_steps": 4}}))


def test_log_steps_must_be_a_multiple_of_steps_per_loop():
    with pytest.raises(C.ConfigError, match="log_steps.*5 is not a multiple "
                       "of train.steps_per_loop 2"):
        C.load_config(params_override="train.steps_per_loop=2,"
                      "train.time_history.log_steps=5")


def test_notebook_short_run_reports_and_logs_without_set_up(yaml_run):
    """train.steps=5 with log_steps 100: stats from the whole run, and the
    summary reaches the log although nobody set absl's verbosity."""
    from absl import logging as absl_logging
    r, messages, after = yaml_run
    assert after == absl_logging.WARNING
    assert r.stats.basis == "whole_run"
    assert r.stats.average_examples_per_second > 0
    assert any("over the whole run, warm-up included" in m
               for m in messages)
