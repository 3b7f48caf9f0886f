"""Config: defaults, YAML layers, params_override forms, strict errors."""

import os

import pytest
import yaml

from official_bench import config as C
from support.helpers import DLPERF_CONFIGS, DLPERF_NAMES, EXAMPLES, fixture_set

DLPERF_FILES = fixture_set(DLPERF_CONFIGS, required=DLPERF_NAMES)
EXAMPLE_FILES = fixture_set(EXAMPLES, required=("cpu_smoke.yaml", "gpu.yaml"))


def test_dlperf_yamls_are_the_six_and_inside_the_repository():
    assert [os.path.basename(p) for p in DLPERF_FILES] == sorted(DLPERF_NAMES)
    repo = os.path.abspath(
        os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    for path in DLPERF_FILES:
        assert os.path.realpath(path).startswith(repo + os.sep)
        assert "Oneflow-Inc/DLPerf" in open(path).read(600)


def test_fixture_set_refuses_an_empty_or_incomplete_set(tmp_path):
    with pytest.raises(FileNotFoundError, match="empty"):
        fixture_set(str(tmp_path))
    (tmp_path / "gpu.yaml").write_text("{}")
    with pytest.raises(FileNotFoundError, match="missing gpu_fp16.yaml"):
        fixture_set(str(tmp_path), required=("gpu.yaml", "gpu_fp16.yaml"))


@pytest.mark.parametrize("path", DLPERF_FILES, ids=os.path.basename)
def test_dlperf_yaml_loads_unchanged(path):
    raw = yaml.safe_load(open(path))
    cfg = C.load_config(path)
    assert cfg.runtime.distribution_strategy == \
        raw["runtime"]["distribution_strategy"]
    assert cfg.train_dataset.batch_size == raw["train_dataset"]["batch_size"]
    assert cfg.train.steps == 600
    assert cfg.model.optimizer.momentum == 0.875
    assert cfg.model.loss.label_smoothing == 0.1
    assert cfg.model.learning_rate.name == "piecewise_constant_with_warmup"
    # fp16 files select mixed float16.
    want = "float16" if "fp16" in path else "float32"
    assert C.compute_dtype(cfg) == want


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=os.path.basename)
def test_example_yamls_load_and_start_with_a_comment(path):
    C.load_config(path)
    first = open(path).readline()
    assert first.startswith("#")
    text = open(path).read()
    assert "Run:" in text and "Hardware:" in text and "Expect:" in text


def test_defaults_are_model_garden_values():
    cfg = C.load_config()
    assert cfg.model.name == "resnet"
    assert cfg.model.model_params.depth == 50
    assert cfg.model.model_params.num_classes == 1000
    assert cfg.train_dataset.image_size == 224
    assert cfg.train_dataset.use_per_replica_batch_size is True
    assert cfg.train.time_history.log_steps == 100
    # Warm-up defaults to the first interval.
    assert cfg.train.time_history.warmup_steps == 100


def test_layering_order_file_then_override_then_flags(tmp_path):
    f = tmp_path / "a.yaml"
    f.write_text("train:\n  steps: 10\n  epochs: 3\nruntime:\n  num_gpus: 4\n")
    cfg = C.load_config(str(f), params_override="train.steps=20",
                        overrides={"runtime": {"num_gpus": 0}})
    assert cfg.train.steps == 20  # override beats file
    assert cfg.train.epochs == 3  # file beats defaults
    assert cfg.runtime.num_gpus == 0  # flags beat everything


@pytest.mark.parametrize("text", [
    "train.steps=7,runtime.num_gpus=0",
    "{train: {steps: 7}, runtime: {num_gpus: 0}}",
    '{"train": {"steps": 7}, "runtime": {"num_gpus": 0}}',
    "train:\n  steps: 7\nruntime:\n  num_gpus: 0\n",
])
def test_params_override_forms(text):
    cfg = C.load_config(params_override=text)
    assert cfg.train.steps == 7 and cfg.runtime.num_gpus == 0


def test_params_override_yaml_file(tmp_path):
    f = tmp_path / "o.yaml"
    f.write_text("train:\n  steps: 9\n")
    assert C.load_config(params_override=str(f)).train.steps == 9


