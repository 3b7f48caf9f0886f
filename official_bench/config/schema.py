"""The configuration's shape: typed dataclasses, valid choices, presets.

Key names and meanings follow Model Garden r2.3's image-classification
configs, so DLPerf's YAML files load unchanged. This module only declares;
reading layers is config/loading.py and config/builder.py, checking them
config/validate.py. Every config dataclass is a ConfigNode, frozen once
validated (config/frozen.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Union

import yaml

from official_bench.config import dotted_keys
from official_bench.config.backends import TRAITS as BACKEND_TRAITS
from official_bench.config.errors import ConfigError
from official_bench.config.frozen import ConfigNode
from official_bench.config.strategies import TRAITS
from official_bench.contracts import dtypes

# Every strategy's name, from its row in config/strategies.py.
STRATEGIES = tuple(TRAITS)
# runtime.backend: tensorflow (tf-keras + tf.distribute) or jax (Keras 3 on
# JAX); what each runs is config/backends.py's.
BACKENDS = tuple(BACKEND_TRAITS)
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
BN_STATISTICS = ("two_pass", "one_pass", "pallas")  # models/bn_statistics.py
DECODES = ("cpu", "cpu_window", "gpu", "gpu_trainer")  # train_dataset.decode
BN_BACKWARDS = ("autodiff", "vjp", "vjp_relu")  # models/bn_backward.py
STEM_POOLS = ("keras", "shifted")  # models/stem_pool.py
# runtime.loss_scale_update: fp16's loss-scaled update through Keras'
# lax.cond, or without it (jax_backend/loss_scale.py).
LOSS_SCALE_UPDATES = ("cond", "select")
GPU_THREAD_MODES = ("gpu_private", "gpu_shared", "global")
# runtime.cpu_kernels: TensorFlow's CPU ops from oneDNN or Eigen; auto picks
# by the CPU's flags (runtime/cpu_kernels.py, docs/cpu_kernels.md).
CPU_KERNELS = ("auto", "onednn", "eigen")


@dataclasses.dataclass
class HorovodConfig(ConfigNode):
    """Horovod knobs (runtime.horovod); passed through and recorded."""
    fp16_allreduce: bool = False  # compress gradients to fp16 on the wire
    fusion_threshold_mb: Optional[float] = None  # HOROVOD_FUSION_THRESHOLD
    cycle_time_ms: Optional[float] = None  # HOROVOD_CYCLE_TIME
    hierarchical_allreduce: bool = False  # HOROVOD_HIERARCHICAL_ALLREDUCE


@dataclasses.dataclass
class RuntimeConfig(ConfigNode):
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
    # tensorflow (tf-keras + tf.distribute) or jax (Keras 3 on JAX, one
    # process per node over all its devices): config/backends.py.
    backend: str = "tensorflow"
    cpu_devices: int = 1  # logical CPU devices for mirrored without GPUs
    # oneDNN or Eigen kernels on the CPU (TF_ENABLE_ONEDNN_OPTS, set by the
    # CLI before TensorFlow loads): auto | onednn | eigen (CPU_KERNELS).
    cpu_kernels: str = "auto"
    # Per-collective timeout (CommunicationOptions.timeout_seconds). Off by
    # default: TensorFlow starts a thread per collective that lives this long,
    # so long runs leak threads until they abort (tensorflow issue 56423).
    collective_timeout_seconds: Optional[float] = None
    peer_timeout_seconds: float = 300.0  # all workers must join by then
    # After SIGTERM/SIGINT the run stops at the next step; if it has not
    # ended this long after the signal, it exits anyway (128 + signal).
    stop_grace_seconds: float = 60.0
    # Set glibc's mmap/trim thresholds back after TensorFlow 2.21 froze them
    # at 128 KiB (host/malloc.py; ~35% of CPU step time here).
    restore_malloc_thresholds: bool = True
    # [first, last]: a profiler trace of those steps into model_dir/profile;
    # their timing is left out of the statistics.
    profile_steps: Optional[List[int]] = None
    # Seconds between utilisation samples (GPU, CPU, RSS, threads) while a
    # run trains (measure/utilisation.py); 0 turns the sampler off.
    sample_period_seconds: float = 1.0
    # Dense peak TFLOP/s of one device for the run's precision, the MFU
    # denominator; null: the peaks table (host/peaks.py), else unknown.
    peak_tflops: Optional[float] = None
    seed: Optional[int] = None
    # XLA's own options for runtime.backend jax, each `--xla_<name>=<value>`
    # or `--xla_<name>`, added to XLA_FLAGS before JAX starts
    # (jax_backend/xla_options.py); refused on tensorflow.
    xla_flags: List[str] = dataclasses.field(default_factory=list)
    # runtime.backend jax, float16: cond (Keras' LossScaleOptimizer) or
    # select (no conditional; jax_backend/loss_scale.py); refused on
    # tensorflow; a no-op without loss scaling.
    loss_scale_update: str = "cond"
    horovod: HorovodConfig = dataclasses.field(default_factory=HorovodConfig)


@dataclasses.dataclass
class DatasetConfig(ConfigNode):
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
    # records pipeline runs on its workers (data/feeds/service.py).
    data_service_address: Optional[str] = None
    data_service_timeout_seconds: float = 60.0
    # runtime.backend jax, builder records: processes that decode (auto:
    # the CPUs this process may use, less one), and the longest wait for
    # one worker's batch (data/feeds/shm_workers.py).
    num_workers: Union[int, str] = "auto"
    worker_timeout_seconds: float = 300.0
    # ... and where JPEGs are decoded: cpu (simplejpeg, in the workers),
    # cpu_window (nvImageCodec's CPU decoder in the workers, the crop
    # window alone), gpu (each worker through nvImageCodec on the run's
    # GPUs: the card's JPEG engines; only the crop window is decoded) or
    # gpu_trainer (the workers pack the JPEGs, nvImageCodec decoders in
    # the trainer's process, one per GPU, decode their windows).
    decode: str = "cpu"
    # decode: gpu_trainer: the share of each packed batch's colour JPEGs
    # the workers decode themselves (their windows, on nvImageCodec's CPU
    # decoder) instead of the trainer's decoder, spread evenly; in [0, 1).
    worker_decode_share: float = 0.0


@dataclasses.dataclass
class ModelParams(ConfigNode):
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
    # null: the stem convolves the image's channels as they come; N (jax
    # only): it sees them padded with zero channels to N, its kernel padded
    # with zero slices at call time (models/channel_pad.py): the same
    # weights and result, another cuDNN kernel (MLPerf pads to 4).
    pad_input_channels: Optional[int] = None
    # two_pass: Keras' batch statistics (mean, then the variance about it);
    # one_pass (jax only): both from one read of the activation
    # (models/bn_statistics.py): the same model, another set of kernels;
    # pallas (jax only): one_pass from one Pallas kernel.
    bn_statistics: str = "two_pass"
    # true (jax, model resnet): the 7x7/2 stem computed as a 4x4/1
    # convolution of the image's 2x2 blocks stacked as channels
    # (models/stem_s2d.py): the same weights and result, other kernels.
    stem_space_to_depth: bool = False
    # keras: the stem's max-pool is Keras' MaxPooling2D (its gradient is
    # XLA's select_and_scatter); shifted (jax only): the maximum of its 9
    # strided slices (models/stem_pool.py): the same output, a fusable
    # gradient.
    stem_pool: str = "keras"
    # autodiff: the batch norms' gradient is JAX's; vjp (jax only): a
    # written-out minimal backward (models/bn_backward.py), any statistics;
    # vjp_relu: vjp, with the ReLU that follows a batch norm inside it.
    bn_backward: str = "autodiff"


@dataclasses.dataclass
class LossConfig(ConfigNode):
    """model.loss: the loss (name, label smoothing)."""
    name: Optional[str] = None  # inferred from dataset.one_hot
    label_smoothing: float = 0.0


@dataclasses.dataclass
class OptimizerConfig(ConfigNode):
    """model.optimizer: which optimizer, and its hyperparameters."""
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
class LearningRateConfig(ConfigNode):
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
class ModelConfig(ConfigNode):
    """model: the network and its loss, optimizer and LR schedule."""
    name: str = "resnet"
    model_params: ModelParams = dataclasses.field(default_factory=ModelParams)
    num_classes: Optional[int] = None
    loss: LossConfig = dataclasses.field(default_factory=LossConfig)
    optimizer: OptimizerConfig = dataclasses.field(
        default_factory=OptimizerConfig)
    learning_rate: LearningRateConfig = dataclasses.field(
        default_factory=LearningRateConfig)


@dataclasses.dataclass
class CallbacksConfig(ConfigNode):
    """train.callbacks: which Keras callbacks the trainer adds."""
    enable_checkpoint_and_export: bool = False
    enable_tensorboard: bool = False
    enable_time_history: bool = True


@dataclasses.dataclass
class TimeHistoryConfig(ConfigNode):
    """train.time_history: the TimeHistory lines' interval, warm-up."""
    log_steps: int = 100
    warmup_steps: Optional[int] = None  # default: the first interval
    progress_seconds: float = 30.0  # a progress line at least this often


