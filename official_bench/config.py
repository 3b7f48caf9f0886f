"""Experiment configuration: typed dataclasses, YAML layers, strict checks.

Key names and meanings follow Model Garden r2.3's image-classification
configs, so DLPerf's YAML files load unchanged. Layers are applied in order:

    defaults -> --config_file -> --params_override -> explicit flags

Every leaf remembers which layer set it, so an error can say where a bad
value came from. Unknown keys, wrong types and invalid values are all
reported as one `ConfigError` before anything runs.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import os
import re
import typing
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import yaml

from official_bench import config_tree
from official_bench.contracts import dtypes
from official_bench.contracts.hostport import HostPortError, parse_hostport

DEFAULTS = "defaults"

STRATEGIES = ("off", "one_device", "mirrored", "multi_worker_mirrored",
              "horovod", "parameter_server")
MODES = ("train_and_eval", "train", "eval", "export_only")
MODEL_NAMES = ("resnet", "resnet_cifar")
RESNET_DEPTHS = (18, 34, 50, 101, 152)
BUILDERS = ("synthetic", "records", "tfds", "python", "zmq", "service")
# builder synthetic: where each replica's batch lives (data/synthetic.py,
# data/resident_batch.py).
SYNTHETIC_LOCATIONS = ("host", "device")
# Accepted precision spellings -> TensorFlow's name (contracts/dtypes.py).
DTYPE_ALIASES = {spelling: dtypes.tf_name(spelling)
                 for spelling in dtypes.ACCEPTED}
OPTIMIZERS = ("momentum", "sgd", "rmsprop", "adam")
LR_SCHEDULES = ("piecewise_constant_with_warmup", "cosine_with_warmup",
                "exponential", "constant")
# model.learning_rate.compat: null (official_bench's schedules, initial_lr
# honoured) or model_garden_r23 (r2.3's piecewise schedule exactly).
LR_COMPAT = ("model_garden_r23",)
LOSSES = ("categorical_crossentropy", "sparse_categorical_crossentropy")
MIRRORED_ALGS = ("nccl", "hierarchical_copy")
MULTI_WORKER_ALGS = ("ring", "nccl", "auto")
DATA_FORMATS = ("channels_last", "channels_first", "auto")
GPU_THREAD_MODES = ("gpu_private", "gpu_shared", "global")


class ConfigError(ValueError):
    """A bad configuration; the message names the key and its source."""


# --------------------------------------------------------------------------
# The schema
# --------------------------------------------------------------------------


@dataclasses.dataclass
class HorovodConfig:
    """Horovod knobs (runtime.horovod); passed through and recorded."""
    fp16_allreduce: bool = False  # compress gradients to fp16 on the wire
    fusion_threshold_mb: Optional[float] = None  # HOROVOD_FUSION_THRESHOLD
    cycle_time_ms: Optional[float] = None  # HOROVOD_CYCLE_TIME
    hierarchical_allreduce: bool = False  # HOROVOD_HIERARCHICAL_ALLREDUCE


@dataclasses.dataclass
class RuntimeConfig:
    """Distribution, precision and threading (r2.3 `runtime`)."""
    distribution_strategy: str = "mirrored"
    enable_xla: bool = False
    gpu_thread_mode: Optional[str] = None
    dataset_num_private_threads: Optional[int] = None
    per_gpu_thread_count: int = 0
    tpu: Optional[str] = None
    num_gpus: int = 0
    worker_hosts: Optional[str] = None
    task_index: int = -1
    # parameter_server: chief + workers + ps (official_bench extension).
    ps_hosts: Optional[str] = None
    chief_host: Optional[str] = None
    task_type: str = "worker"  # chief | worker | ps
    all_reduce_alg: Optional[str] = None
    num_packs: int = 1
    loss_scale: Optional[Union[str, float]] = None
    batchnorm_spatial_persistent: bool = False
    mixed_precision_dtype: Optional[str] = None
    run_eagerly: bool = False
    # official_bench extensions.
    cpu_devices: int = 1  # logical CPU devices for mirrored without GPUs
    # Per-collective timeout (CommunicationOptions.timeout_seconds). Off by
    # default: TensorFlow starts a thread per collective that lives this long,
    # so long runs leak threads until they abort (tensorflow issue 56423).
    collective_timeout_seconds: Optional[float] = None
    peer_timeout_seconds: float = 300.0  # all workers must join by then
    # After SIGTERM/SIGINT the run stops at the next step; if it has not
    # ended this long after the signal, it exits anyway (128 + signal).
    stop_grace_seconds: float = 60.0
    # Set glibc's mmap/trim thresholds back after TensorFlow 2.21 froze them
    # at 128 KiB (runtime/host_malloc.py; ~35% of CPU step time here).
    restore_malloc_thresholds: bool = True
    # [first, last]: a profiler trace of those steps into model_dir/profile;
    # their timing is left out of the statistics.
    profile_steps: Optional[List[int]] = None
    # Seconds between utilisation samples (GPU, CPU, RSS, threads) while a
    # run trains (training/utilisation.py); 0 turns the sampler off.
    sample_period_seconds: float = 1.0
    seed: Optional[int] = None
    horovod: HorovodConfig = dataclasses.field(default_factory=HorovodConfig)


@dataclasses.dataclass
class DatasetConfig:
    """One input pipeline (r2.3 `train_dataset` / `validation_dataset`)."""
    name: Optional[str] = "imagenet2012"
    data_dir: Optional[str] = None
    filenames: Optional[List[str]] = None
    builder: str = "synthetic"
    split: str = "train"
    image_size: int = 224
    num_classes: int = 1000
    num_channels: int = 3
    num_examples: int = 1281167
    batch_size: int = 128
    use_per_replica_batch_size: bool = True
    num_devices: int = 1  # r2.3 key; derived from the strategy, kept for YAMLs
    dtype: str = "float32"
    one_hot: bool = True
    download: bool = False
    shuffle_buffer_size: int = 10000
    file_shuffle_buffer_size: int = 1024
    skip_decoding: bool = True
    cache: bool = False
    mean_subtract: bool = False
    standardize: bool = False
    # official_bench extensions (augmentation; ImageNet values by default).
    crop_area_range: List[float] = dataclasses.field(
        default_factory=lambda: [0.05, 1.0])
    crop_aspect_ratio_range: List[float] = dataclasses.field(
        default_factory=lambda: [0.75, 1.33])
    min_object_covered: float = 0.1
    random_flip: bool = True
    eval_crop_padding: int = 32  # eval crop = size / (size + padding)
    layout: str = "auto"  # records: auto | classic | tfds
    label_offset: Optional[int] = None  # classic records: 1 (labels 1..N)
    deterministic: bool = False
    skip_bad_records: bool = False
    transfer_uint8: bool = False
    # builder: python: "module:function" returning (images, labels) batches.
    python_source: Optional[str] = None
    # ... and the longest wait for one batch (the first: for the call too).
    python_timeout_seconds: float = 300.0
    # builder: zmq: endpoints the trainer binds (or connects to with
    # zmq_bind: false); worker i uses each tcp port + i.
    zmq_endpoints: Optional[List[str]] = None
    zmq_bind: bool = True
    zmq_timeout_seconds: float = 60.0
    # builder: synthetic: host (one batch copied to the device every step,
    # as r2.3/DLPerf) or device (made once on each replica's device).
    synthetic_location: str = "host"
    # builder: service: the tf.data service dispatcher, host:port; the
    # records pipeline runs on its workers (data/service.py).
    data_service_address: Optional[str] = None
    data_service_timeout_seconds: float = 60.0


@dataclasses.dataclass
class ModelParams:
    """Model constructor arguments (r2.3 `model.model_params`)."""
    num_classes: Optional[int] = None  # follows the dataset when unset
    depth: Optional[int] = None  # resnet: 50; resnet_cifar: 20
    width: int = 1  # resnet_cifar filter multiplier
    batch_size: Optional[int] = None  # r2.3 key, unused by Keras models
    use_l2_regularizer: bool = True
    weight_decay: float = 1e-4
    rescale_inputs: bool = False
    data_format: str = "auto"
    zero_init_last_bn: bool = False


@dataclasses.dataclass
class LossConfig:
    name: Optional[str] = None  # inferred from dataset.one_hot
    label_smoothing: float = 0.0


@dataclasses.dataclass
class OptimizerConfig:
    name: str = "momentum"
    decay: float = 0.9  # rho of rmsprop
    epsilon: float = 0.001
    momentum: float = 0.9
    nesterov: bool = False
    moving_average_decay: Optional[float] = None
    lookahead: Optional[bool] = None
    beta_1: float = 0.9
    beta_2: float = 0.999


@dataclasses.dataclass
class LearningRateConfig:
    """LR schedule; rates are per 256 images and scaled by the global batch."""
    name: str = "piecewise_constant_with_warmup"
    initial_lr: float = 0.1
    decay_epochs: Optional[float] = None
    decay_rate: Optional[float] = None
    warmup_epochs: float = 5
    examples_per_epoch: Optional[int] = None  # defaults to train num_examples
    boundaries: Optional[List[float]] = dataclasses.field(
        default_factory=lambda: [30, 60, 80])
    multipliers: Optional[List[float]] = dataclasses.field(
        default_factory=lambda: [1.0, 0.1, 0.01, 0.001])
    scale_by_batch_size: float = 1.0 / 256
    staircase: Optional[bool] = None
    # model_garden_r23: Model Garden r2.3's piecewise_constant_with_warmup
    # exactly (0.1 per 256 images; initial_lr and scale_by_batch_size ignored,
    # as r2.3 ignored them), for DLPerf's YAMLs. null: official_bench's own.
    compat: Optional[str] = None


@dataclasses.dataclass
class ModelConfig:
    name: str = "resnet"
    model_params: ModelParams = dataclasses.field(default_factory=ModelParams)
    num_classes: Optional[int] = None
    loss: LossConfig = dataclasses.field(default_factory=LossConfig)
    optimizer: OptimizerConfig = dataclasses.field(
        default_factory=OptimizerConfig)
    learning_rate: LearningRateConfig = dataclasses.field(
        default_factory=LearningRateConfig)


@dataclasses.dataclass
class CallbacksConfig:
    enable_checkpoint_and_export: bool = False
    enable_tensorboard: bool = False
    enable_time_history: bool = True


@dataclasses.dataclass
class TimeHistoryConfig:
    log_steps: int = 100
    warmup_steps: Optional[int] = None  # default: the first interval
    progress_seconds: float = 30.0  # a progress line at least this often


@dataclasses.dataclass
class MetricsConfig:
    accuracy: Optional[bool] = None
    top_5: Optional[bool] = None


@dataclasses.dataclass
class TensorboardConfig:
    track_lr: bool = True
    write_model_weights: bool = False


@dataclasses.dataclass
class TrainConfig:
    resume_checkpoint: bool = False
    epochs: int = 1
    steps: Optional[int] = None  # per epoch; inferred from num_examples
    callbacks: CallbacksConfig = dataclasses.field(
        default_factory=CallbacksConfig)
    metrics: Optional[MetricsConfig] = None
    tensorboard: TensorboardConfig = dataclasses.field(
        default_factory=TensorboardConfig)
    time_history: TimeHistoryConfig = dataclasses.field(
        default_factory=TimeHistoryConfig)
    # Steps per call into the compiled train function (Keras
    # steps_per_execution): fewer host round trips for fast steps.
    steps_per_loop: int = 1
    set_epoch_loop: bool = False  # r2.3: one loop per epoch (steps_per_loop)
    # A NaN or infinite training loss stops the run with an error naming the
    # step (checked every log_steps, no extra host sync); false: a
    # throughput-only run goes on, with a warning in its summary and result.
    stop_on_nan: bool = True


@dataclasses.dataclass
class EvalConfig:
    epochs_between_evals: int = 1
    steps: Optional[int] = None
    skip_eval: bool = False


@dataclasses.dataclass
class ExportConfig:
    checkpoint: Optional[str] = None
    destination: Optional[str] = None


def _validation_default() -> DatasetConfig:
    return DatasetConfig(split="validation", num_examples=50000)


@dataclasses.dataclass
class ExperimentConfig:
    """The whole experiment (r2.3 `ExperimentConfig`)."""
    model_dir: Optional[str] = None
    model_name: Optional[str] = None
    mode: str = "train_and_eval"
    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)
    train_dataset: DatasetConfig = dataclasses.field(
        default_factory=DatasetConfig)
    validation_dataset: DatasetConfig = dataclasses.field(
        default_factory=_validation_default)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    evaluation: EvalConfig = dataclasses.field(default_factory=EvalConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    export: ExportConfig = dataclasses.field(default_factory=ExportConfig)

    def as_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.as_dict(), sort_keys=False)


# Base configs picked by --model_type / --dataset, as in r2.3's get_config.
DATASET_PRESETS: Dict[str, Dict[str, Any]] = {
    "imagenet": {
        "train_dataset": {"name": "imagenet2012", "image_size": 224,
                          "num_classes": 1000, "num_examples": 1281167,
                          "split": "train"},
        "validation_dataset": {"name": "imagenet2012", "image_size": 224,
                               "num_classes": 1000, "num_examples": 50000,
                               "split": "validation"},
    },
    "cifar10": {
        "train_dataset": {"name": "cifar10", "image_size": 32,
                          "num_classes": 10, "num_examples": 50000,
                          "split": "train", "eval_crop_padding": 0},
        "validation_dataset": {"name": "cifar10", "image_size": 32,
                               "num_classes": 10, "num_examples": 10000,
                               "split": "validation", "eval_crop_padding": 0},
    },
}


def base_config(model_type: str = "resnet",
                dataset: str = "imagenet") -> Dict[str, Any]:
    """The defaults layer for a model type and dataset, as a nested dict."""
    if model_type not in MODEL_NAMES:
        raise ConfigError(f"unknown --model_type {model_type!r}; valid: "
                          f"{', '.join(MODEL_NAMES)}")
    if dataset not in DATASET_PRESETS:
        raise ConfigError(f"unknown --dataset {dataset!r}; valid: "
                          f"{', '.join(DATASET_PRESETS)}")
    tree = dataclasses.asdict(ExperimentConfig())
    tree["model"]["name"] = model_type
    _deep_update(tree, DATASET_PRESETS[dataset])
    return tree


# --------------------------------------------------------------------------
# Reading layers
# --------------------------------------------------------------------------


def _deep_update(dst: Dict[str, Any], src: Mapping[str, Any]) -> None:
    for key, value in src.items():
        if isinstance(value, Mapping) and isinstance(dst.get(key), dict):
            _deep_update(dst[key], value)
        else:
            dst[key] = copy.deepcopy(value)


# Mappings and lists inside one layer: the config itself is 4 levels deep,
# so 32 is never needed; deeper (or self-referring) values would end the
# merge and the error messages, which walk values recursively, in a
# RecursionError. MAX_LAYER_VALUES bounds the walk over YAML aliases that
# share one value many times ("billion laughs").
MAX_NESTING = 32
MAX_LAYER_VALUES = 100_000


def _safe_load(stream: Any, what: str) -> Any:
    """yaml.safe_load; nesting too deep for PyYAML's recursive reader is a
    ConfigError naming `what` (other YAML errors are left to the caller,
    whose message says which input it was)."""
    try:
        return yaml.safe_load(stream)
    except RecursionError:
        raise ConfigError(f"{what} nests mappings or lists too deeply to "
                          f"read (no key takes more than {MAX_NESTING} "
                          "levels)") from None


def _check_layer_shape(layer: Mapping[str, Any], source: str) -> None:
    """Refuses a layer nested more than MAX_NESTING deep, one that contains
    itself (a YAML alias cycle such as `&x {a: *x}`) or one with more than
    MAX_LAYER_VALUES values, naming the key path. Iterative on purpose."""
    stack = [(layer, "", 0, frozenset())]
    seen = 0
    while stack:
        value, path, depth, parents = stack.pop()
        if isinstance(value, Mapping):
            items = [(f"{path}.{k}" if path else str(k), v)
                     for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        where = path or "the top level"
        if id(value) in parents:
            raise ConfigError(f"{source}: {where} contains itself (a YAML "
                              "alias cycle such as `&x {a: *x}`)")
        if depth >= MAX_NESTING:
            raise ConfigError(f"{source}: {where} nests mappings or lists "
                              f"more than {MAX_NESTING} levels deep; no key "
                              "takes that")
        seen += len(items)
        if seen > MAX_LAYER_VALUES:
            raise ConfigError(f"{source}: more than {MAX_LAYER_VALUES} "
                              "values (YAML aliases repeating one value?); "
                              "a config has a few hundred")
        inner = parents | {id(value)}
        stack.extend((v, p, depth + 1, inner) for p, v in items)


def read_yaml_file(path: str) -> Dict[str, Any]:
    """Reads a YAML mapping; a missing file or bad YAML names the file."""
    if not os.path.isfile(path):
        raise ConfigError(f"config file {path!r} does not exist")
    try:
        with open(path, encoding="utf-8") as f:
            data = _safe_load(f, f"config file {path!r}")
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path!r} is not valid YAML: {e}")
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {path!r} is not UTF-8 text (byte "
                          f"{e.start}: {e.reason})")
    except OSError as e:
        raise ConfigError(f"config file {path!r} cannot be read: "
                          f"{e.strerror}")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path!r} must hold a mapping, "
                          f"got {type(data).__name__}")
    return data


def _split_top_level(text: str, sep: str = ",") -> List[str]:
    """Splits on `sep` outside brackets and quotes: `a=[1,2],b=3`."""
    parts, depth, quote, current = [], 0, None, []
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


_DOTTED_ASSIGNMENT = re.compile(r"^\s*[A-Za-z_][\w.]*\s*=")


def parse_params_override(text: str) -> Dict[str, Any]:
    """Parses --params_override: a YAML file, a YAML/JSON string, or a.b=1,c=2."""
    text = text.strip()
    if not text:
        return {}
    if os.path.isfile(text):
        return read_yaml_file(text)
    if text.endswith((".yaml", ".yml")) and "\n" not in text and ":" not in text:
        raise ConfigError(f"--params_override file {text!r} does not exist")
    if _DOTTED_ASSIGNMENT.match(text):
        tree: Dict[str, Any] = {}
        for item in _split_top_level(text):
            if "=" not in item:
                raise ConfigError(f"--params_override item {item!r} is not "
                                  "of the form key.path=value")
            key, raw = item.split("=", 1)
            try:
                value = _safe_load(raw, f"--params_override "
                                   f"{key.strip()}") if raw.strip() else None
            except yaml.YAMLError as e:
                raise ConfigError(f"--params_override {key.strip()}: cannot "
                                  f"parse value {raw!r}: {e}")
            try:
                config_tree.put(tree, key.strip(), value)
            except config_tree.TreeError as e:
                raise ConfigError(f"--params_override: {e}")
        return tree
    try:
        data = _safe_load(text, "--params_override")
    except yaml.YAMLError as e:
        raise ConfigError(f"--params_override is not valid YAML/JSON and not "
                          f"a file: {e}")
    if not isinstance(data, dict):
        raise ConfigError(f"--params_override must be a mapping, a file or "
                          f"a.b=value pairs; got {text!r}")
    return data


# --------------------------------------------------------------------------
# Building the typed config
# --------------------------------------------------------------------------


Layer = Tuple[str, Mapping[str, Any]]


class _Builder:
    """Merges layers into a typed config, remembering each leaf's source."""

    def __init__(self) -> None:
        self.sources: Dict[str, str] = {}
        self.errors: List[str] = []

    def error(self, path: str, message: str) -> None:
        source = self.sources.get(path, DEFAULTS)
        self.errors.append(f"{path}: {message} (from {source})")

    def merge(self, tree: Dict[str, Any], layer: Mapping[str, Any],
              source: str, cls: type, prefix: str = "") -> None:
        """Applies one layer onto `tree`, rejecting keys `cls` lacks."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        hints = _type_hints(cls)
        for key, value in layer.items():
            path = f"{prefix}{key}"
            if key not in fields:
                self.sources[path] = source
                self.error(path, f"unknown key; valid keys here: "
                                 f"{', '.join(sorted(fields))}")
                continue
            sub = _dataclass_of(hints[key])
            if sub is not None and isinstance(value, Mapping):
                if not isinstance(tree.get(key), dict):
                    tree[key] = dataclasses.asdict(sub())
                self.merge(tree[key], value, source, sub, path + ".")
            else:
                tree[key] = copy.deepcopy(value)
                self._mark(path, value, source)

    def _mark(self, path: str, value: Any, source: str) -> None:
        self.sources[path] = source
        if isinstance(value, Mapping):
            for k, v in value.items():
                self._mark(f"{path}.{k}", v, source)

    def build(self, cls: type, tree: Mapping[str, Any], prefix: str = ""):
        """Turns a merged tree into dataclasses, checking every leaf's type."""
        kwargs = {}
        hints = _type_hints(cls)
        for f in dataclasses.fields(cls):
            path = f"{prefix}{f.name}"
            if f.name not in tree:
                continue
            value = tree[f.name]
            sub = _dataclass_of(hints[f.name])
            if sub is not None:
                if value is None and _is_optional(hints[f.name]):
                    kwargs[f.name] = None
                elif isinstance(value, Mapping):
                    kwargs[f.name] = self.build(sub, value, path + ".")
                else:
                    self.error(path, f"expected a mapping, got "
                                     f"{type(value).__name__} {value!r}")
                continue
            ok, converted = _coerce(value, hints[f.name])
            if ok:
                kwargs[f.name] = converted
            else:
                self.error(path, f"expected {_type_name(hints[f.name])}, got "
                                 f"{type(value).__name__} {value!r}")
        return cls(**kwargs)