def test_params_override_takes_a_path_and_names_a_wrong_type(tmp_path):
    f = tmp_path / "o.yaml"
    f.write_text("train:\n  steps: 9\n")
    assert C.load_config(params_override=f).train.steps == 9
    assert C.load_config(params_override=[f, "train.epochs=2"]).train.steps \
        == 9
    assert C.load_config(params_override=[None, f]).train.steps == 9
    for wrong in (5, ["train.steps=3", b"train.steps=4"]):
        with pytest.raises(C.ConfigError, match="params_override: expected "
                           "a string, a path or a mapping"):
            C.load_config(params_override=wrong)


def test_params_override_lists_keep_their_commas():
    cfg = C.load_config(params_override=(
        "model.learning_rate.boundaries=[1,2],"
        "model.learning_rate.multipliers=[1.0,0.5,0.25]"))
    assert cfg.model.learning_rate.boundaries == [1, 2]
    assert cfg.model.learning_rate.multipliers == [1.0, 0.5, 0.25]


def test_dtype_aliases_normalised():
    cfg = C.load_config(params_override="train_dataset.dtype=bf16")
    assert cfg.train_dataset.dtype == "bfloat16"
    assert C.compute_dtype(cfg) == "bfloat16"
    cfg = C.load_config(params_override="runtime.mixed_precision_dtype=fp16")
    assert C.compute_dtype(cfg) == "float16"


def _error(**kwargs):
    with pytest.raises(C.ConfigError) as e:
        C.load_config(**kwargs)
    return str(e.value)


