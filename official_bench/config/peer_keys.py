"""Keys and flags as peer tools write them, and what they are here.

Model Garden's YAMLs and flags (r2.3 and its neighbours), tf_cnn_benchmarks'
and NVIDIA's ResNet-50 flags reach this trainer from habit; what they write
or place differently is answered from the tables below, the one home of
that knowledge: the builder (config/builder.py) names our key for an
unknown one and takes train.metrics' list form, the flag parser
(config/flags.py) names the config key or flag a peer's flag sets, a
boolean one's value read as absl reads it (`--use_fp16=false`,
`--nouse_fp16`). docs/configuration.md's peer-flag table is
markdown_table(). Data and lookups only; TensorFlow-free.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from official_bench.config.schema import RESNET_DEPTHS, STRATEGIES

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
# boolean flag means when true; None: the flag's own value).
FLAGS: Dict[str, Tuple[str, Optional[str]]] = {
    "batch_size": ("train_dataset.batch_size", None),
    "train_batch_size": ("train_dataset.batch_size", None),
    "eval_batch_size": ("validation_dataset.batch_size", None),
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
    "optimizer": ("model.optimizer.name", None),
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

# What a boolean flag's key (FLAGS with a value) is when the flag is false
# (`--use_fp16=false`, `--nouse_fp16`): each the key's default here.
OFF: Dict[str, str] = {
    "train_dataset.dtype": "float32",
    "runtime.enable_xla": "false",
    "evaluation.skip_eval": "false",
}

# A boolean flag's value as absl spells it (case-insensitive), yes and no
# too.
TRUE = ("true", "t", "1", "yes")
FALSE = ("false", "f", "0", "no")

# A peer's flag that is one of our flags under another name.
AS_FLAGS: Dict[str, str] = {
    "data_name": "dataset",  # tf_cnn_benchmarks: imagenet, cifar10
    "display_every": "log_steps",  # tf_cnn_benchmarks' steps per line
}

# What a flag's user should know beyond the key. Model Garden's
# hyperparams_flags defines --train_batch_size and --eval_batch_size, which
# its classifier_trainer never reads.
_IGNORED = ("Model Garden's classifier_trainer defined the flag but ignored "
            "it: its runs used the config's batch size")
NOTES: Dict[str, str] = {
    "train_batch_size": _IGNORED,
    "eval_batch_size": _IGNORED,
    "batch_size": "per replica while train_dataset.use_per_replica_"
                  "batch_size is true, the default, as tf_cnn_benchmarks' "
                  "is per device",
}

# A peer flag's values that differ from the key's here (tf_cnn_benchmarks'
# layouts and variable_update, Model Garden's strategy_type, NVIDIA's
# precision).
VALUES: Dict[str, Dict[str, str]] = {
    "model.model_params.data_format": {"NCHW": "channels_first",
                                       "NHWC": "channels_last"},
    "runtime.distribution_strategy": {
        "replicated": "mirrored",
        "multiworker": "multi_worker_mirrored",  # Model Garden
        # tf_cnn_benchmarks' modes across hosts: one copy of the variables
        # per device, gradients all-reduced, as multi_worker_mirrored does.
        "distributed_replicated": "multi_worker_mirrored",
        "distributed_all_reduce": "multi_worker_mirrored",
        "collective_all_reduce": "multi_worker_mirrored",
    },
    "train_dataset.dtype": {"fp32": "float32", "fp16": "float16",
                            "amp": "float16", "bf16": "bfloat16"},
}

# A peer's value that is ours too, but means more here.
VALUE_NOTES: Dict[str, Dict[str, str]] = {
    "runtime.distribution_strategy": {
        "parameter_server": "here a cluster with ps tasks, runtime.ps_hosts; "
                            "on one host, mirrored is the nearest",
    },
}

# A peer's value with no equivalent here, and what it was.
NO_EQUIVALENT: Dict[str, Dict[str, str]] = {
    "runtime.distribution_strategy": {
        "independent": "tf_cnn_benchmarks' independent trains a separate "
                       "model on each device, nothing exchanged",
        "tpu": "TPUs are not supported",
    },
}

# The choices of a key whose peer values are checked here (the rest are
# left to the config check).
CHOICES: Dict[str, Tuple[str, ...]] = {
    "runtime.distribution_strategy": STRATEGIES,
}

_MODELS = ("--model_type=resnet (ResNet v1.5, model.model_params.depth "
           f"{', '.join(map(str, RESNET_DEPTHS))}) or --model_type="
           "resnet_cifar (depth 6n+2)")


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
    """For a peer's flag (FLAGS, AS_FLAGS, `--model`, a boolean one as
    `--noX`; `name` without dashes, `value` as given or None), how to set
    it here; None for any other flag."""
    if name == "model":
        return _model_hint(value)
    if name in AS_FLAGS:
        return f"it is --{AS_FLAGS[name]} here: --{AS_FLAGS[name]}=" \
            f"{value or '<value>'}"
    if name not in FLAGS and name.startswith("no") \
            and FLAGS.get(name[2:], ("", None))[1] is not None:
        name, value = name[2:], "false"
    if name not in FLAGS:
        return None
    key, on = FLAGS[name]
    if on is not None:
        return _boolean_hint(key, on, value)
    shown = VALUES.get(key, {}).get(value or "", value)
    note = NOTES.get(name) or VALUE_NOTES.get(key, {}).get(shown or "")
    note = f" ({note})" if note else ""
    if shown is not None and key in CHOICES and shown not in CHOICES[key]:
        why = NO_EQUIVALENT.get(key, {}).get(shown, "")
        return (f"it is the config key {key} here, which has no "
                f"equivalent of {shown!r}{f' ({why})' if why else ''}; "
                f"valid: {', '.join(CHOICES[key])}")
    return f"it is the config key {key} here: " \
        f"{_override(key, shown or '<value>')}{note}"


def _override(key: str, value: str) -> str:
    """--params_override=key=value, quoted where the value has a comma
    (dotted pairs split at commas outside quotes)."""
    return f"--params_override={key}=" + (f"'{value}'" if "," in value
                                          else value)


def _boolean_hint(key: str, on: str, value: Optional[str]) -> str:
    """A boolean flag's hint: its value read as absl reads it (none: true),
    false setting the key's default here, never the feature on."""
    said = (value or "true").lower()
    if said in TRUE:
        return f"it is the config key {key} here: {_override(key, on)}"
    off = OFF[key]
    if said in FALSE:
        return (f"it is the config key {key} here, and false means "
                f"{key}={off}, the default: drop the flag (or "
                f"{_override(key, off)} over a config file that sets it)")
    return (f"it is the config key {key} here: {_override(key, on)} for "
            f"true, {off} (the default) for false; {value!r} is neither "
            f"(valid: {', '.join(TRUE + FALSE)})")


