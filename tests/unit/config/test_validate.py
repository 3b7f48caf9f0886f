"""The config package on its own: TensorFlow-free, one layering function,
and the pure config checks that used to wait for run time.

runtime/distribute.py (num_packs, all_reduce_alg on CPU replicas),
runtime/devices.py (per_gpu_thread_count) and runtime/horovod_backend.py
(num_gpus with horovod) raised these after TensorFlow had started; they now
come from config loading, naming the key and the layer, so the launcher's
--dry-run and a bare load_config catch them.
"""

import json
import os
import subprocess
import sys

import pytest

from official_bench import config as C
from official_bench.launch import settings as settings_lib

REPO = os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# (override, the error line's start); each was a run-time error before.
MOVED = [
    ("runtime.distribution_strategy=multi_worker_mirrored,"
     "runtime.num_packs=2",
     "runtime.num_packs: is 2, but it applies to mirrored only"),
    ("runtime.distribution_strategy=mirrored,runtime.num_gpus=0,"
     "runtime.num_packs=4",
     "runtime.num_packs: is 4, but it applies to the nccl and "
     "hierarchical_copy all-reduce on GPUs"),
    ("runtime.distribution_strategy=mirrored,runtime.num_gpus=0,"
     "runtime.all_reduce_alg=nccl",
     "runtime.all_reduce_alg: 'nccl' needs GPUs (runtime.num_gpus > 0)"),
    ("runtime.distribution_strategy=horovod,runtime.num_gpus=2",
     "runtime.num_gpus: is 2 with horovod: Horovod runs one process per GPU; "
     "set runtime.num_gpus=1"),
    ("runtime.per_gpu_thread_count=2",
     "runtime.per_gpu_thread_count: needs runtime.gpu_thread_mode"),
]

# The same keys where they do apply: accepted.
ACCEPTED = [
    "runtime.distribution_strategy=mirrored,runtime.num_gpus=2,"
    "runtime.num_packs=4,runtime.all_reduce_alg=hierarchical_copy",
    "runtime.distribution_strategy=mirrored,runtime.num_gpus=1,"
    "runtime.all_reduce_alg=nccl",
    "runtime.distribution_strategy=multi_worker_mirrored,runtime.num_packs=1,"
    "runtime.all_reduce_alg=ring",
    "runtime.distribution_strategy=horovod,runtime.num_gpus=1",
    "runtime.distribution_strategy=horovod,runtime.num_gpus=0",
    "runtime.per_gpu_thread_count=2,runtime.gpu_thread_mode=gpu_private",
]