# The dataclasses' annotations are strings (postponed evaluation); resolving
# them was three quarters of build_config's time. Callers only read the dict.
_type_hints = functools.lru_cache(maxsize=None)(typing.get_type_hints)


def _dataclass_of(tp: Any) -> Optional[type]:
    if dataclasses.is_dataclass(tp):
        return tp
    for arg in typing.get_args(tp):
        if dataclasses.is_dataclass(arg):
            return arg
    return None


def _is_optional(tp: Any) -> bool:
    return type(None) in typing.get_args(tp)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Union:
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin in (list, List):
        (item,) = typing.get_args(tp) or (Any,)
        return f"list of {_type_name(item)}"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


# PyYAML reads YAML 1.1, where a float needs a dot and a signed exponent:
# `1e30`, `1e-3` and `2E+5` arrive as strings. A key typed float takes such
# a string as the number it spells (str keys keep their strings).
_FLOAT_TEXT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _is_float_text(value: Any) -> bool:
    return isinstance(value, str) and bool(_FLOAT_TEXT.match(value.strip()))


def _coerce(value: Any, tp: Any) -> Tuple[bool, Any]:
    """Checks `value` against a type hint; ints are accepted as floats."""
    origin = typing.get_origin(tp)
    if origin is Union:
        if float in typing.get_args(tp) and _is_float_text(value):
            return True, float(value)
        for arg in typing.get_args(tp):
            ok, converted = _coerce(value, arg)
            if ok:
                return True, converted
        return False, None
    if origin in (list, List):
        if not isinstance(value, (list, tuple)):
            return False, None
        (item,) = typing.get_args(tp) or (Any,)
        out = []
        for v in value:
            ok, converted = _coerce(v, item)
            if not ok:
                return False, None
            out.append(converted)
        return True, out
    if tp is Any:
        return True, value
    if tp is type(None):
        return value is None, None
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, float(value)
        if _is_float_text(value):
            return True, float(value)
        return False, None
    if tp is str:
        return isinstance(value, str), value
    return isinstance(value, tp), value


