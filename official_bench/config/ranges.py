"""The values each config key may take: choices and numeric ranges, key by
key.

A key's range may follow from the key that picks it (the builder decides
num_channels', the model name depth's, the strategy all_reduce_alg's).
Keys that must agree with each other are config/rules.py's; config/
validate.py runs both in one order. Each error goes to the LayerBuilder,
which names the key's layer; a key already reported is not checked again.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import Any, Optional, Sequence

from official_bench.config.builder import LayerBuilder
from official_bench.config.schema import (
    BACKENDS,
    BN_BACKWARDS,
    BN_STATISTICS,
    BUILDERS,
    CPU_KERNELS,
    DATA_FORMATS,
    DECODES,
    DTYPE_ALIASES,
    GPU_THREAD_MODES,
    LOSS_SCALE_UPDATES,
    LOSSES,
    LR_COMPAT,
    LR_SCHEDULES,
    MIRRORED_ALGS,
    MODEL_NAMES,
    MODES,
    MULTI_WORKER_ALGS,
    OPTIMIZERS,
    RESNET_DEPTHS,
    STEM_POOLS,
    STRATEGIES,
    SYNTHETIC_LOCATIONS,
    DatasetConfig,
    EvalConfig,
    ExperimentConfig,
    HistoryConfig,
    HorovodConfig,
    LearningRateConfig,
    ModelConfig,
    RuntimeConfig,
    TrainConfig,
)
from official_bench.config.strategies import TRAITS
from official_bench.contracts.hostport import (
    HostListError,
    HostPortError,
    parse_hostport,
    split_list,
)

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
MAX_INPUT_WORKERS = 1024  # num_workers: the JAX feed's decoding processes
MAX_NUM_PACKS = 64  # runtime.num_packs
MAX_TASK_INDEX = 2 ** 16 - 1  # runtime.task_index
MAX_SEED = 2 ** 32 - 1  # runtime.seed (NumPy's seed range, via Keras)
MAX_SECONDS = 7 * 24 * 3600.0  # timeouts and periods: one week
MAX_FUSION_MB = 65536.0  # runtime.horovod.fusion_threshold_mb (64 GB)
MAX_CYCLE_MS = 60000.0  # runtime.horovod.cycle_time_ms (one minute)
MAX_RESNET_CIFAR_DEPTH = 1202  # the deepest CIFAR ResNet He et al. trained
MAX_WIDTH = 64  # resnet_cifar filter multiplier
MAX_XLA_FLAGS = 64  # runtime.xla_flags entries
# runtime.xla_flags: one XLA option as XLA_FLAGS spells it; XLA_FLAGS is
# split at white space, so a value cannot hold any.
LAYOUTS = ("auto", "classic", "tfds")  # dataset layout (records)
XLA_FLAG = re.compile(r"--(xla_[a-z0-9_]+)(=\S*)?")


def _one_of(valid: Sequence[str]) -> str:
    return f"valid: {', '.join(valid)}"


# What the keys with choices or a range take, for their type errors
# (valid_values); the ranges themselves are checked below.
_VALID = {
    "mode": _one_of(MODES),
    "runtime.backend": _one_of(BACKENDS),
    "runtime.distribution_strategy": _one_of(STRATEGIES),
    "runtime.gpu_thread_mode": _one_of(GPU_THREAD_MODES),
    "runtime.cpu_kernels": _one_of(CPU_KERNELS),
    "runtime.loss_scale_update": _one_of(LOSS_SCALE_UPDATES),
    "model.name": _one_of(MODEL_NAMES),
    "model.optimizer.name": _one_of(OPTIMIZERS),
    "model.learning_rate.name": _one_of(LR_SCHEDULES),
    "model.loss.name": _one_of(LOSSES),
    "model.model_params.data_format": _one_of(DATA_FORMATS),
    "model.model_params.bn_statistics": _one_of(BN_STATISTICS),
    "model.model_params.bn_backward": _one_of(BN_BACKWARDS),
    "model.model_params.stem_pool": _one_of(STEM_POOLS),
}
_DATASET_VALID = {
    "builder": _one_of(BUILDERS),
    "dtype": _one_of(tuple(DTYPE_ALIASES)),
    "layout": _one_of(LAYOUTS),
    "decode": _one_of(DECODES),
    "synthetic_location": _one_of(SYNTHETIC_LOCATIONS),
    "num_workers": f"must be 'auto' or 1..{MAX_INPUT_WORKERS}",
    "worker_decode_share": "must be in [0, 1)",
    "worker_timeout_seconds": f"must be > 0 and <= {MAX_SECONDS:g}",
}


def valid_values(path: str) -> Optional[str]:
    """The values key `path` takes where it has choices or a range, for
    its type error (config/builder.py), e.g. "valid: cpu, cpu_window,
    ..."; None for the others."""
    head, _, key = path.partition(".")
    if head in ("train_dataset", "validation_dataset"):
        return _DATASET_VALID.get(key)
    return _VALID.get(path)


