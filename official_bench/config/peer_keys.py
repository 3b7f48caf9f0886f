"""Keys and flags as peer tools write them, and what they are here.

Model Garden's YAMLs and flags (r2.3 and its neighbours), tf_cnn_benchmarks'
and NVIDIA's ResNet-50 flags reach this trainer from habit; what they write
or place differently is answered from the tables below, the one home of
that knowledge: the builder (config/builder.py) names our key for an
unknown one and takes train.metrics' list form, the flag parser
(config/flags.py) names the config key a peer's flag sets. Data and
lookups only; TensorFlow-free.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

# train.metrics as Model Garden writes it, a list of names (its
# classifier_trainer's metric table) -> our MetricsConfig field.
METRIC_NAMES = {"acc": "accuracy", "accuracy": "accuracy",
                "top_1": "accuracy", "top_5": "top_5"}

# A key where a peer's YAML places or names it -> the key it is here.
KEYS = {
    "runtime.model_dir": "model_dir",  # Model Garden's examples YAML
    "runtime.mode": "mode",
    "model.model_name": "model.name",  # the same YAML; r2.3 says name
}

# A peer's trainer flag -> (the config key it sets here, the value a
# boolean flag means; None: the flag's own value).
FLAGS: Dict[str, Tuple[str, Optional[str]]] = {
    "batch_size": ("train_dataset.batch_size", None),
    "dtype": ("train_dataset.dtype", None),
    "precision": ("train_dataset.dtype", None),
    "use_fp16": ("train_dataset.dtype", "float16"),
    "fp16": ("train_dataset.dtype", "float16"),
    "use_xla": ("runtime.enable_xla", "true"),
    "enable_xla": ("runtime.enable_xla", "true"),
    "xla": ("runtime.enable_xla", "true"),
    "data_format": ("model.model_params.data_format", None),
    "distribution_strategy": ("runtime.distribution_strategy", None),
    "variable_update": ("runtime.distribution_strategy", None),
    "strategy_type": ("runtime.distribution_strategy", None),
    "all_reduce_alg": ("runtime.all_reduce_alg", None),
    "num_packs": ("runtime.num_packs", None),
    "worker_hosts": ("runtime.worker_hosts", None),
    "task_index": ("runtime.task_index", None),
    "loss_scale": ("runtime.loss_scale", None),
    "train_steps": ("train.steps", None),
    "num_batches": ("train.steps", None),
    "train_epochs": ("train.epochs", None),
    "num_epochs": ("train.epochs", None),
    "skip_eval": ("evaluation.skip_eval", "true"),
    "epochs_between_evals": ("evaluation.epochs_between_evals", None),
    "tf_gpu_thread_mode": ("runtime.gpu_thread_mode", None),
    "per_gpu_thread_count": ("runtime.per_gpu_thread_count", None),
    "datasets_num_private_threads": (
        "runtime.dataset_num_private_threads", None),
}

# A peer flag's values that differ from the key's here (tf_cnn_benchmarks'
# layouts and variable_update, NVIDIA's precision).
VALUES: Dict[str, Dict[str, str]] = {
    "model.model_params.data_format": {"NCHW": "channels_first",
                                       "NHWC": "channels_last"},
    "runtime.distribution_strategy": {"replicated": "mirrored"},
    "train_dataset.dtype": {"fp32": "float32", "fp16": "float16",
                            "amp": "float16", "bf16": "bfloat16"},
}


def metrics_from_list(names: List[Any]) -> Tuple[Dict[str, bool], List[Any]]:
    """Model Garden's `train.metrics: [accuracy, top_5]`: our mapping (each
    named metric on, the others off) and the names it does not know."""
    wanted = {METRIC_NAMES.get(n) if isinstance(n, str) else None
              for n in names}
    unknown = [n for n in names
               if not isinstance(n, str) or n not in METRIC_NAMES]
    return ({field: field in wanted for field in sorted(
        set(METRIC_NAMES.values()))}, unknown)


def metrics_list_error(unknown: List[Any]) -> str:
    """The error for train.metrics names Model Garden does not have."""
    return (f"unknown metric name(s) {', '.join(map(repr, unknown))}; valid: "
            f"{', '.join(METRIC_NAMES)} (a list, as Model Garden writes it), "
            "or a mapping {accuracy: bool, top_5: bool}")


def key_hint(path: str) -> Optional[str]:
    """For a key a peer places or names differently (KEYS), the error that
    names ours; None for any other key."""
    ours = KEYS.get(path)
    if ours is None:
        return None
    section, _, leaf = ours.rpartition(".")
    if path.rpartition(".")[0] == section:
        return (f"unknown key; did you mean {leaf!r}? ({ours}, as in Model "
                "Garden r2.3)")
    where = f"in section {section}" if section else "a top-level key"
    return (f"unknown key here; {ours} is {where} (not under "
            f"{path.rpartition('.')[0]})")


def flag_hint(name: str, value: Optional[str]) -> Optional[str]:
    """For a peer's flag (FLAGS; `name` without dashes, `value` as given
    or None), how to set it here; None for any other flag."""
    if name not in FLAGS:
        return None
    key, fixed = FLAGS[name]
    shown = fixed or VALUES.get(key, {}).get(value or "", value) or "<value>"
    if "," in shown:  # dotted pairs split at commas outside quotes
        shown = f"'{shown}'"
    return (f"it is the config key {key} here: "
            f"--params_override={key}={shown}")
