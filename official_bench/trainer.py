"""The training entry: config in, RunResult out.

The CLI, the run scripts and notebooks all come through here. `run` loads
the config; `train_and_evaluate` hands it to the backend it names
(`runtime.backend`): official_bench/train_tf.py (tf-keras and
tf.distribute, the default) or official_bench/train_jax.py (Keras 3 on
JAX), each reading top to bottom in labelled steps. TensorFlow-free, so a
JAX run starts where TensorFlow is not installed.

    from official_bench import trainer
    result = trainer.run("configs/examples/resnet/imagenet/cpu_smoke.yaml",
                         params_override="train.steps=20")
    print(result.stats.average_examples_per_second)
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from typing import Any, Dict, List, Mapping, Optional, Union

from absl import logging

from official_bench import config as config_lib
from official_bench.config import ExperimentConfig
from official_bench.measure.stats import ThroughputStats

# runtime.backend -> the module whose train_and_evaluate runs it.
BACKEND_MODULES = {"tensorflow": "official_bench.train_tf",
                   "jax": "official_bench.train_jax"}

ConfigLike = Union[ExperimentConfig, Mapping[str, Any], str, None]


@dataclasses.dataclass
class RunResult:
    """What a run gives back to a notebook or the CLI: its config,
    statistics, Keras history, evaluation, environment, files and model."""
    config: ExperimentConfig
    stats: Optional[ThroughputStats] = None
    history: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    evaluation: Dict[str, float] = dataclasses.field(default_factory=dict)
    environment: Dict[str, Any] = dataclasses.field(default_factory=dict)
    model_dir: Optional[str] = None
    result_path: Optional[str] = None
    model: Any = dataclasses.field(default=None, repr=False)
    # result.json's flops object (contracts/flops.py); None: not counted.
    flops: Optional[Dict[str, Any]] = dataclasses.field(default=None,
                                                        repr=False)

    @property
    def examples_per_second(self) -> Optional[float]:
        return self.stats.average_examples_per_second if self.stats else None

    @property
    def images_per_second_over_window(self) -> Optional[float]:
        """Images / time over the counted window (never above the mean of
        interval rates, examples_per_second)."""
        return self.stats.images_per_second_over_window if self.stats \
            else None

    @property
    def mfu(self) -> Optional[float]:
        """Model FLOPs utilisation in (0, 1]; None without a known peak."""
        return (self.flops or {}).get("mfu")

    def __repr__(self) -> str:
        """One line a notebook can read; the fields hold the rest."""
        rate = self.examples_per_second
        return (f"RunResult(model={self.config.model.name!r}, strategy="
                f"{self.config.runtime.distribution_strategy!r}, replicas="
                f"{self.stats.num_replicas if self.stats else None}, "
                + (f"{rate:.2f} img/s" if rate is not None else "no rate")
                + f", result={self.result_path!r})")


def run(config: ConfigLike = None, *, params_override=None,
        model_dir: Optional[str] = None, mode: Optional[str] = None,
        model_type: str = "resnet", dataset: str = "imagenet") -> RunResult:
    """Loads a config (object, dict or YAML path), trains, returns results.

    `params_override` is layered over `config` exactly as the CLI's
    --params_override; `model_dir` and `mode` win over both.
    """
    flags = {k: v for k, v in (("model_dir", model_dir), ("mode", mode))
             if v is not None}
    cfg = config_lib.load_config(config, params_override, flags,
                                 model_type=model_type, dataset=dataset,
                                 overrides_from="run() arguments")
    with _info_logging():
        return train_and_evaluate(cfg)


@contextlib.contextmanager
def _info_logging():
    """Progress, TimeHistory lines and the summary are absl INFO records,
    which absl hides until a program sets its verbosity; a notebook calling
    run() should see them without knowing that."""
    before = logging.get_verbosity()
    if before < logging.INFO:
        logging.set_verbosity(logging.INFO)
    try:
        yield
    finally:
        if before < logging.INFO:
            logging.set_verbosity(before)


def train_and_evaluate(cfg: ExperimentConfig) -> RunResult:
    """Runs one experiment described by a validated config (any mode) on
    the backend it names (runtime.backend)."""
    module = importlib.import_module(BACKEND_MODULES[cfg.runtime.backend])
    return module.train_and_evaluate(cfg)