# --------------------------------------------------------------------------
# Value checks (after types are right)
# --------------------------------------------------------------------------

# Every numeric key has the range its consumer needs, checked here, before
# TensorFlow starts: a value the check accepts must run (issue 17). Floats
# must be finite and within float32's range (TensorFlow computes in float32,
# where a larger value is inf); no key takes inf or nan. Counts that would
# hang or exhaust memory before the first step when huge have a documented
# maximum; they are generous limits, not tuned to this machine.
FLOAT32_MAX = 3.4028234663852886e38
INT64_MAX = 2 ** 63 - 1
MAX_STEPS = 10 ** 9  # train/evaluation steps, log_steps, warmup_steps, loops
MAX_EPOCHS = 10 ** 4  # epochs; epoch counts of the learning-rate schedule
MAX_EXAMPLES = 2 ** 31 - 1  # num_examples, examples_per_epoch
MAX_BATCH = 2 ** 20  # batch sizes
MAX_IMAGE_SIZE = 8192  # image_size (pixels per side), eval_crop_padding
MAX_CLASSES = 2 ** 20  # num_classes; label_offset
MAX_SYNTHETIC_CHANNELS = 16  # synthetic images; decoded images have 1 or 3
MAX_SHUFFLE_BUFFER = 2 ** 24  # shuffle_buffer_size, file_shuffle_buffer_size
MAX_REPLICAS = 2 ** 16  # dataset num_devices (derived; kept for r2.3 YAMLs)
# Devices and threads of one process. 1,000,000 logical CPU devices or input
# threads made a run hang while its memory grew past 6.9 GB (issue 17).
MAX_GPUS = 64  # runtime.num_gpus, GPUs per process
MAX_CPU_DEVICES = 64  # runtime.cpu_devices, logical CPU devices
MAX_GPU_THREADS = 64  # runtime.per_gpu_thread_count, threads per GPU
MAX_PRIVATE_THREADS = 1024  # runtime.dataset_num_private_threads, per pipeline
MAX_NUM_PACKS = 64  # runtime.num_packs
MAX_TASK_INDEX = 2 ** 16 - 1  # runtime.task_index
MAX_SEED = 2 ** 32 - 1  # runtime.seed (NumPy's seed range, via Keras)
MAX_SECONDS = 7 * 24 * 3600.0  # timeouts and periods: one week
MAX_FUSION_MB = 65536.0  # runtime.horovod.fusion_threshold_mb (64 GB)
MAX_CYCLE_MS = 60000.0  # runtime.horovod.cycle_time_ms (one minute)
MAX_RESNET_CIFAR_DEPTH = 1202  # the deepest CIFAR ResNet He et al. trained
MAX_WIDTH = 64  # resnet_cifar filter multiplier


