"""official_bench: TensorFlow/Keras ResNet-50 v1.5 training benchmark.

    import official_bench
    cfg = official_bench.load_config("configs/examples/resnet/imagenet/cpu_smoke.yaml",
                                     params_override="train.steps=10")
    result = official_bench.run(cfg)
    result.stats.average_examples_per_second

Importing this package selects tf-keras (Keras 2) for everything it builds;
see official_bench.runtime.keras_setup.
"""

from official_bench.config import (ConfigError, ExperimentConfig,
                                   load_config)

__version__ = "0.1.0"


def run(config=None, **kwargs):
    """Trains and measures; see official_bench.trainer.run."""
    from official_bench import trainer
    return trainer.run(config, **kwargs)


__all__ = ["ConfigError", "ExperimentConfig", "load_config", "run",
           "__version__"]
