"""Checking a typed config and filling the values that follow from it.

Every check that needs nothing but the config runs from here, so a bad
value is refused when the config is loaded (`--dry-run`, the launcher's
plan, the trainer's first step), before TensorFlow starts, with the key
path and the layer that set it. The values a key may take are config/
ranges.py's, the keys that must agree with each other config/rules.py's;
`validate` runs them in one fixed order, so the problems of a config are
always reported in the same order. Checks that need the machine or the
cluster (GPUs visible, TF_CONFIG, files on disk) stay where those are
known.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, List, Tuple

from official_bench.config import ranges, rules
from official_bench.config.builder import LayerBuilder
from official_bench.config.paths import datasets_read
from official_bench.config.schema import (
    DTYPE_ALIASES,
    DatasetConfig,
    ExperimentConfig,
)


def validate(cfg: ExperimentConfig, b: LayerBuilder) -> None:
    """Every check that needs only the config, on a config whose types are
    right; each error goes to `b`, which names the key's layer."""
    rt = cfg.runtime
    ranges.mode(cfg, b)
    ranges.strategy_and_devices(rt, b)
    rules.thread_count_needs_mode(rt, b)
    ranges.runtime_limits(rt, b)
    rules.loss_scale_needs_float16(rt, compute_dtype(cfg), b)
    ranges.precision_and_cluster(rt, b)
    rules.cluster_keys_need_parameter_server(rt, b)
    ranges.horovod(rt.horovod, b)
    rules.horovod_knobs_need_horovod(rt, b)
    rules.reduction(rt, b)
    rules.xla_can_compile_the_step(rt, b)
    read = [name for name, _ in datasets_read(cfg)]
    for name in ("train_dataset", "validation_dataset"):
        _validate_dataset(getattr(cfg, name), name, name in read, b)
    rules.data_dir_needs_a_reader(cfg, b)
    rules.input_placement(cfg, b)
    ranges.model(cfg.model, b)
    rules.r23_compat_schedule(cfg.model.learning_rate, b)
    ranges.learning_rate(cfg.model.learning_rate, b)
    rules.model(cfg, b)
    rules.channels_first_on_eigen(cfg, b)
    ranges.train(cfg.train, b)
    rules.steps_per_loop(cfg.train, b)
    ranges.evaluation(cfg.evaluation, b)
    ranges.history(cfg.history, b)
    ranges.speed_options(cfg, b)
    rules.backend_runs_it(cfg, b)
    ranges.check_numbers(cfg, b)  # last: keys with their own range report that


def _validate_dataset(ds: DatasetConfig, name: str, read: bool,
                      b: LayerBuilder) -> None:
    """`read`: the run reads this dataset; keys that depend on its decode
    are checked only then, as decode itself is (config/backends.py)."""
    ranges.dataset(ds, name, b)
    if read:
        rules.worker_share_needs_gpu_trainer(ds, name, b)
    rules.feed_needs_its_source(ds, name, b)
    ranges.feed(ds, name, b)
    rules.synthetic_on_device(ds, name, b)
    ranges.service_address(ds, name, b)
    rules.service_builder(ds, name, b)
    ranges.service_timeout(ds, name, b)


# What fill_derived fills where a key is null: the key and its value from
# the rest of the config, in filling order (a later one may read an earlier
# one's value). Validation refused the keys that disagree beforehand.
_DERIVATIONS: Tuple[Tuple[str, Callable[[ExperimentConfig], Any]], ...] = (
    ("model.model_params.num_classes",
     lambda c: c.model.num_classes or c.train_dataset.num_classes),
    ("model.num_classes", lambda c: c.model.model_params.num_classes),
    ("model.model_params.depth",
     lambda c: 50 if c.model.name == "resnet" else 20),
    ("model.loss.name",
     lambda c: "categorical_crossentropy" if c.train_dataset.one_hot
     else "sparse_categorical_crossentropy"),
    ("model.learning_rate.examples_per_epoch",
     lambda c: c.train_dataset.num_examples),
    ("train.time_history.warmup_steps",
     lambda c: c.train.time_history.log_steps),
)
DERIVED_KEYS = tuple(key for key, _ in _DERIVATIONS)


def fill_derived(cfg: ExperimentConfig) -> List[str]:
    """Fills values that follow from others, so the saved config is
    complete; returns the DERIVED_KEYS it filled (they were null)."""
    filled = []
    for key, derive in _DERIVATIONS:
        parent, _, name = key.rpartition(".")
        node = operator.attrgetter(parent)(cfg)
        if getattr(node, name) is None:
            setattr(node, name, derive(cfg))
            filled.append(key)
    for ds in (cfg.train_dataset, cfg.validation_dataset):
        ds.dtype = DTYPE_ALIASES.get(ds.dtype, ds.dtype)
    if cfg.runtime.mixed_precision_dtype is not None:
        cfg.runtime.mixed_precision_dtype = DTYPE_ALIASES.get(
            cfg.runtime.mixed_precision_dtype)
    return filled


def compute_dtype(cfg: ExperimentConfig) -> str:
    """float32, float16 or bfloat16: runtime.mixed_precision_dtype wins."""
    return DTYPE_ALIASES.get(cfg.runtime.mixed_precision_dtype or
                             cfg.train_dataset.dtype, "float32")
