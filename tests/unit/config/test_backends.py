"""config/backends.py: what runtime.backend jax refuses, in one line per
key naming what it runs; the TensorFlow-only keys it names and ignores;
the TensorFlow backend refuses none of it."""

import os

import pytest

from official_bench import config as C
from official_bench.config import backends
from support.helpers import DLPERF_CONFIGS, config_error_lines

# (override, the key refused, words of its line that say what jax runs).
REFUSED = [
    ("runtime.distribution_strategy=horovod",
     "runtime.distribution_strategy",
     "runtime.backend jax runs off, one_device, mirrored, "
     "multi_worker_mirrored"),
    ("runtime.distribution_strategy=parameter_server",
     "runtime.distribution_strategy",
     "runtime.backend jax runs off, one_device, mirrored, "
     "multi_worker_mirrored"),
    ("train_dataset.builder=tfds", "train_dataset.builder",
     "runtime.backend jax runs on synthetic, records, python data"),
    ("mode=train_and_eval,evaluation.skip_eval=false,"
     "validation_dataset.builder=tfds", "validation_dataset.builder",
     "runtime.backend jax runs on synthetic, records, python data (or set "
     "evaluation.skip_eval: true)"),
    ("train_dataset.builder=records,train_dataset.cache=true",
     "train_dataset.cache", "leave it at False with jax"),
    ("mode=eval", "mode", "runtime.backend jax runs train, train_and_eval"),
    ("mode=export_only", "mode",
     "runtime.backend jax runs train, train_and_eval"),
    ("train.resume_checkpoint=true", "train.resume_checkpoint",
     "leave it at False with jax"),
    ("train.callbacks.enable_checkpoint_and_export=true",
     "train.callbacks.enable_checkpoint_and_export",
     "leave it at False with jax"),
    ("train.callbacks.enable_tensorboard=true",
     "train.callbacks.enable_tensorboard", "leave it at False with jax"),
    ("runtime.profile_steps=[2,3]", "runtime.profile_steps",
     "leave it at None with jax"),
    ("runtime.run_eagerly=true", "runtime.run_eagerly",
     "leave it at False with jax"),
    ("train.steps_per_loop=2", "train.steps_per_loop",
     "leave it at 1 with jax"),
    ("train_dataset.transfer_uint8=true,"
     "validation_dataset.transfer_uint8=true", "train_dataset.transfer_uint8",
     "leave it at False with jax"),
    ("runtime.mixed_precision_dtype=float16,runtime.loss_scale=128",
     "runtime.loss_scale",
     "runtime.backend jax runs float16 with dynamic loss scaling only"),
]


def test_the_table_covers_every_refused_key():
    """A key added to JAX_REFUSED without a case here fails this test."""
    keys = {key for _, key, _ in REFUSED}
    assert {key for key, _, _ in backends.JAX_REFUSED} <= keys
    assert {"train_dataset." + key
            for key, _, _ in backends.JAX_DATASET_REFUSED} <= keys
    assert {"runtime.distribution_strategy", "train_dataset.builder",
            "validation_dataset.builder", "mode",
            "runtime.loss_scale"} <= keys


@pytest.mark.parametrize("override, key, runs", REFUSED,
                         ids=[o.split("=")[0] for o, _, _ in REFUSED])
def test_jax_refuses_with_the_key_and_what_it_runs(override, key, runs):
    lines = config_error_lines(
        "runtime.backend=jax,runtime.num_gpus=0," + override)
    ours = [l for l in lines if l.startswith(key + ":")]
    assert len(ours) == 1, lines
    line = ours[0]
    assert runs in line, line
    assert "runtime.backend tensorflow" in line or "only" in line, line
    assert "(from --params_override 'runtime.backend=jax" in line, line


@pytest.mark.parametrize("override, key, runs", REFUSED,
                         ids=[o.split("=")[0] for o, _, _ in REFUSED])
def test_tensorflow_refuses_none_of_it(override, key, runs):
    """The same settings on the default backend: no refusal (and no line
    that mentions a backend)."""
    try:
        cfg = C.load_config(params_override="runtime.num_gpus=0," + override)
    except C.ConfigError as e:  # pragma: no cover - the failure's message
        pytest.fail(f"tensorflow refused {override}: {e}")
    assert cfg.runtime.backend == "tensorflow"
    assert backends.refusals(cfg) == []
    assert backends.ignored_keys(cfg) == []


