"""The trainer command lines a check runs (doctor/commands.py)."""

from official_bench import config
from official_bench.contracts import dtypes
from official_bench.doctor import commands
from official_bench.doctor.commands import CPU_PROFILE, GPU_PROFILE
from support.doctor_facts import planned


def test_every_planned_run_is_a_valid_trainer_config():
    """The overrides of each run (GPU ones included) pass the trainer's own
    strict config check and mean what the check's name says."""
    specs = list(planned(8).values()) + list(planned(0).values())
    for spec in (s for s in specs if s.run):
        profile = CPU_PROFILE if spec.device == "cpu" else GPU_PROFILE
        pairs = commands.overrides(spec.run, profile)
        if spec.run.strategy == "multi_worker_mirrored":
            pairs += commands.worker_overrides(
                ["127.0.0.1:1", "127.0.0.1:2"], 1, 60)
        cfg = config.load_config(params_override=",".join(pairs))
        rt = cfg.runtime
        assert rt.distribution_strategy == spec.run.strategy
        assert rt.num_gpus == spec.run.num_gpus
        assert rt.enable_xla is spec.run.xla
        assert config.compute_dtype(cfg) == dtypes.tf_name(
            spec.run.dtype), spec.name
        assert cfg.model.model_params.data_format == spec.run.data_format
        assert cfg.train.steps == profile.steps
        assert cfg.train_dataset.builder == "synthetic"
    cpu = config.load_config(params_override=",".join(commands.overrides(
        planned(0)["cpu-mirrored-2dev"].run, CPU_PROFILE)))
    assert cpu.runtime.cpu_devices == 2 and cpu.model.name == "resnet_cifar"


def test_horovod_and_worker_commands():
    argv = commands.horovod_argv("/v", 8, "/m", ["a=1"])
    assert argv[:7] == ["/v/bin/horovodrun", "-np", "8", "-H", "localhost:8",
                        "--gloo", "/v/bin/python"]
    assert argv[-1] == "--params_override=a=1"
    env = commands.child_env({"TF_CONFIG": "{}", "A": "1"},
                             {"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert "TF_CONFIG" not in env and env["A"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"


def test_every_planned_jax_run_is_a_config_the_jax_backend_takes():
    """With runtime.backend=jax each run passes the config check (which
    refuses what JAX cannot run) and sets no TensorFlow-only knob, so the
    runs log no 'no effect here' line."""
    from official_bench.config import backends
    specs = list(planned(8, backend="jax").values()) + list(
        planned(0, backend="jax").values())
    runs = [s for s in specs if s.run and not s.skip]
    assert {s.kind for s in runs} == {"single", "mirrored", "multi_worker"}
    for spec in runs:
        profile = CPU_PROFILE if spec.device == "cpu" else GPU_PROFILE
        pairs = commands.overrides(spec.run, profile, backend="jax")
        if spec.run.strategy == "multi_worker_mirrored":
            pairs += commands.worker_overrides(
                ["127.0.0.1:1", "127.0.0.1:2"], 1, 60)
        cfg = config.load_config(params_override=",".join(pairs))
        assert cfg.runtime.backend == "jax", spec.name
        assert backends.refusals(cfg) == [] and \
            backends.ignored_keys(cfg) == [], spec.name
        assert config.compute_dtype(cfg) == dtypes.tf_name(spec.run.dtype)
    tf_pairs = commands.overrides(planned(0)["cpu-fp32-xla_off"].run,
                                  CPU_PROFILE)
    assert not any(p.startswith("runtime.backend") for p in tf_pairs)