@dataclasses.dataclass
class MetricsConfig(ConfigNode):
    """train.metrics: the accuracy metrics training reports."""
    accuracy: Optional[bool] = None
    top_5: Optional[bool] = None


@dataclasses.dataclass
class TensorboardConfig(ConfigNode):
    """train.tensorboard: what the TensorBoard callback writes."""
    track_lr: bool = True
    write_model_weights: bool = False


@dataclasses.dataclass
class TrainConfig(ConfigNode):
    """train: epochs, steps, callbacks, steps per loop, the NaN stop."""
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
class EvalConfig(ConfigNode):
    """evaluation: how often and how long to evaluate, or skip it."""
    epochs_between_evals: int = 1
    steps: Optional[int] = None
    skip_eval: bool = False


@dataclasses.dataclass
class ExportConfig(ConfigNode):
    """export: the checkpoint to export and where it goes."""
    checkpoint: Optional[str] = None
    destination: Optional[str] = None


@dataclasses.dataclass
class HistoryConfig(ConfigNode):
    """The run history (contracts/history_db.py): the chief appends each
    finished training run to an SQLite file; `enabled: false` turns it off.
    `path` unset: official_bench_history.sqlite at the root of the run
    scripts' MODEL_DIR tree, in model_dir/ for the CLI's own
    model_dir/run-<stamp>, else inside the model_dir."""
    enabled: bool = True
    path: Optional[str] = None


def _validation_default() -> DatasetConfig:
    return DatasetConfig(split="validation", num_examples=50000)


@dataclasses.dataclass
class ExperimentConfig(ConfigNode):
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
    history: HistoryConfig = dataclasses.field(default_factory=HistoryConfig)

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


def base_config(model_type: str = "resnet", dataset: str = "imagenet",
                flag: str = "--") -> Dict[str, Any]:
    """The defaults layer for a model type and dataset, as a nested dict.
    `flag`: what goes before "model_type" in an error ("" from the API)."""
    if model_type not in MODEL_NAMES:
        raise ConfigError(f"unknown {flag}model_type {model_type!r}; valid: "
                          f"{', '.join(MODEL_NAMES)}")
    if dataset not in DATASET_PRESETS:
        raise ConfigError(f"unknown {flag}dataset {dataset!r}; valid: "
                          f"{', '.join(DATASET_PRESETS)}")
    tree = dataclasses.asdict(ExperimentConfig())
    tree["model"]["name"] = model_type
    return dotted_keys.deep_merge(tree, DATASET_PRESETS[dataset])