def _choice(b: _Builder, path: str, value: Any, valid: Sequence[str],
            what: str) -> None:
    if value is not None and value not in valid:
        b.error(path, f"unknown {what} {value!r}; valid: {', '.join(valid)}")


def _reported(b: _Builder, path: str) -> bool:
    """True when `path` already has an error (one message per key)."""
    return any(e.startswith(path + ":") for e in b.errors)


def _finite(x: Any) -> bool:
    """ints are finite (and may exceed what a float holds)."""
    return isinstance(x, int) or math.isfinite(x)


def _fmt(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _in_range(b: _Builder, path: str, value: Any, low: float, high: float,
              low_open: bool = False, high_open: bool = False,
              why: str = "") -> None:
    """`value` (None: unset) must be a finite number in the interval.

    The message names the interval, e.g. "must be in [0, 1], got inf".
    """
    if value is None or _reported(b, path):
        return
    ok = _finite(value) and (low < value if low_open else
                                   low <= value) and (
        value < high if high_open else value <= high)
    if not ok:
        interval = (f"{'(' if low_open else '['}{_fmt(low)}, {_fmt(high)}"
                    f"{')' if high_open else ']'}")
        b.error(path, f"must be in {interval}{why}, got {value}")


def _positive(b: _Builder, path: str, value: Any, allow_zero=False,
              maximum: float = FLOAT32_MAX, why: str = "") -> None:
    """> 0 (>= 0 with allow_zero), finite, and at most `maximum`."""
    if value is None or _reported(b, path):
        return
    bound = ">= 0" if allow_zero else "> 0"
    if not _finite(value) or value < 0 or (value == 0 and not allow_zero) \
            or value > maximum:
        b.error(path, f"must be {bound} and <= {_fmt(maximum)}{why}, "
                      f"got {value}")


def _numeric_leaves(obj: Any, prefix: str = ""):
    """(path, value) of every int/float leaf, list items included."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        path = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            yield from _numeric_leaves(value, path + ".")
        elif isinstance(value, (list, tuple)):
            for v in value:
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    yield path, v
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield path, value


def _check_numbers(cfg: ExperimentConfig, b: _Builder) -> None:
    """The floor under every numeric key, including keys added later
    without a range of their own: finite floats in float32's range, ints
    that fit in 64 bits."""
    for path, value in _numeric_leaves(cfg):
        if _reported(b, path):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            b.error(path, f"must be a finite number, got {value}")
        elif isinstance(value, float) and abs(value) > FLOAT32_MAX:
            b.error(path, f"must be within float32's range (|x| <= "
                          f"{FLOAT32_MAX:g}), got {value:g}")
        elif isinstance(value, int) and abs(value) > INT64_MAX:
            b.error(path, f"must fit in 64 bits (|x| <= {INT64_MAX}), "
                          f"got {value}")


def _validate(cfg: ExperimentConfig, b: _Builder) -> None:
    rt = cfg.runtime
    _choice(b, "mode", cfg.mode, MODES, "mode")
    _choice(b, "runtime.distribution_strategy", rt.distribution_strategy,
            STRATEGIES, "strategy")
    if rt.all_reduce_alg is not None:
        valid = (MULTI_WORKER_ALGS
                 if rt.distribution_strategy == "multi_worker_mirrored"
                 else MIRRORED_ALGS)
        _choice(b, "runtime.all_reduce_alg", rt.all_reduce_alg, valid,
                f"all_reduce_alg for {rt.distribution_strategy}")
    _choice(b, "runtime.gpu_thread_mode", rt.gpu_thread_mode,
            GPU_THREAD_MODES, "gpu_thread_mode")
    _positive(b, "runtime.num_gpus", rt.num_gpus, allow_zero=True,
              maximum=MAX_GPUS, why=" (GPUs per process)")
    _positive(b, "runtime.num_packs", rt.num_packs, maximum=MAX_NUM_PACKS)
    _positive(b, "runtime.cpu_devices", rt.cpu_devices,
              maximum=MAX_CPU_DEVICES,
              why=" (logical CPU devices per process)")
    _positive(b, "runtime.per_gpu_thread_count", rt.per_gpu_thread_count,
              allow_zero=True, maximum=MAX_GPU_THREADS,
              why=" (0: 2 threads per GPU)")
    if rt.per_gpu_thread_count and not rt.gpu_thread_mode and \
            not _reported(b, "runtime.per_gpu_thread_count"):
        b.error("runtime.per_gpu_thread_count", "needs "
                "runtime.gpu_thread_mode (gpu_private, gpu_shared); set it "
                "or set this to 0")
    _positive(b, "runtime.dataset_num_private_threads",
              rt.dataset_num_private_threads, allow_zero=True,
              maximum=MAX_PRIVATE_THREADS,
              why=" (0 or null: the shared pool)")
    _in_range(b, "runtime.task_index", rt.task_index, -1, MAX_TASK_INDEX)
    # Whether it indexes the hosts listed is checked when the cluster is
    # resolved: a TF_CONFIG in the environment wins over these keys.
    _positive(b, "runtime.collective_timeout_seconds",
              rt.collective_timeout_seconds, maximum=MAX_SECONDS)
    _positive(b, "runtime.peer_timeout_seconds", rt.peer_timeout_seconds,
              allow_zero=True, maximum=MAX_SECONDS, why=" (0: wait forever)")
    _positive(b, "runtime.stop_grace_seconds", rt.stop_grace_seconds,
              maximum=MAX_SECONDS)
    _positive(b, "runtime.seed", rt.seed, allow_zero=True, maximum=MAX_SEED)
    _positive(b, "runtime.sample_period_seconds", rt.sample_period_seconds,
              allow_zero=True, maximum=MAX_SECONDS, why=" (0: no sampling)")
    if rt.profile_steps is not None and (
            len(rt.profile_steps) != 2 or
            not 1 <= rt.profile_steps[0] <= rt.profile_steps[1] <= MAX_STEPS):
        b.error("runtime.profile_steps", f"must be [first, last] with "
                f"1 <= first <= last <= {MAX_STEPS}, got {rt.profile_steps}")
    if rt.tpu:
        b.error("runtime.tpu", "TPUs are not supported; set it to null")
    if isinstance(rt.loss_scale, str) and rt.loss_scale != "dynamic":
        b.error("runtime.loss_scale", f"must be a number or 'dynamic', "
                                      f"got {rt.loss_scale!r}")
    elif isinstance(rt.loss_scale, float):
        _positive(b, "runtime.loss_scale", rt.loss_scale)
    if rt.loss_scale is not None and compute_dtype(cfg) != "float16" and \
            not _reported(b, "runtime.loss_scale"):
        b.error("runtime.loss_scale", f"applies to float16 training only; "
                f"this run computes in {compute_dtype(cfg)}")
    if rt.mixed_precision_dtype is not None:
        _choice(b, "runtime.mixed_precision_dtype", rt.mixed_precision_dtype,
                tuple(DTYPE_ALIASES), "dtype")
    for key in ("worker_hosts", "ps_hosts", "chief_host"):
        value = getattr(rt, key)
        for host in (value or "").split(","):
            if value is None:
                continue
            try:
                parse_hostport(host)
            except HostPortError as e:
                b.error(f"runtime.{key}", f"entry {e.text!r} is not host:port "
                        f"or [IPv6]:port: it {e.reason}")
    _choice(b, "runtime.task_type", rt.task_type, ("chief", "worker", "ps"),
            "task_type")
    if (rt.ps_hosts or rt.chief_host) and \
            rt.distribution_strategy != "parameter_server":
        b.error("runtime.ps_hosts", "ps_hosts/chief_host apply to "
                "distribution_strategy parameter_server only")
    hv = rt.horovod
    _positive(b, "runtime.horovod.fusion_threshold_mb",
              hv.fusion_threshold_mb, allow_zero=True, maximum=MAX_FUSION_MB)
    _positive(b, "runtime.horovod.cycle_time_ms", hv.cycle_time_ms,
              maximum=MAX_CYCLE_MS)
    if rt.distribution_strategy != "horovod" and hv != HorovodConfig():
        b.error("runtime.horovod", "Horovod knobs apply to "
                "distribution_strategy horovod only")
    for name in ("train_dataset", "validation_dataset"):
        _validate_dataset(getattr(cfg, name), name, b)
    _validate_input_placement(cfg, b)
    _validate_model(cfg, b)
    tr = cfg.train
    _positive(b, "train.epochs", tr.epochs, maximum=MAX_EPOCHS)
    _positive(b, "train.steps", tr.steps, maximum=MAX_STEPS)
    _positive(b, "train.time_history.log_steps", tr.time_history.log_steps,
              maximum=MAX_STEPS)
    _positive(b, "train.time_history.warmup_steps",
              tr.time_history.warmup_steps, allow_zero=True, maximum=MAX_STEPS)
    _positive(b, "train.time_history.progress_seconds",
              tr.time_history.progress_seconds, maximum=MAX_SECONDS)
    _positive(b, "train.steps_per_loop", tr.steps_per_loop, maximum=MAX_STEPS)
    if _reported(b, "train.steps_per_loop") or \
            _reported(b, "train.time_history.log_steps"):
        pass
    elif tr.set_epoch_loop and tr.steps_per_loop != 1:
        b.error("train.steps_per_loop", f"is {tr.steps_per_loop}, but "
                "train.set_epoch_loop: true already runs one loop per epoch; "
                "set one of them")
    elif tr.steps_per_loop > 1 and \
            tr.time_history.log_steps % tr.steps_per_loop:
        b.error("train.time_history.log_steps",
                f"{tr.time_history.log_steps} is not a multiple of "
                f"train.steps_per_loop {tr.steps_per_loop}; TimeHistory can "
                "only time whole loops")
    _positive(b, "evaluation.epochs_between_evals",
              cfg.evaluation.epochs_between_evals, maximum=MAX_EPOCHS)
    _positive(b, "evaluation.steps", cfg.evaluation.steps, maximum=MAX_STEPS)
    _check_numbers(cfg, b)  # last: keys with their own range report that


def _validate_dataset(ds: DatasetConfig, name: str, b: _Builder) -> None:
    _choice(b, f"{name}.builder", ds.builder, BUILDERS, "builder")
    _choice(b, f"{name}.dtype", ds.dtype, tuple(DTYPE_ALIASES), "dtype")
    _choice(b, f"{name}.layout", ds.layout, ("auto", "classic", "tfds"),
            "layout")
    for key, maximum in (("image_size", MAX_IMAGE_SIZE),
                         ("num_classes", MAX_CLASSES),
                         ("num_examples", MAX_EXAMPLES),
                         ("batch_size", MAX_BATCH),
                         ("num_devices", MAX_REPLICAS)):
        _positive(b, f"{name}.{key}", getattr(ds, key), maximum=maximum)
    if ds.builder == "synthetic":
        _positive(b, f"{name}.num_channels", ds.num_channels,
                  maximum=MAX_SYNTHETIC_CHANNELS)
    elif ds.num_channels not in (1, 3) and \
            not _reported(b, f"{name}.num_channels"):
        b.error(f"{name}.num_channels", f"must be 1 or 3 (decoded images, "
                f"builder {ds.builder}), got {ds.num_channels}")
    for key, maximum in (("shuffle_buffer_size", MAX_SHUFFLE_BUFFER),
                         ("file_shuffle_buffer_size", MAX_SHUFFLE_BUFFER),
                         ("eval_crop_padding", MAX_IMAGE_SIZE)):
        _positive(b, f"{name}.{key}", getattr(ds, key), allow_zero=True,
                  maximum=maximum)
    _positive(b, f"{name}.label_offset", ds.label_offset, allow_zero=True,
              maximum=MAX_CLASSES)
    _in_range(b, f"{name}.min_object_covered", ds.min_object_covered, 0, 1)
    for key, high in (("crop_area_range", 1.0),
                      ("crop_aspect_ratio_range", FLOAT32_MAX)):
        lo_hi = getattr(ds, key)
        if _reported(b, f"{name}.{key}"):
            continue
        if len(lo_hi) != 2 or not all(map(_finite, lo_hi)) or \
                not 0 < lo_hi[0] <= lo_hi[1] <= high:
            b.error(f"{name}.{key}", f"must be [low, high] with "
                    f"0 < low <= high <= {_fmt(high)}, got {lo_hi}")
    if ds.download:
        b.error(f"{name}.download", "downloading data sets at run time is not "
                                    "supported; prepare them first")
    _validate_input_sources(ds, name, b)


def _validate_input_sources(ds: DatasetConfig, name: str, b: _Builder) -> None:
    """The python and zmq builders' own keys (data/python_source.py,
    data/zmq_feed.py)."""
    source = ds.python_source
    if source is not None and (source.count(":") != 1 or
                               not all(source.split(":"))):
        b.error(f"{name}.python_source",
                f"must be 'module:function', got {source!r}")
    if ds.builder == "python" and not source:
        b.error(f"{name}.python_source", "builder python needs "
                "'module:function' (a function returning (images, labels) "
                "batches)")
    if ds.builder == "zmq" and not ds.zmq_endpoints:
        b.error(f"{name}.zmq_endpoints", "builder zmq needs at least one "
                "endpoint, e.g. ['tcp://127.0.0.1:5555']")
    _positive(b, f"{name}.zmq_timeout_seconds", ds.zmq_timeout_seconds,
              maximum=MAX_SECONDS)
    _positive(b, f"{name}.python_timeout_seconds", ds.python_timeout_seconds,
              maximum=MAX_SECONDS)
    _choice(b, f"{name}.synthetic_location", ds.synthetic_location,
            SYNTHETIC_LOCATIONS, "synthetic_location")
    if ds.synthetic_location == "device" and ds.builder != "synthetic":
        b.error(f"{name}.synthetic_location", f"device applies to builder "
                f"synthetic, the builder is {ds.builder!r}; set it to host")
    if ds.synthetic_location == "device" and name != "train_dataset":
        b.error(f"{name}.synthetic_location", "device applies to "
                "train_dataset only (the resident batch feeds the train "
                "step); set it to host")
    address = ds.data_service_address
    if address is not None:
        try:
            parse_hostport(address)
        except HostPortError as e:
            b.error(f"{name}.data_service_address", f"{address!r} is not "
                    f"host:port or [IPv6]:port: it {e.reason}")
    if ds.builder == "service" and not address:
        b.error(f"{name}.data_service_address", "builder service needs the "
                "tf.data service dispatcher's host:port (start one with "
                "python -m official_bench.data.service --dispatcher "
                "--port P)")
    if ds.builder == "service" and ds.skip_bad_records:
        b.error(f"{name}.skip_bad_records", "builder service cannot send "
                "skip_bad_records' Python logging to the tf.data service "
                "workers; set it to false (bad records then stop the run)")
    _positive(b, f"{name}.data_service_timeout_seconds",
              ds.data_service_timeout_seconds, maximum=MAX_SECONDS)


def _validate_input_placement(cfg: ExperimentConfig, b: _Builder) -> None:
    """Input keys that depend on the strategy or on the model's input.

    transfer_uint8 makes the model's input uint8 (it normalises on the
    device), so the validation set it evaluates must send uint8 too.
    """
    train, val = cfg.train_dataset, cfg.validation_dataset
    if train.synthetic_location == "device" and \
            cfg.runtime.distribution_strategy == "parameter_server":
        b.error("train_dataset.synthetic_location", "device is not "
                "supported with parameter_server (its workers build their "
                "own inputs); set it to host")
    evaluates = cfg.mode == "eval" or (cfg.mode == "train_and_eval" and
                                       not cfg.evaluation.skip_eval)
    if evaluates and train.transfer_uint8 != val.transfer_uint8:
        b.error("validation_dataset.transfer_uint8", f"is "
                f"{val.transfer_uint8} but train_dataset.transfer_uint8 is "
                f"{train.transfer_uint8}: the model's input is uint8 exactly "
                "when the training set sends uint8; set both the same")
    if train.transfer_uint8 and cfg.model.model_params.rescale_inputs:
        b.error("model.model_params.rescale_inputs", "expects [0, 1] "
                "inputs, but train_dataset.transfer_uint8 sends 0..255 and "
                "the model normalises them with mean_subtract/standardize; "
                "set one of them false")


def _check_peak_rate(cfg: ExperimentConfig, b: _Builder) -> None:
    """The schedule's rates, initial_lr x global batch x scale_by_batch_size
    x multiplier, are float32 constants: each factor finite was not enough
    (1e30s together made TensorFlow fail before the first step). Checked for
    the largest global batch this config can have, MAX_REPLICAS replicas."""
    lr, ds = cfg.model.learning_rate, cfg.train_dataset
    keys = ("initial_lr", "scale_by_batch_size", "multipliers")
    if any(_reported(b, f"model.learning_rate.{k}") for k in keys) or \
            _reported(b, "train_dataset.batch_size") or \
            lr.compat == "model_garden_r23":  # r2.3: 0.1 per 256 images
        return
    batch = ds.batch_size * (MAX_REPLICAS if ds.use_per_replica_batch_size
                             else 1)
    multiplier = max(lr.multipliers or [1.0]) \
        if lr.name == "piecewise_constant_with_warmup" else 1.0
    scale = batch * lr.scale_by_batch_size if lr.scale_by_batch_size else 1.0
    peak = lr.initial_lr * scale * multiplier
    if peak > FLOAT32_MAX:
        b.error("model.learning_rate.initial_lr", f"x global batch (up to "
                f"{batch}) x scale_by_batch_size x the largest multiplier "
                f"must be <= {FLOAT32_MAX:g} (float32), got {peak:g}; lower "
                "one of them")


def _validate_model(cfg: ExperimentConfig, b: _Builder) -> None:
    m = cfg.model
    _choice(b, "model.name", m.name, MODEL_NAMES, "model")
    _choice(b, "model.optimizer.name", m.optimizer.name, OPTIMIZERS,
            "optimizer")
    _choice(b, "model.learning_rate.name", m.learning_rate.name,
            LR_SCHEDULES, "learning rate schedule")
    _choice(b, "model.loss.name", m.loss.name, LOSSES, "loss")
    _choice(b, "model.model_params.data_format", m.model_params.data_format,
            DATA_FORMATS, "data_format")
    depth = m.model_params.depth
    if m.name == "resnet" and depth is not None and depth not in RESNET_DEPTHS:
        b.error("model.model_params.depth", f"unknown ResNet depth {depth}; "
                f"valid: {', '.join(map(str, RESNET_DEPTHS))}")
    if m.name == "resnet_cifar" and depth is not None and (
            not 8 <= depth <= MAX_RESNET_CIFAR_DEPTH or (depth - 2) % 6):
        b.error("model.model_params.depth", f"resnet_cifar depth must be "
                f"6n+2 in [8, {MAX_RESNET_CIFAR_DEPTH}] (8, 14, 20, 32, 56, "
                f"...), got {depth}")
    _positive(b, "model.model_params.width", m.model_params.width,
              maximum=MAX_WIDTH)
    for key in ("num_classes",):
        _positive(b, f"model.{key}", getattr(m, key), maximum=MAX_CLASSES)
        _positive(b, f"model.model_params.{key}",
                  getattr(m.model_params, key), maximum=MAX_CLASSES)
    _positive(b, "model.model_params.batch_size", m.model_params.batch_size,
              maximum=MAX_BATCH)
    _positive(b, "model.model_params.weight_decay",
              m.model_params.weight_decay, allow_zero=True)
    _in_range(b, "model.loss.label_smoothing", m.loss.label_smoothing, 0, 1,
              high_open=True)
    opt = m.optimizer
    # Keras: SGD and RMSprop momentum and the weight EMA in [0, 1]; a decay
    # rate of 1 never updates rmsprop's mean square or Adam's moments (Adam
    # then divides by 1 - beta**t = 0).
    _in_range(b, "model.optimizer.momentum", opt.momentum, 0, 1)
    _in_range(b, "model.optimizer.moving_average_decay",
              opt.moving_average_decay, 0, 1)
    _in_range(b, "model.optimizer.decay", opt.decay, 0, 1, high_open=True,
              why=" (rmsprop's rho)")
    _in_range(b, "model.optimizer.beta_1", opt.beta_1, 0, 1, high_open=True)
    _in_range(b, "model.optimizer.beta_2", opt.beta_2, 0, 1, high_open=True)
    _positive(b, "model.optimizer.epsilon", opt.epsilon)
    if opt.lookahead:
        b.error("model.optimizer.lookahead", "lookahead is not supported; "
                                             "set it to null or false")
    lr = m.learning_rate
    if lr.compat is not None and lr.compat not in LR_COMPAT:
        b.error("model.learning_rate.compat", f"unknown learning-rate compat "
                f"mode {lr.compat!r}; valid: {', '.join(LR_COMPAT)}, or null "
                f"for official_bench's own schedules")
    if lr.compat == "model_garden_r23" and \
            lr.name != "piecewise_constant_with_warmup":
        b.error("model.learning_rate.compat", f"model_garden_r23 reproduces "
                f"r2.3's piecewise_constant_with_warmup only; name is "
                f"{lr.name!r} (set compat to null)")
    _positive(b, "model.learning_rate.initial_lr", lr.initial_lr)
    _positive(b, "model.learning_rate.scale_by_batch_size",
              lr.scale_by_batch_size, allow_zero=True, why=" (0: no scaling)")
    _positive(b, "model.learning_rate.warmup_epochs", lr.warmup_epochs,
              allow_zero=True, maximum=MAX_EPOCHS)
    _positive(b, "model.learning_rate.decay_epochs", lr.decay_epochs,
              maximum=MAX_EPOCHS)
    _in_range(b, "model.learning_rate.decay_rate", lr.decay_rate, 0, 1,
              low_open=True)
    _positive(b, "model.learning_rate.examples_per_epoch",
              lr.examples_per_epoch, maximum=MAX_EXAMPLES)
    for key, maximum in (("boundaries", MAX_EPOCHS),
                         ("multipliers", FLOAT32_MAX)):
        values = getattr(lr, key) or []
        path = f"model.learning_rate.{key}"
        if not _reported(b, path) and not all(
                _finite(v) and 0 <= v <= maximum for v in values):
            b.error(path, f"every entry must be in [0, {_fmt(maximum)}], "
                          f"got {values}")
    _check_peak_rate(cfg, b)
    if lr.name == "piecewise_constant_with_warmup":
        n_b = len(lr.boundaries or [])
        n_m = len(lr.multipliers or [])
        if n_m != n_b + 1:
            b.error("model.learning_rate.multipliers", f"needs one more entry "
                    f"than boundaries ({n_b} boundaries, {n_m} multipliers)")
    if lr.name == "exponential" and not (lr.decay_epochs and lr.decay_rate):
        b.error("model.learning_rate.decay_epochs", "exponential needs "
                "decay_epochs and decay_rate")
    for key in ("num_classes",):
        mp_value = getattr(m.model_params, key)
        if m.num_classes is not None and mp_value is not None and \
                m.num_classes != mp_value:
            b.error(f"model.model_params.{key}", f"{mp_value} disagrees with "
                    f"model.num_classes {m.num_classes}")
    wanted = m.model_params.num_classes or m.num_classes
    ds_classes = cfg.train_dataset.num_classes
    if wanted is not None and wanted != ds_classes:
        b.error("model.model_params.num_classes", f"{wanted} disagrees with "
                f"train_dataset.num_classes {ds_classes}")
    train_dtype = DTYPE_ALIASES.get(cfg.train_dataset.dtype)
    mp_dtype = DTYPE_ALIASES.get(cfg.runtime.mixed_precision_dtype or "")
    if mp_dtype and train_dtype and train_dtype != "float32" and \
            mp_dtype != train_dtype:
        b.error("runtime.mixed_precision_dtype", f"{mp_dtype} conflicts with "
                f"train_dataset.dtype {train_dtype}")
    if m.loss.name is not None and (
            (m.loss.name == "categorical_crossentropy") !=
            cfg.train_dataset.one_hot):
        b.error("model.loss.name", f"{m.loss.name} does not match "
                f"train_dataset.one_hot {cfg.train_dataset.one_hot}")
    if (m.loss.name == "sparse_categorical_crossentropy" or
            not cfg.train_dataset.one_hot) and m.loss.label_smoothing:
        b.error("model.loss.label_smoothing", "needs one-hot labels "
                "(train_dataset.one_hot: true, categorical_crossentropy)")


def _fill_derived(cfg: ExperimentConfig) -> None:
    """Fills values that follow from others, so the saved config is complete."""
    mp = cfg.model.model_params
    if mp.num_classes is None:
        mp.num_classes = cfg.model.num_classes or cfg.train_dataset.num_classes
    cfg.model.num_classes = mp.num_classes
    if mp.depth is None:
        mp.depth = 50 if cfg.model.name == "resnet" else 20
    if cfg.model.loss.name is None:
        cfg.model.loss.name = ("categorical_crossentropy"
                               if cfg.train_dataset.one_hot
                               else "sparse_categorical_crossentropy")
    if cfg.model.learning_rate.examples_per_epoch is None:
        cfg.model.learning_rate.examples_per_epoch = \
            cfg.train_dataset.num_examples
    for ds in (cfg.train_dataset, cfg.validation_dataset):
        ds.dtype = DTYPE_ALIASES.get(ds.dtype, ds.dtype)
    if cfg.runtime.mixed_precision_dtype is not None:
        cfg.runtime.mixed_precision_dtype = DTYPE_ALIASES.get(
            cfg.runtime.mixed_precision_dtype)
    if cfg.train.time_history.warmup_steps is None:
        cfg.train.time_history.warmup_steps = cfg.train.time_history.log_steps


def compute_dtype(cfg: ExperimentConfig) -> str:
    """float32, float16 or bfloat16: runtime.mixed_precision_dtype wins."""
    return DTYPE_ALIASES.get(cfg.runtime.mixed_precision_dtype or
                             cfg.train_dataset.dtype, "float32")


# --------------------------------------------------------------------------
# Public entry
# --------------------------------------------------------------------------


def build_config(layers: Sequence[Layer], model_type: str = "resnet",
                 dataset: str = "imagenet") -> ExperimentConfig:
    """Merges (source, mapping) layers over the defaults; strict.

    Raises one ConfigError listing every problem, each with its key path and
    the layer it came from.
    """
    b = _Builder()
    tree = base_config(model_type, dataset)
    for source, layer in layers:
        if layer is None:
            continue
        if not isinstance(layer, Mapping):
            raise ConfigError(f"{source}: expected a mapping, got "
                              f"{type(layer).__name__}")
        _check_layer_shape(layer, source)
        b.merge(tree, layer, source, ExperimentConfig)
    cfg = b.build(ExperimentConfig, tree)
    if not b.errors:
        _validate(cfg, b)
    if b.errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(b.errors))
    _fill_derived(cfg)
    return cfg


def load_config(config_file: Optional[str] = None,
                params_override: Union[None, str, Mapping[str, Any],
                                       Sequence[Union[str, Mapping]]] = None,
                overrides: Optional[Mapping[str, Any]] = None,
                model_type: str = "resnet",
                dataset: str = "imagenet") -> ExperimentConfig:
    """defaults -> YAML file -> params_override(s) -> overrides (flags).

    `params_override` takes what --params_override takes (a YAML/JSON string,
    `a.b=1,c=2`, a YAML file path) or a dict, or a list of those.
    """
    layers: List[Layer] = []
    if config_file:
        layers.append((f"file {config_file}", read_yaml_file(config_file)))
    if params_override is not None:
        items = (params_override if isinstance(params_override, (list, tuple))
                 else [params_override])
        for item in items:
            if isinstance(item, Mapping):
                layers.append(("params_override dict", item))
            else:
                layers.append((f"--params_override {_describe(item)}",
                               parse_params_override(item)))
    if overrides:
        layers.append(("flags", overrides))
    return build_config(layers, model_type=model_type, dataset=dataset)


def _describe(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= 60 else text[:57] + "...")