def _python(code):
    """Runs `code` in a fresh interpreter from the repository; its stdout."""
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def test_importing_config_does_not_import_tensorflow():
    out = _python(
        "import sys, json\n"
        "import official_bench.config\n"
        "from official_bench.config import (builder, layering, loading, "
        "schema, validate)\n"
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras'))))\n")
    assert json.loads(out) == []


@pytest.mark.parametrize("override, expect", MOVED)
def test_moved_check_is_a_config_error_naming_key_and_layer(override,
                                                            expect):
    with pytest.raises(C.ConfigError) as e:
        C.load_config(params_override=override)
    lines = [l.strip() for l in str(e.value).splitlines()]
    hit = [l for l in lines if l.startswith(expect)]
    assert hit, str(e.value)
    assert "(from --params_override 'runtime." in hit[0], hit


@pytest.mark.parametrize("override", ACCEPTED)
def test_the_same_keys_are_accepted_where_they_apply(override):
    C.load_config(params_override=override)


def test_a_horovod_knob_without_horovod_names_the_knob_and_its_layer():
    with pytest.raises(C.ConfigError) as e:
        C.load_config({"runtime": {"horovod": {"cycle_time_ms": 5}}},
                      "runtime.horovod.fp16_allreduce=true")
    assert str(e.value).splitlines()[1:] == [
        "  runtime.horovod.fp16_allreduce: Horovod knobs apply to "
        "distribution_strategy horovod only (from --params_override "
        "'runtime.horovod.fp16_allreduce=true')",
        "  runtime.horovod.cycle_time_ms: Horovod knobs apply to "
        "distribution_strategy horovod only (from config dict)"]


def test_moved_checks_refuse_without_tensorflow():
    """Every moved check refuses in a process that never loads TensorFlow."""
    out = _python(
        "import sys, json\n"
        "from official_bench import config\n"
        f"cases = {json.dumps([o for o, _ in MOVED])}\n"
        "refused = []\n"
        "for override in cases:\n"
        "    try:\n"
        "        config.load_config(params_override=override)\n"
        "    except config.ConfigError as e:\n"
        "        refused.append(str(e))\n"
        "print(json.dumps({'refused': refused,\n"
        "                  'tensorflow': 'tensorflow' in sys.modules}))\n")
    result = json.loads(out)
    assert result["tensorflow"] is False
    assert len(result["refused"]) == len(MOVED)
    for message, (_, expect) in zip(result["refused"], MOVED):
        assert expect in message


def test_launcher_dry_run_refuses_num_packs_with_multi_worker(tmp_path):
    """The launcher's plan loads each run's config: a two-node dry run with
    num_packs (multi_worker_mirrored) stops with exit 2 before anything
    starts, where the trainer used to stop after TensorFlow started."""
    drop = {k.env for k in settings_lib.KNOBS} | {"TF_CONFIG"} | \
        set(settings_lib.SLURM_VARS)
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith("SLURM")}
    env.update(PYTHON=sys.executable, LOG_DIR=str(tmp_path / "logs"),
               MODEL_DIR=str(tmp_path / "model_dir"), SLEEP_SECONDS="0",
               DEVICE="cpu", TEST_NUM="1", TASK_INDEX="0",
               NODES="10.200.0.1:2222,10.200.0.2:2222",
               PARAMS_OVERRIDE="runtime.num_packs=2")
    p = subprocess.run(["bash", os.path.join(REPO, "run_two_node.sh"), "4",
                        "--dry-run"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "runtime.num_packs: is 2, but it applies to mirrored only" \
        in p.stderr
    assert not (tmp_path / "logs").exists()


def test_one_layering_function_names_each_layer():
    """layers_of is what load_config (the CLI, the launcher) and trainer.run
    layer with: config, then each params_override, then the overrides,
    each named as its errors will name it."""
    cfg = C.load_config(params_override="train.steps=3")
    layers = C.layers_of(cfg, ["train.steps=4", {"train": {"epochs": 2}}],
                         {"mode": "train"}, overrides_from="run() arguments")
    assert [source for source, _ in layers] == [
        "ExperimentConfig", "params_override 'train.steps=4'",
        "params_override dict", "run() arguments"]
    built = C.build_config(layers)
    assert (built.train.steps, built.train.epochs, built.mode) == \
        (4, 2, "train")
    with pytest.raises(C.ConfigError) as e:
        C.load_config({"train": {"steps": 3}}, overrides={"mode": "bogus"},
                      overrides_from="run() arguments")
    assert "mode: unknown mode 'bogus'" in str(e.value)
    assert "(from run() arguments)" in str(e.value)


def test_trainer_run_layers_through_load_config(monkeypatch):
    """trainer.run hands its config, params_override and keyword arguments
    to config.load_config (the one layering function) and trains what it
    returns."""
    from official_bench import trainer
    seen = {}

    def fake_load_config(*args, **kwargs):
        seen["args"], seen["kwargs"] = args, kwargs
        raise C.ConfigError("stop here")

    monkeypatch.setattr(C, "load_config", fake_load_config)
    with pytest.raises(C.ConfigError, match="stop here"):
        trainer.run({"train": {"steps": 3}}, params_override="train.steps=4",
                    model_dir="/tmp/x", mode="train")
    assert seen["args"][:3] == ({"train": {"steps": 3}}, "train.steps=4",
                                {"model_dir": "/tmp/x", "mode": "train"})
    assert seen["kwargs"]["overrides_from"] == "run() arguments"


def test_config_path_may_be_a_pathlike_and_empty_names_no_file(tmp_path):
    """As before the split: the CLI's empty --config_file= loads the
    defaults; a pathlib.Path is read like its string."""
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  steps: 11\n")
    assert C.load_config(f).train.steps == 11
    assert C.load_config("", params_override="train.steps=12").train.steps \
        == 12
    with pytest.raises(C.ConfigError) as e:
        C.load_config(tmp_path / "missing.yaml")
    assert "missing.yaml' does not exist" in str(e.value)


def test_a_params_override_naming_a_folder_says_so(tmp_path):
    """It was parsed as YAML text: 'must be a mapping ... got <path>'."""
    with pytest.raises(C.ConfigError) as e:
        C.load_config(params_override=str(tmp_path))
    assert f"--params_override {str(tmp_path)!r} is a folder; give a YAML " \
           "file, a mapping or a.b=value pairs" in str(e.value)


def test_run_model_type_wins_over_the_config_as_the_flag_does():
    """--model_type overrides a config file's model.name (flags layer);
    run(model_type=...) does the same, and leaves it alone when not given."""
    from official_bench import trainer
    given = {"model": {"name": "resnet"}}
    cfg = trainer.run_config(given, model_type="resnet_cifar",
                             dataset="cifar10")
    assert (cfg.model.name, cfg.train_dataset.image_size) == \
        ("resnet_cifar", 32)
    assert trainer.run_config({"model": {"name": "resnet_cifar"}}) \
        .model.name == "resnet_cifar"
    with pytest.raises(C.ConfigError, match="valid: resnet, resnet_cifar"):
        trainer.run_config(given, model_type="efficientnet")


def test_a_dotted_key_inside_a_mapping_is_told_how_to_nest():
    """{'train.steps': 3} is not split: the error says how to write it
    instead of calling a real key unknown; a dotted key that names no
    field keeps the list of valid keys."""
    with pytest.raises(C.ConfigError) as e:
        C.load_config(None, params_override={
            "train.steps": 3,
            "train": {"time_history.log_steps": 2, "bogus.x": 1}})
    text = str(e.value)
    assert ("train.steps: unknown key: a dotted key inside a mapping is "
            "not split; nest it as train: {steps: ...}, or give "
            "'train.steps=...' as a params_override string "
            "(from params_override dict)") in text
    assert "nest it as time_history: {log_steps: ...}, or give " \
        "'train.time_history.log_steps=...'" in text
    assert "train.bogus.x: unknown key; valid keys here: callbacks," in text


def test_an_unknown_key_names_the_nearest_valid_one():
    with pytest.raises(C.ConfigError) as e:
        C.load_config(None, params_override="train_dataset.num_worker=2,"
                      "train.stpes=3,model.zzz=1")
    text = str(e.value)
    assert "train_dataset.num_worker: unknown key; did you mean " \
        "'num_workers'? valid keys here: " in text
    assert "train.stpes: unknown key; did you mean 'steps'?" in text
    assert "model.zzz: unknown key; valid keys here: " in text  # none near


NCHW = "model.model_params.data_format=channels_first,runtime.num_gpus=0"


@pytest.mark.parametrize("extra, refused", [
    ("runtime.cpu_kernels=eigen", True),
    ("runtime.cpu_kernels=onednn", False),
    ("runtime.cpu_kernels=auto", False),  # the trainer asks TensorFlow
    ("runtime.cpu_kernels=eigen,mode=export_only", False),  # runs nothing
    ("runtime.cpu_kernels=eigen,runtime.backend=jax", False),
])
def test_channels_first_on_eigen_cpu_kernels_is_refused(extra, refused):
    """peers 8: Eigen's CPU pooling and convolutions take NHWC only; the
    run died at its first step with TensorFlow's traceback."""
    override = f"{NCHW},{extra}"
    if not refused:
        C.load_config(params_override=override)
        return
    with pytest.raises(C.ConfigError) as e:
        C.load_config(params_override=override)
    (line,) = str(e.value).splitlines()[1:]
    assert line.strip().startswith(
        "model.model_params.data_format: channels_first cannot run on the "
        "CPU with Eigen's kernels (runtime.cpu_kernels eigen): they take "
        "NHWC only; set model.model_params.data_format to channels_last or "
        "auto, or runtime.cpu_kernels to onednn (from --params_override")