def test_unknown_key_names_path_and_file(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("runtime:\n  num_gpu: 1\n")
    msg = _error(config_file=str(f))
    assert "runtime.num_gpu: unknown key" in msg
    assert "num_gpus" in msg  # the valid keys are listed
    assert str(f) in msg


def test_wrong_type_names_key_and_source():
    msg = _error(params_override="model.optimizer.momentum=abc")
    assert "model.optimizer.momentum: expected float" in msg
    assert "--params_override" in msg


def test_bool_is_not_an_int():
    assert "train.steps: expected int" in _error(
        params_override="train.steps=true")


@pytest.mark.parametrize("override,expect", [
    ("runtime.distribution_strategy=mirored",
     "unknown strategy 'mirored'; valid: off, one_device, mirrored, "
     "multi_worker_mirrored"),
    ("train_dataset.batch_size=-3", "train_dataset.batch_size: must be > 0"),
    ("mode=trian", "unknown mode 'trian'"),
    ("model.model_params.depth=51", "unknown ResNet depth 51"),
    ("model.name=resnet_cifar,model.model_params.depth=21",
     "6n+2"),
    ("runtime.all_reduce_alg=ring", "all_reduce_alg for mirrored"),
    ("train_dataset.dtype=fp8", "unknown dtype 'fp8'"),
    ("model.optimizer.name=lamb", "unknown optimizer 'lamb'"),
    ("runtime.loss_scale=128", "applies to float16 training only"),
    ("runtime.loss_scale=big,train_dataset.dtype=fp16",
     "must be a number or 'dynamic'"),
    ("runtime.mixed_precision_dtype=bf16,train_dataset.dtype=fp16",
     "conflicts with train_dataset.dtype float16"),
    ("model.learning_rate.boundaries=[1],model.learning_rate.multipliers=[1]",
     "needs one more entry than boundaries"),
    ("runtime.worker_hosts=hostonly", "is not host:port"),
    ("runtime.tpu=local", "TPUs are not supported"),
    ("model.model_params.num_classes=10", "disagrees with "
                                          "train_dataset.num_classes 1000"),
    ("train_dataset.one_hot=false,model.loss.label_smoothing=0.1",
     "needs one-hot labels"),
    ("model.loss.name=sparse_categorical_crossentropy",
     "does not match train_dataset.one_hot True"),
    # The evaluation failed on the label shapes after the whole training.
    ("train_dataset.one_hot=false", "train_dataset.one_hot: False, but "
     "validation_dataset.one_hot is True: the loss and accuracy read one "
     "label format for both sets"),
])
def test_invalid_values_are_rejected(override, expect):
    msg = _error(params_override=override)
    assert expect in msg
    assert "(from --params_override" in msg


def test_one_hot_may_differ_where_nothing_evaluates():
    for override in ("evaluation.skip_eval=true", "mode=train"):
        cfg = C.load_config(params_override="train_dataset.one_hot=false,"
                            + override)
        assert cfg.validation_dataset.one_hot is True


def test_all_problems_reported_at_once():
    msg = _error(params_override="train.steps=0,train.epochs=-1,"
                                 "runtime.num_packs=0")
    assert "train.steps" in msg and "train.epochs" in msg
    assert "runtime.num_packs" in msg


def test_missing_config_file_named():
    assert "does-not-exist.yaml" in _error(config_file="does-not-exist.yaml")


def test_params_override_missing_yaml_file_named():
    assert "nope.yaml" in _error(params_override="nope.yaml")


def test_bad_yaml_named(tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text("runtime: [unclosed\n")
    assert "broken.yaml" in _error(config_file=str(f))


def test_a_directory_as_config_file_is_named_a_directory(tmp_path):
    assert _error(config_file=str(tmp_path)) == (
        f"config file {str(tmp_path)!r} is a directory, not a YAML file")


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path):
    """YAML keeps the last of two equal keys silently (train.steps 5 here:
    the first `train:` block vanished)."""
    f = tmp_path / "twice.yaml"
    f.write_text("train:\n  epochs: 2\nruntime:\n  num_gpus: 1\n"
                 "train:\n  steps: 5\n")
    assert _error(config_file=str(f)) == (
        f"config file {str(f)!r}: key 'train' is given twice, on lines 1 "
        "and 5 (YAML would keep the last); remove one")
    f.write_text("train:\n  steps: 4\n  epochs: 1\n  steps: 5\n")
    assert "key 'train.steps' is given twice, on lines 2 and 4" in \
        _error(config_file=str(f))
    # --params_override's YAML/JSON text and a dotted value, the same rule
    assert _error(params_override='{"train": {"steps": 4, "steps": 5}}') \
        .startswith("--params_override: key 'train.steps' is given twice, "
                    "on lines 1 and 1")
    assert "key 'a' is given twice" in _error(
        params_override="train.steps={a: 1, a: 2}")
    # a --params_override file is named as that, not as the config file
    # (peers 14)
    f.write_text("train:\n  steps: 4\n  steps: 5\n")
    assert _error(params_override=str(f)) == (
        f"--params_override file {str(f)!r}: key 'train.steps' is given "
        "twice, on lines 2 and 3 (YAML would keep the last); remove one")


def test_keys_a_merge_brings_in_may_be_overridden(tmp_path):
    f = tmp_path / "merge.yaml"
    f.write_text("base: &b {steps: 4, epochs: 1}\ntrain:\n  <<: *b\n"
                 "  steps: 7\n")
    assert C.read_yaml_file(str(f))["train"] == {"steps": 7, "epochs": 1}


def test_resolved_config_round_trips_through_yaml(tmp_path):
    cfg = C.load_config(os.path.join(DLPERF_CONFIGS, "gpu_fp16.yaml"))
    f = tmp_path / "params.yaml"
    f.write_text(cfg.to_yaml())
    again = C.load_config(str(f))
    assert again == cfg


def test_a_loaded_config_as_a_layer_leaves_derived_values_derived():
    # run(cfg, params_override=...): what load_config filled in (classes,
    # loss, depth, warm-up, epoch size) follows the layers over cfg.
    cfg = C.load_config(params_override="train.time_history.log_steps=10")
    again = C.load_config(cfg)
    assert again == cfg
    cfg = C.load_config(cfg, params_override=(
        "train.time_history.log_steps=5,train_dataset.num_classes=10,"
        "train_dataset.num_examples=1000,train_dataset.one_hot=false,"
        "validation_dataset.one_hot=false,model.name=resnet_cifar"))
    assert cfg.train.time_history.warmup_steps == 5
    assert cfg.model.num_classes == cfg.model.model_params.num_classes == 10
    assert cfg.model.learning_rate.examples_per_epoch == 1000
    assert cfg.model.loss.name == "sparse_categorical_crossentropy"
    assert cfg.model.model_params.depth == 20
    # ... also through replace_keys, which derives a copy.
    copy = C.replace_keys(again, {"train.steps": 3})
    cfg = C.load_config(copy, "train.time_history.log_steps=5")
    assert cfg.train.time_history.warmup_steps == 5
    assert cfg.train.steps == 3


def test_a_set_value_of_a_loaded_config_stays_set():
    cfg = C.load_config(params_override="train.time_history.warmup_steps=7")
    cfg = C.load_config(cfg, "train.time_history.log_steps=5")
    assert cfg.train.time_history.warmup_steps == 7


def test_base_config_presets():
    cfg = C.load_config(model_type="resnet_cifar", dataset="cifar10")
    assert cfg.model.name == "resnet_cifar"
    assert cfg.model.model_params.depth == 20
    assert cfg.train_dataset.image_size == 32
    assert cfg.model.model_params.num_classes == 10
    with pytest.raises(C.ConfigError, match="valid: resnet, resnet_cifar"):
        C.load_config(model_type="efficientnet")


@pytest.mark.parametrize("cores,gpus,want", [(80, 8, 56), (16, 8, 1),
                                             (96, 8, 64), (8, 1, 5)])
def test_private_input_threads_derived_for_gpu_private(cores, gpus, want):
    from official_bench.runtime import devices
    rt = C.load_config(os.path.join(EXAMPLES, "gpu.yaml"),
                       params_override=f"runtime.num_gpus={gpus}").runtime
    assert rt.gpu_thread_mode == "gpu_private"
    assert devices.dataset_private_threads(rt, cores) == want
    explicit = C.replace_keys(rt, {"dataset_num_private_threads": 3})
    assert devices.dataset_private_threads(explicit, cores) == 3  # it wins
    unset = C.replace_keys(rt, {"dataset_num_private_threads": None,
                                "gpu_thread_mode": None})
    assert devices.dataset_private_threads(unset, cores) is None


def test_ipv6_worker_hosts_accepted_and_bare_ipv6_rejected():
    cfg = C.load_config(params_override="runtime.distribution_strategy="
                        "multi_worker_mirrored,runtime.worker_hosts="
                        "'[::1]:5000,[::1]:5001'")
    assert cfg.runtime.worker_hosts == "[::1]:5000,[::1]:5001"
    msg = _error(params_override="runtime.worker_hosts='::1:5000'")
    assert "runtime.worker_hosts" in msg and "[address]:port" in msg
    msg = _error(params_override="runtime.worker_hosts='h:1,h:70000'")
    assert "'h:70000' is not host:port or [IPv6]:port" in msg
    assert "bad port '70000'" in msg


def test_an_empty_worker_host_entry_is_refused_by_the_config_and_cluster():
    # The config check, the trainer's cluster and the launcher split one way.
    from official_bench.runtime.cluster import parse_hosts
    msg = _error(params_override="runtime.worker_hosts='h:1,,h:2'")
    assert "runtime.worker_hosts" in msg and "position 1 of" in msg
    with pytest.raises(C.ConfigError, match="position 1 of 'h:1,,h:2'"):
        parse_hosts("h:1,,h:2")
    assert parse_hosts("h:1 h:2") == ["h:1", "h:2"]


def test_a_key_set_twice_in_one_override_takes_the_last():
    # Model Garden's params_override does the same; scripts that append a
    # key to a base string rely on it (documented in docs/configuration.md).
    cfg = C.load_config(params_override="train.steps=1,train.steps=2")
    assert cfg.train.steps == 2


def test_a_key_set_in_two_layers_takes_the_later():
    cfg = C.load_config(params_override=["train.steps=1", "train.steps=2"])
    assert cfg.train.steps == 2
    assert C.load_config(params_override="train.steps=1,train.epochs=3"
                         ).train.epochs == 3