def test_skip_eval_lifts_the_validation_builder_refusal():
    cfg = C.load_config(params_override=(
        "runtime.backend=jax,runtime.num_gpus=0,mode=train_and_eval,"
        "evaluation.skip_eval=true,validation_dataset.builder=tfds"))
    assert backends.refusals(cfg) == []


@pytest.mark.parametrize("builder", ["records", "python"])
def test_jax_runs_records_and_python_sources(builder):
    source = ("official_bench.data.feeds.python_loader:synthetic_source"
              if builder == "python" else None)
    cfg = C.load_config(params_override={
        "runtime": {"backend": "jax", "num_gpus": 0},
        "mode": "train_and_eval",
        "train_dataset": {"builder": builder, "python_source": source},
        "validation_dataset": {"builder": builder, "python_source": source}})
    assert backends.refusals(cfg) == []
    # and the cache that only tf.data has is refused for either
    with pytest.raises(C.ConfigError, match="validation_dataset.cache: "
                       "True: tf.data's in-memory record cache needs "
                       "runtime.backend tensorflow"):
        C.load_config(params_override={
            "runtime": {"backend": "jax", "num_gpus": 0},
            "mode": "train_and_eval",
            "validation_dataset": {"builder": builder, "cache": True,
                                   "python_source": source}})


def test_refusals_are_all_reported_at_once():
    lines = config_error_lines("runtime.backend=jax,runtime.num_gpus=0,"
                         "runtime.distribution_strategy=horovod,mode=eval,"
                         "runtime.run_eagerly=true")
    assert {l.split(":")[0] for l in lines} >= {
        "runtime.distribution_strategy", "mode", "runtime.run_eagerly"}


@pytest.mark.parametrize("name", ["gpu_fp16.yaml", "multi_node_gpu.yaml"])
def test_dlperf_yaml_loads_on_jax_and_names_its_tensorflow_only_keys(name):
    """DLPerf's YAMLs as published, on synthetic data: accepted on jax;
    what only tunes TensorFlow is named, not dropped silently."""
    cfg = C.load_config(
        os.path.join(DLPERF_CONFIGS, name),
        "runtime.backend=jax,train_dataset.builder=synthetic,"
        "validation_dataset.builder=synthetic")
    assert cfg.runtime.backend == "jax"
    assert backends.refusals(cfg) == []
    ignored = backends.ignored_keys(cfg)
    if name == "gpu_fp16.yaml":
        assert ignored == ["runtime.batchnorm_spatial_persistent True"]
        assert cfg.train_dataset.dtype == "float16"
    else:  # sets all_reduce_alg, and batchnorm_spatial_persistent False
        assert ignored == ["runtime.all_reduce_alg 'nccl'"]
        assert cfg.runtime.distribution_strategy == "multi_worker_mirrored"


def test_ignored_keys_names_each_tensorflow_only_key_set():
    cfg = C.load_config(params_override=(
        "runtime.backend=jax,runtime.num_gpus=2,"
        "runtime.distribution_strategy=mirrored,runtime.enable_xla=true,"
        "runtime.gpu_thread_mode=gpu_private,runtime.per_gpu_thread_count=2,"
        "runtime.dataset_num_private_threads=4,"
        "runtime.batchnorm_spatial_persistent=true,"
        "runtime.all_reduce_alg=nccl,runtime.num_packs=2,"
        "runtime.collective_timeout_seconds=30"))
    named = [entry.split(" ")[0] for entry in backends.ignored_keys(cfg)]
    assert named == [key for key, _ in backends.TF_ONLY_TUNING]
    assert backends.refusals(cfg) == []


@pytest.mark.parametrize("value, expected", [("auto", "auto"), (3, 3)])
def test_num_workers_is_auto_or_a_count(value, expected):
    cfg = C.load_config(params_override={
        "runtime": {"backend": "jax", "num_gpus": 0},
        "train_dataset": {"builder": "records", "num_workers": value}})
    assert cfg.train_dataset.num_workers == expected
    assert C.load_config(params_override=(
        "runtime.backend=jax,train_dataset.builder=records,"
        "evaluation.skip_eval=true,train_dataset.num_workers=4")
    ).train_dataset.num_workers == 4


@pytest.mark.parametrize("value", ["many", 0, -2, 4096])
def test_a_bad_num_workers_is_refused_naming_the_choices(value):
    with pytest.raises(C.ConfigError, match=(
            r"train_dataset.num_workers: must be 'auto' or 1..1024, got "
            + repr(value).replace("'", "'?") + ".*\\(from params_override")):
        C.load_config(params_override={
            "train_dataset": {"builder": "records", "num_workers": value}})
