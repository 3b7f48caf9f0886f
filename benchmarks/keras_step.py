"""The trainer's compiled Keras train step, outside `fit`, for benchmarks
that time or profile single steps (step_collectives, step_anatomy,
idle_gap): the same config layering, strategy, model, compile and input
pipeline a run would use (official_bench.trainer), so what they measure is
the step a run takes."""

from __future__ import annotations

# resnet_cifar depth 8 on 16x16 synthetic images, batch 16 per device: the
# netem test's model (tests/system/test_scaling_netem.py).
BATCH = 16
TINY = ("runtime.num_gpus=0,model.name=resnet_cifar,"
        "model.model_params.depth=8,train_dataset.builder=synthetic,"
        "train_dataset.image_size=16,train_dataset.num_classes=10,"
        f"train_dataset.batch_size={BATCH},evaluation.skip_eval=true,"
        "runtime.sample_period_seconds=0,train.steps=1000")


def compiled_step(params_override: str):
    """(model, Distribution, iterator) for `params_override` (dotted keys);
    `model.make_train_function()` is then the step fit would call."""
    from official_bench import config as config_lib
    from official_bench.allreduce.compute_wait import compiled_train_function
    from official_bench.runtime import precision
    from official_bench.training import setup
    cfg = config_lib.build_config([(
        "--params_override",
        config_lib.parse_params_override(params_override))])
    replica_devices, cluster = setup.prepare_runtime(cfg.runtime)
    dtype = config_lib.compute_dtype(cfg)
    policy = precision.set_policy(dtype)
    prep = setup.setup_run(cfg, cluster, replica_devices, dtype, policy)
    _, iterator = compiled_train_function(prep)
    return prep.model, prep.dist, iterator
