"""What the config names that must exist on this machine, checked before
TensorFlow starts by the trainer CLI: data directories, the checkpoint eval
and export read, a python_source's package; and a config file's model_dir
that holds a finished run (a params.yaml given back). The pipeline, the
feed and training/checkpoints.py check them again once they run (with
TensorFlow's file system, which also reads gs:// and hdfs://)."""

from __future__ import annotations

import importlib.util
import os
from typing import List, Tuple

from official_bench.config.errors import ConfigError
from official_bench.config.frozen import key_source
from official_bench.config.schema import DatasetConfig, ExperimentConfig
from official_bench.contracts.log_tree import CHIEF_RESULT_FILE

# Builders that read files from data_dir.
FILE_BUILDERS = ("records", "tfds")
# Builders that read data_dir at all (data/factory.py): the records pipeline
# (also on tf.data service workers), TFDS, and a python source, which gets
# the dataset config; synthetic and zmq never look at it (config/rules.py
# refuses a data_dir they would ignore).
DATA_DIR_READERS = ("records", "tfds", "service", "python")
# The state file in model_dir that tf.train.latest_checkpoint reads: without
# it there is no latest checkpoint.
CHECKPOINT_STATE = "checkpoint"


def missing_dir_message(key: str, data_dir: str) -> str:
    """The words for a data_dir that is not there (shared with the
    pipeline's own check in data/records/record_files.py)."""
    return (f"{key}.data_dir {data_dir!r} does not exist or is not a "
            "directory")


def no_checkpoint_message(model_dir) -> str:
    """The words for eval or export without a checkpoint to read (shared
    with training/checkpoints.py)."""
    return (f"no checkpoint (model.ckpt-*) in model_dir {model_dir!r}; "
            "train first with train.callbacks.enable_checkpoint_and_export: "
            "true")


def source_import_message(key: str, spec: str, module: str,
                          error: str) -> str:
    """The words for a python_source whose module cannot be imported
    (shared with data/feeds/python_batches.py)."""
    return f"{key} {spec!r}: cannot import module {module!r}: {error}"


def datasets_read(cfg: ExperimentConfig) -> List[Tuple[str, DatasetConfig]]:
    """The datasets this run's mode reads, with their config keys."""
    read = []
    if cfg.mode in ("train", "train_and_eval"):
        read.append(("train_dataset", cfg.train_dataset))
    if cfg.mode == "eval" or (cfg.mode == "train_and_eval" and
                              not cfg.evaluation.skip_eval):
        read.append(("validation_dataset", cfg.validation_dataset))
    return read


def check_local_dirs(cfg: ExperimentConfig) -> None:
    """ConfigError naming the key for a local data_dir that is missing.

    Only plain local paths are checked (a URL scheme is left to the
    pipeline), and only where the files come from data_dir (no
    `filenames` list, which may name absolute paths)."""
    for key, ds in datasets_read(cfg):
        if ds.builder not in FILE_BUILDERS or ds.filenames or \
                not ds.data_dir or "://" in ds.data_dir:
            continue
        if not os.path.isdir(ds.data_dir):
            raise ConfigError(missing_dir_message(key, ds.data_dir))


def check_checkpoint(cfg: ExperimentConfig) -> None:
    """ConfigError when eval (or export without export.checkpoint) would
    find no checkpoint: a local model_dir without TensorFlow's checkpoint
    state file. A URL is left to TensorFlow."""
    if cfg.mode != "eval" and not (cfg.mode == "export_only" and
                                   not cfg.export.checkpoint):
        return
    model_dir = cfg.model_dir
    if model_dir and "://" in model_dir:
        return
    if not model_dir or not os.path.isfile(
            os.path.join(model_dir, CHECKPOINT_STATE)):
        raise ConfigError(no_checkpoint_message(model_dir))


def check_model_dir_free(cfg: ExperimentConfig) -> None:
    """ConfigError when a run would train into a model_dir that a config
    file names (every params.yaml does: it records its run's) and that
    already holds a run's result.json or checkpoint, without
    train.resume_checkpoint: given back as --config_file to repeat a run,
    a params.yaml would otherwise replace the run it records. A model_dir
    given by --model_dir or a params_override is the user's choice."""
    source = key_source(cfg, "model_dir")
    model_dir = cfg.model_dir
    if not source or not source.startswith("file ") or \
            cfg.mode not in ("train", "train_and_eval") or \
            cfg.train.resume_checkpoint or not model_dir or \
            "://" in model_dir:
        return
    held = [name for name in (CHIEF_RESULT_FILE, CHECKPOINT_STATE)
            if os.path.isfile(os.path.join(model_dir, name))]
    if held:
        raise ConfigError(
            f"model_dir {model_dir!r} (from {source}) already holds a run "
            f"({' and '.join(held)}): this run would replace its files. Give "
            "this run a folder of its own (--model_dir, or model_dir in a "
            "params_override), or continue that run with "
            "train.resume_checkpoint=true")


def check_python_sources(cfg: ExperimentConfig) -> None:
    """ConfigError when a python_source's top-level package is not on
    sys.path. Nothing is imported here (the module may import TensorFlow,
    which must load after runtime/cpu_kernels): a package that is found
    but fails to import is named when the data pipeline imports it."""
    for key, ds in datasets_read(cfg):
        if ds.builder != "python" or not ds.python_source:
            continue
        module = ds.python_source.partition(":")[0]
        top = module.split(".")[0]
        if top and importlib.util.find_spec(top) is None:
            raise ConfigError(source_import_message(
                f"{key}.python_source", ds.python_source, module,
                f"ModuleNotFoundError: No module named {top!r}"))
