"""The training entry: config in, RunResult out.

The CLI, the run scripts and notebooks all come through here. `run` loads
the config; `train_and_evaluate` checks what it names on this machine
before TensorFlow loads (`check_before_start`), then hands it to the
backend it names (`runtime.backend`): training/tf_trainer.py (tf-keras and
tf.distribute, the default) or jax_backend/trainer.py (Keras 3 on JAX),
each reading top to bottom in labelled steps; both return
training/run_result.RunResult. A SIGTERM or Ctrl-C anywhere in the run is
RunStopped or RunInterrupted (runtime/stop_signals.py), for the CLI too.
TensorFlow-free, so a JAX run starts where TensorFlow is not installed.

    from official_bench import trainer
    result = trainer.run("configs/examples/resnet/imagenet/cpu_smoke.yaml",
                         params_override="train.steps=20")
    print(result.stats.average_examples_per_second)
"""

from __future__ import annotations

import contextlib
import importlib
import logging as std_logging
import signal
from typing import Any, Iterator, Mapping, Optional, Union

from absl import logging

from official_bench import config as config_lib
from official_bench.config import ExperimentConfig, paths
from official_bench.data.records import record_problems
from official_bench.host import write_errors
from official_bench.measure import stages
from official_bench.measure.stages import Stage
from official_bench.runtime import stop_signals
from official_bench.runtime.cluster import resolve_cluster
from official_bench.runtime.stop_signals import ctrl_c_deferred
from official_bench.training.run_result import RunResult

# runtime.backend -> the module whose train_and_evaluate runs it.
BACKEND_MODULES = {"tensorflow": "official_bench.training.tf_trainer",
                   "jax": "official_bench.jax_backend.trainer"}
# ... and what importing it loads, for its stage line (measure/stages.py).
BACKEND_LOADS = {"tensorflow": "TensorFlow", "jax": "JAX"}

ConfigLike = Union[ExperimentConfig, Mapping[str, Any], str, None]


def run(config: ConfigLike = None, *, params_override=None,
        model_dir: Optional[str] = None, mode: Optional[str] = None,
        model_type: Optional[str] = None,
        dataset: Optional[str] = None) -> RunResult:
    """Loads a config (object, dict or YAML path), trains, returns results.

    The config is run_config's, from the same arguments.
    """
    cfg = run_config(config, params_override=params_override,
                     model_dir=model_dir, mode=mode, model_type=model_type,
                     dataset=dataset)
    return train_and_evaluate(cfg)


def run_config(config: ConfigLike = None, *, params_override=None,
               model_dir: Optional[str] = None, mode: Optional[str] = None,
               model_type: Optional[str] = None,
               dataset: Optional[str] = None) -> ExperimentConfig:
    """The config run() trains, layered as the CLI's flags layer theirs.

    `params_override` goes over `config` as --params_override does;
    `model_dir`, `mode` and `model_type` (model.name), where given, win
    over both, as --model_dir, --mode and --model_type do. `model_type`
    and `dataset` also pick the built-in defaults (resnet, imagenet).
    """
    overrides = {k: v for k, v in (("model_dir", model_dir), ("mode", mode))
                 if v is not None}
    if model_type is not None:
        overrides["model"] = {"name": model_type}
    return config_lib.load_config(
        config, params_override, overrides,
        model_type=model_type or "resnet", dataset=dataset or "imagenet",
        overrides_from="run() arguments")


@contextlib.contextmanager
def _info_logging():
    """Progress, TimeHistory lines and the summary are absl INFO records,
    which absl hides until a program sets its verbosity; a notebook calling
    run() should see them without knowing that. Where no logging was set
    up, absl's first record sets up Python's root logger
    (logging.basicConfig) to show them; that handler goes when the run
    ends, so the notebook's own basicConfig afterwards still works."""
    before = logging.get_verbosity()
    root = std_logging.getLogger()
    handlers = list(root.handlers)
    if before < logging.INFO:
        logging.set_verbosity(logging.INFO)
    try:
        yield
    finally:
        if before < logging.INFO:
            logging.set_verbosity(before)
        if not handlers:
            for handler in list(root.handlers):
                root.removeHandler(handler)


def check_before_start(cfg: ExperimentConfig) -> None:
    """What the config names on this machine and the cluster, checked in a
    fraction of a second before TensorFlow loads: ConfigError for a
    missing data_dir, checkpoint, python_source or a bad cluster, or a
    config file's model_dir holding a finished run;
    NotWritable for a model_dir that cannot become a folder (a broken
    symbolic link or a file on its way)."""
    paths.check_local_dirs(cfg)
    paths.check_checkpoint(cfg)
    paths.check_model_dir_free(cfg)
    paths.check_python_sources(cfg)
    resolve_cluster(cfg.runtime, quiet=True)
    if cfg.model_dir and "://" not in cfg.model_dir:
        write_errors.check_folder(cfg.model_dir, "the run's files (model_dir)")


def train_and_evaluate(cfg: ExperimentConfig) -> RunResult:
    """Runs one experiment described by a validated config (any mode) on
    the backend it names (runtime.backend), after check_before_start.
    Shows the run's lines in a notebook as run() does. A SIGTERM or
    Ctrl-C is RunStopped or RunInterrupted wherever it comes (`stops`)."""
    if not isinstance(cfg, ExperimentConfig):
        raise TypeError(
            f"train_and_evaluate takes an ExperimentConfig (from "
            f"official_bench.load_config or trainer.run_config), got "
            f"{type(cfg).__name__}; use official_bench.run() for a dict or "
            "a YAML path")
    with stops():
        check_before_start(cfg)
        backend = cfg.runtime.backend
        record_problems.PROCESS.clear()  # this run's records_skipped
        with _info_logging():
            what = f"loading {BACKEND_LOADS[backend]}"
            with Stage(what), ctrl_c_deferred(what):
                module = importlib.import_module(BACKEND_MODULES[backend])
            return module.train_and_evaluate(cfg)


@contextlib.contextmanager
def stops() -> Iterator[None]:
    """The whole run's stops, for the API and the CLI alike: during the
    steps the backend's StopOnSignal stops at a step boundary and raises
    RunStopped / RunInterrupted; outside them a SIGTERM (sigterm_raises:
    the handler before comes back at the end) or a Ctrl-C unwinds, closing
    the input feeds, and is raised here as the same exceptions with step
    None, naming the stage it came in (`stopped_outside`)."""
    try:
        with stop_signals.sigterm_raises():
            yield
    except stop_signals.STOPS:
        raise
    except KeyboardInterrupt as e:
        raise stopped_outside(signal.SIGINT, e) from e
    except stop_signals.Terminated as e:
        raise stopped_outside(signal.SIGTERM, e) from e


def stopped_outside(signum: int, error: BaseException):
    """RunInterrupted (SIGINT) or RunStopped (SIGTERM) for `error`, a
    KeyboardInterrupt or Terminated outside the training steps, naming the
    stage it was raised in (measure/stages.stage_of)."""
    return stop_signals.stopped_outside(signum, stages.stage_of(error))
