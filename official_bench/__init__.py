"""official_bench: TensorFlow/Keras ResNet-50 v1.5 training benchmark.

    import official_bench
    cfg = official_bench.load_config(
        "configs/examples/resnet/imagenet/cpu_smoke.yaml",
        params_override="train.steps=10")
    result = official_bench.run(cfg)
    result.stats.average_examples_per_second

A run on the TensorFlow backend (the default) builds everything with
tf-keras (Keras 2; official_bench.runtime.keras_setup); with
runtime.backend: jax, with Keras 3 on JAX, and TensorFlow is never imported
(docs/backends.md).
"""

__version__ = "0.1.0"

_FROM_CONFIG = ("ConfigError", "ExperimentConfig")


def __getattr__(name):
    """ConfigError and ExperimentConfig come from config on first use, so
    that `python -m official_bench.launch` starts (and can say what is
    missing) under a Python without PyYAML."""
    if name in _FROM_CONFIG:
        from official_bench import config
        return getattr(config, name)
    raise AttributeError(f"module 'official_bench' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_FROM_CONFIG))


def load_config(config=None, params_override=None, **kwargs):
    """official_bench.config.load_config, its errors naming the API's
    arguments ("params_override", not the CLI's "--params_override")."""
    from official_bench import config as config_lib
    kwargs.setdefault("overrides_from", "load_config() arguments")
    return config_lib.load_config(config, params_override, **kwargs)


def run(config=None, **kwargs):
    """Trains and measures; see official_bench.trainer.run.

    Called before anything imported TensorFlow (a notebook's first cells),
    it first sets the CPU kernels the config asks for, as the CLI does:
    TensorFlow reads runtime.cpu_kernels' variable only when it loads.
    """
    import sys
    if "tensorflow" not in sys.modules:
        _apply_cpu_kernels(config, kwargs)
    from official_bench import trainer
    return trainer.run(config, **kwargs)


def _apply_cpu_kernels(config, kwargs) -> None:
    """runtime.cpu_kernels of the config trainer.run will load from the
    same arguments (a bad config is left for trainer.run to report)."""
    from official_bench import config as config_lib, trainer
    from official_bench.runtime import cpu_kernels
    try:
        cfg = trainer.run_config(config, **kwargs)
    except (config_lib.ConfigError, TypeError):
        return
    cpu_kernels.apply(cfg.runtime.cpu_kernels, cfg.runtime.num_gpus)


__all__ = ["ConfigError", "ExperimentConfig", "load_config", "run",
           "__version__"]