def _model_hint(value: Optional[str]) -> str:
    """tf_cnn_benchmarks' --model: --model_type and the ResNet depth, or
    that the model has no equivalent here."""
    match = re.fullmatch(r"resnet(\d+)(_v1(\.5)?)?", value or "")
    depth = int(match[1]) if match else 0
    if depth in RESNET_DEPTHS:
        model, what = "resnet", " (ResNet v1.5)"
    elif match and depth >= 8 and (depth - 2) % 6 == 0:
        model, what = "resnet_cifar --dataset=cifar10", ""
    elif value:
        return (f"tf_cnn_benchmarks' model {value!r} has no equivalent "
                f"here; the models are {_MODELS}")
    else:
        return f"the model is --model_type here: {_MODELS}"
    return (f"it is --model_type here{what}: --model_type={model} "
            f"{_override('model.model_params.depth', str(depth))}")


def markdown_table() -> str:
    """The peer-flag table docs/configuration.md carries between its
    markers: the flags flag_hint answers, and what they are here."""
    groups: Dict[Tuple[str, Optional[str]], List[str]] = {}
    for name, target in sorted(FLAGS.items()):
        groups.setdefault(target, []).append(name)
    rows = [(sorted(names), _row(key, on))
            for (key, on), names in groups.items()]
    rows += [([name], f"`--{ours}`") for name, ours in AS_FLAGS.items()]
    rows.append((["model"], _MODEL_ROW))
    lines = ["| their flag | here |", "|---|---|"]
    lines += [f"| {', '.join(f'`--{n}`' for n in names)} | {cell} |"
              for names, cell in sorted(rows)]
    return "\n".join(lines) + "\n"


_MODEL_ROW = (
    "`resnetN`, `resnetN_v1.5`, N one of "
    f"{', '.join(map(str, RESNET_DEPTHS))}: `--model_type=resnet` (ResNet "
    "v1.5) with `model.model_params.depth: N`; N = 6n+2 (`resnet20`, "
    "`resnet56`): `--model_type=resnet_cifar --dataset=cifar10`, depth N; "
    "any other model: none here")


def _row(key: str, on: Optional[str]) -> str:
    """The cell of markdown_table for the flags that set `key` (to `on`
    when true, for a boolean one)."""
    if on is not None:
        return (f"`{key}: {on}`; false (`=false`, or `--no` before the "
                f"name): `{OFF[key]}`, the default")
    cell = [f"`{key}`"]
    cell += [f"`{theirs}` → `{ours}`"
             for theirs, ours in VALUES.get(key, {}).items()]
    cell += [f"`{theirs}`: none here"
             for theirs in NO_EQUIVALENT.get(key, {})]
    cell += [f"`{value}`: {note}"
             for value, note in VALUE_NOTES.get(key, {}).items()]
    cell += [f"`--{name}`: {note}" for name, note in sorted(NOTES.items())
             if FLAGS[name][0] == key]
    return "; ".join(cell)