def _choice(b: LayerBuilder, path: str, value: Any, valid: Sequence[str],
            what: str) -> None:
    if value is not None and value not in valid:
        b.error(path, f"unknown {what} {value!r}; valid: {', '.join(valid)}")


def _finite(x: Any) -> bool:
    """ints are finite (and may exceed what a float holds)."""
    return isinstance(x, int) or math.isfinite(x)


def _fmt(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _in_range(b: LayerBuilder, path: str, value: Any, low: float, high: float,
              low_open: bool = False, high_open: bool = False,
              why: str = "") -> None:
    """`value` (None: unset) must be a finite number in the interval.

    The message names the interval, e.g. "must be in [0, 1], got inf".
    """
    if value is None or b.reported(path):
        return
    ok = _finite(value) and (low < value if low_open else
                                   low <= value) and (
        value < high if high_open else value <= high)
    if not ok:
        interval = (f"{'(' if low_open else '['}{_fmt(low)}, {_fmt(high)}"
                    f"{')' if high_open else ']'}")
        b.error(path, f"must be in {interval}{why}, got {value}")


def _positive(b: LayerBuilder, path: str, value: Any, allow_zero=False,
              maximum: float = FLOAT32_MAX, why: str = "") -> None:
    """> 0 (>= 0 with allow_zero), finite, and at most `maximum`."""
    if value is None or b.reported(path):
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


def check_numbers(cfg: ExperimentConfig, b: LayerBuilder) -> None:
    """The floor under every numeric key, including keys added later
    without a range of their own: finite floats in float32's range, ints
    that fit in 64 bits."""
    for path, value in _numeric_leaves(cfg):
        if b.reported(path):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            b.error(path, f"must be a finite number, got {value}")
        elif isinstance(value, float) and abs(value) > FLOAT32_MAX:
            b.error(path, f"must be within float32's range (|x| <= "
                          f"{FLOAT32_MAX:g}), got {value:g}")
        elif isinstance(value, int) and abs(value) > INT64_MAX:
            b.error(path, f"must fit in 64 bits (|x| <= {INT64_MAX}), "
                          f"got {value}")


def mode(cfg: ExperimentConfig, b: LayerBuilder) -> None:
    _choice(b, "mode", cfg.mode, MODES, "mode")


def strategy_and_devices(rt: RuntimeConfig, b: LayerBuilder) -> None:
    """The strategy, its all-reduce algorithm, GPUs, CPU devices, threads."""
    _choice(b, "runtime.backend", rt.backend, BACKENDS, "backend")
    _choice(b, "runtime.distribution_strategy", rt.distribution_strategy,
            STRATEGIES, "strategy")
    traits = TRAITS.get(rt.distribution_strategy)
    refused_as_unused = traits is not None and \
        not traits.keeps_all_reduce_alg and rt.backend == "tensorflow"
    if rt.all_reduce_alg is not None and not refused_as_unused:
        # An unknown strategy (refused above) is checked as mirrored is;
        # on TensorFlow, one that all-reduces with none is refused by
        # config/rules.py instead (JAX lists the key as ignored).
        valid = (MULTI_WORKER_ALGS if traits and traits.peer_workers
                 else MIRRORED_ALGS)
        _choice(b, "runtime.all_reduce_alg", rt.all_reduce_alg, valid,
                f"all_reduce_alg for {rt.distribution_strategy}")
    _choice(b, "runtime.gpu_thread_mode", rt.gpu_thread_mode,
            GPU_THREAD_MODES, "gpu_thread_mode")
    _choice(b, "runtime.cpu_kernels", rt.cpu_kernels, CPU_KERNELS,
            "cpu_kernels")
    _choice(b, "runtime.loss_scale_update", rt.loss_scale_update,
            LOSS_SCALE_UPDATES, "loss_scale_update")
    _positive(b, "runtime.num_gpus", rt.num_gpus, allow_zero=True,
              maximum=MAX_GPUS, why=" (GPUs per process)")
    _positive(b, "runtime.num_packs", rt.num_packs, maximum=MAX_NUM_PACKS)
    _positive(b, "runtime.cpu_devices", rt.cpu_devices,
              maximum=MAX_CPU_DEVICES,
              why=" (logical CPU devices per process)")
    _positive(b, "runtime.per_gpu_thread_count", rt.per_gpu_thread_count,
              allow_zero=True, maximum=MAX_GPU_THREADS,
              why=" (0: 2 threads per GPU)")


def runtime_limits(rt: RuntimeConfig, b: LayerBuilder) -> None:
    """Input threads, task index, timeouts, seed, profiling, loss scale."""
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
    _positive(b, "runtime.peak_tflops", rt.peak_tflops, allow_zero=True,
              why=" (TFLOP/s per device; 0 or null: the peaks table)")
    if rt.profile_steps is not None and (
            len(rt.profile_steps) != 2 or
            not 1 <= rt.profile_steps[0] <= rt.profile_steps[1] <= MAX_STEPS):
        b.error("runtime.profile_steps", f"must be [first, last] with "
                f"1 <= first <= last <= {MAX_STEPS}, got {rt.profile_steps}")
    if rt.tpu:  # a flag is dropped, a key set to null
        b.error("runtime.tpu", "TPUs are not supported; " + (
            "drop --tpu" if b.sources.get("runtime.tpu") == "flags"
            else "set it to null"))
    if isinstance(rt.loss_scale, str) and rt.loss_scale != "dynamic":
        b.error("runtime.loss_scale", f"must be a number or 'dynamic', "
                                      f"got {rt.loss_scale!r}")
    elif isinstance(rt.loss_scale, float):
        _positive(b, "runtime.loss_scale", rt.loss_scale)


def precision_and_cluster(rt: RuntimeConfig, b: LayerBuilder) -> None:
    """The mixed-precision dtype, the hosts (host:port) and the task type."""
    if rt.mixed_precision_dtype is not None:
        _choice(b, "runtime.mixed_precision_dtype", rt.mixed_precision_dtype,
                tuple(DTYPE_ALIASES), "dtype")
    for key in ("worker_hosts", "ps_hosts", "chief_host"):
        value = getattr(rt, key)
        if value is None:
            continue
        try:
            hosts = split_list(value) or [value]  # blank: parse_hostport says
        except HostListError as e:
            b.error(f"runtime.{key}", str(e))
            continue
        for host in hosts:
            try:
                parse_hostport(host)
            except HostPortError as e:
                b.error(f"runtime.{key}", f"entry {e.text!r} is not host:port "
                        f"or [IPv6]:port: it {e.reason}")
    _choice(b, "runtime.task_type", rt.task_type, ("chief", "worker", "ps"),
            "task_type")


def horovod(hv: HorovodConfig, b: LayerBuilder) -> None:
    _positive(b, "runtime.horovod.fusion_threshold_mb",
              hv.fusion_threshold_mb, allow_zero=True, maximum=MAX_FUSION_MB)
    _positive(b, "runtime.horovod.cycle_time_ms", hv.cycle_time_ms,
              maximum=MAX_CYCLE_MS)


def dataset(ds: DatasetConfig, name: str, b: LayerBuilder) -> None:
    """A dataset's choices, sizes, augmentation and python_source."""
    _choice(b, f"{name}.builder", ds.builder, BUILDERS, "builder")
    _choice(b, f"{name}.dtype", ds.dtype, tuple(DTYPE_ALIASES), "dtype")
    _choice(b, f"{name}.layout", ds.layout, LAYOUTS, "layout")
    _choice(b, f"{name}.decode", ds.decode, DECODES, "decode")
    _in_range(b, f"{name}.worker_decode_share", ds.worker_decode_share, 0,
              1, high_open=True, why=" (the share of decode: gpu_trainer's "
              "JPEGs the input workers decode; 1, every image in the "
              "workers: use decode: cpu_window)")
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
            not b.reported(f"{name}.num_channels"):
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
        if b.reported(f"{name}.{key}"):
            continue
        if len(lo_hi) != 2 or not all(map(_finite, lo_hi)) or \
                not 0 < lo_hi[0] <= lo_hi[1] <= high:
            b.error(f"{name}.{key}", f"must be [low, high] with "
                    f"0 < low <= high <= {_fmt(high)}, got {lo_hi}")
    if ds.download:
        b.error(f"{name}.download", "downloading data sets at run time is not "
                                    "supported; prepare them first")
    source = ds.python_source
    if source is not None and (source.count(":") != 1 or
                               not all(source.split(":"))):
        b.error(f"{name}.python_source",
                f"must be 'module:function', got {source!r}")


def feed(ds: DatasetConfig, name: str, b: LayerBuilder) -> None:
    """The python and zmq feeds' timeouts; where synthetic data lives."""
    _positive(b, f"{name}.zmq_timeout_seconds", ds.zmq_timeout_seconds,
              maximum=MAX_SECONDS)
    _positive(b, f"{name}.python_timeout_seconds", ds.python_timeout_seconds,
              maximum=MAX_SECONDS)
    _choice(b, f"{name}.synthetic_location", ds.synthetic_location,
            SYNTHETIC_LOCATIONS, "synthetic_location")
    _positive(b, f"{name}.worker_timeout_seconds", ds.worker_timeout_seconds,
              maximum=MAX_SECONDS)
    workers = ds.num_workers
    if workers != "auto" and not b.reported(f"{name}.num_workers") and (
            isinstance(workers, str) or
            not 1 <= workers <= MAX_INPUT_WORKERS):
        quoted = isinstance(workers, str) and workers.strip().isdigit()
        b.error(f"{name}.num_workers", f"must be 'auto' or 1.."
                f"{MAX_INPUT_WORKERS}, got {workers!r}" +
                (f": a string; write {workers.strip()} without quotes"
                 if quoted else ""))


def service_address(ds: DatasetConfig, name: str, b: LayerBuilder) -> None:
    address = ds.data_service_address
    if address is not None:
        try:
            parse_hostport(address)
        except HostPortError as e:
            b.error(f"{name}.data_service_address", f"{address!r} is not "
                    f"host:port or [IPv6]:port: it {e.reason}")


def service_timeout(ds: DatasetConfig, name: str, b: LayerBuilder) -> None:
    _positive(b, f"{name}.data_service_timeout_seconds",
              ds.data_service_timeout_seconds, maximum=MAX_SECONDS)


def model(m: ModelConfig, b: LayerBuilder) -> None:
    """The model's names and sizes, its loss and optimizer, the learning
    rate's compat mode."""
    _choice(b, "model.name", m.name, MODEL_NAMES, "model")
    _choice(b, "model.optimizer.name", m.optimizer.name, OPTIMIZERS,
            "optimizer")
    _choice(b, "model.learning_rate.name", m.learning_rate.name,
            LR_SCHEDULES, "learning rate schedule")
    _choice(b, "model.loss.name", m.loss.name, LOSSES, "loss")
    _choice(b, "model.model_params.data_format", m.model_params.data_format,
            DATA_FORMATS, "data_format")
    _choice(b, "model.model_params.bn_statistics",
            m.model_params.bn_statistics, BN_STATISTICS, "bn_statistics")
    _choice(b, "model.model_params.bn_backward",
            m.model_params.bn_backward, BN_BACKWARDS, "bn_backward")
    _choice(b, "model.model_params.stem_pool", m.model_params.stem_pool,
            STEM_POOLS, "stem_pool")
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


def learning_rate(lr: LearningRateConfig, b: LayerBuilder) -> None:
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
        if not b.reported(path) and not all(
                _finite(v) and 0 <= v <= maximum for v in values):
            b.error(path, f"every entry must be in [0, {_fmt(maximum)}], "
                          f"got {values}")


def train(tr: TrainConfig, b: LayerBuilder) -> None:
    _positive(b, "train.epochs", tr.epochs, maximum=MAX_EPOCHS)
    _positive(b, "train.steps", tr.steps, maximum=MAX_STEPS)
    _positive(b, "train.time_history.log_steps", tr.time_history.log_steps,
              maximum=MAX_STEPS)
    _positive(b, "train.time_history.warmup_steps",
              tr.time_history.warmup_steps, allow_zero=True, maximum=MAX_STEPS)
    _positive(b, "train.time_history.progress_seconds",
              tr.time_history.progress_seconds, maximum=MAX_SECONDS)
    _positive(b, "train.steps_per_loop", tr.steps_per_loop, maximum=MAX_STEPS)


def history(hi: HistoryConfig, b: LayerBuilder) -> None:
    """history.path, when given, names a file (the directory is made)."""
    if hi.path is not None and (not hi.path.strip() or
                                hi.path.endswith(("/", os.sep))):
        b.error("history.path", f"must name a file, got {hi.path!r} (unset "
                "it for the default beside the model_dir, or set "
                "history.enabled: false)")


def evaluation(ev: EvalConfig, b: LayerBuilder) -> None:
    _positive(b, "evaluation.epochs_between_evals", ev.epochs_between_evals,
              maximum=MAX_EPOCHS)
    _positive(b, "evaluation.steps", ev.steps, maximum=MAX_STEPS)


def _xla_flags_problem(flags: Sequence[str]) -> str:
    """The first thing wrong with runtime.xla_flags, or ''."""
    if len(flags) > MAX_XLA_FLAGS:
        return f"{len(flags)} entries; at most {MAX_XLA_FLAGS}"
    seen = set()
    for flag in flags:
        match = XLA_FLAG.fullmatch(flag)
        if not match:
            return (f"entry {flag!r} is not --xla_<name>=<value> or "
                    "--xla_<name> (lower case, no spaces)")
        name = match.group(1)
        if name == "xla_force_host_platform_device_count":
            return f"entry {flag!r}: runtime.cpu_devices sets that one"
        if name in seen:
            return f"--{name} is given twice"
        seen.add(name)
    return ""


def speed_options(cfg: ExperimentConfig, b: LayerBuilder) -> None:
    """runtime.xla_flags' spelling, model_params.pad_input_channels'
    range and the model stem_space_to_depth and stem_pool change (which
    backend takes them: config/backends.py)."""
    problem = _xla_flags_problem(cfg.runtime.xla_flags)
    if problem and not b.reported("runtime.xla_flags"):
        b.error("runtime.xla_flags", problem)
    pad = cfg.model.model_params.pad_input_channels
    channels = cfg.train_dataset.num_channels
    if pad is not None and not channels < pad <= MAX_SYNTHETIC_CHANNELS:
        b.error("model.model_params.pad_input_channels",
                f"must be more than train_dataset.num_channels ({channels}) "
                f"and <= {MAX_SYNTHETIC_CHANNELS}, got {pad} (null: no "
                "padding)")
    mp = cfg.model.model_params
    if mp.stem_space_to_depth and cfg.model.name != "resnet":
        b.error("model.model_params.stem_space_to_depth",
                "rearranges the ImageNet ResNet's 7x7/2 stem; model.name is "
                f"{cfg.model.name!r} (valid: resnet)")
    elif mp.stem_space_to_depth and mp.data_format == "channels_first":
        b.error("model.model_params.stem_space_to_depth",
                "needs data_format channels_last (or auto on jax)")
    if mp.stem_pool == "shifted" and cfg.model.name != "resnet":
        b.error("model.model_params.stem_pool",
                "shifted computes the ImageNet ResNet's stem max-pool; "
                f"model.name is {cfg.model.name!r} (valid: resnet)")
    if mp.bn_statistics == "pallas" and mp.data_format == "channels_first":
        b.error("model.model_params.bn_statistics",
                "pallas reads channels_last activations; needs data_format "
                "channels_last (or auto on jax)")
