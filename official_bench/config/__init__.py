"""Experiment configuration: typed dataclasses, YAML layers, strict checks.

Key names and meanings follow Model Garden r2.3's image-classification
configs, so DLPerf's YAML files load unchanged. Layers are applied in order:

    defaults -> --config_file -> --params_override -> explicit flags

Every leaf remembers which layer set it, so an error can say where a bad
value came from. Unknown keys, wrong types and invalid values are all
reported as one `ConfigError` before anything runs. TensorFlow-free: the
launcher imports it.

One module per concern (docs/design.md, "Config"):
    schema.py    the dataclasses, valid choices and presets
    loading.py   reading YAML files and --params_override text
    builder.py   merging layers into the typed config, each leaf's source
    ranges.py    the values each key may take (choices, numeric ranges)
    rules.py     keys that must agree with each other
    validate.py  runs ranges and rules in one order; derived values
    frozen.py    a validated config is frozen; replace_keys derives a copy
    layering.py  load_config / build_config: the one layering function
This module re-exports their public names.
"""

from official_bench.config.builder import (
    DEFAULTS,
    Layer,
    LayerBuilder,
    dataclass_of,
)
from official_bench.config.frozen import FrozenConfigError, replace_keys
from official_bench.config.layering import (
    ConfigLike,
    OverrideLike,
    build_config,
    layers_of,
    load_config,
)
from official_bench.config.loading import (
    MAX_LAYER_VALUES,
    MAX_NESTING,
    parse_params_override,
    read_yaml_file,
)
from official_bench.config.ranges import (
    FLOAT32_MAX,
    INT64_MAX,
    MAX_BATCH,
    MAX_CLASSES,
    MAX_CPU_DEVICES,
    MAX_CYCLE_MS,
    MAX_EPOCHS,
    MAX_EXAMPLES,
    MAX_FUSION_MB,
    MAX_GPU_THREADS,
    MAX_GPUS,
    MAX_IMAGE_SIZE,
    MAX_NUM_PACKS,
    MAX_PRIVATE_THREADS,
    MAX_REPLICAS,
    MAX_RESNET_CIFAR_DEPTH,
    MAX_SECONDS,
    MAX_SEED,
    MAX_SHUFFLE_BUFFER,
    MAX_STEPS,
    MAX_SYNTHETIC_CHANNELS,
    MAX_TASK_INDEX,
    MAX_WIDTH,
    check_numbers,
)
from official_bench.config.schema import (
    BUILDERS,
    DATA_FORMATS,
    DATASET_PRESETS,
    DTYPE_ALIASES,
    GPU_THREAD_MODES,
    LOSSES,
    LR_COMPAT,
    LR_SCHEDULES,
    MIRRORED_ALGS,
    MODEL_NAMES,
    MODES,
    MULTI_WORKER_ALGS,
    OPTIMIZERS,
    RESNET_DEPTHS,
    STRATEGIES,
    SYNTHETIC_LOCATIONS,
    CallbacksConfig,
    ConfigError,
    DatasetConfig,
    EvalConfig,
    ExperimentConfig,
    ExportConfig,
    HorovodConfig,
    LearningRateConfig,
    LossConfig,
    MetricsConfig,
    ModelConfig,
    ModelParams,
    OptimizerConfig,
    RuntimeConfig,
    TensorboardConfig,
    TimeHistoryConfig,
    TrainConfig,
    base_config,
)
from official_bench.config.validate import compute_dtype, fill_derived

# The names these had when config was one module (tests use them).
_Builder = LayerBuilder
_check_numbers = check_numbers
_dataclass_of = dataclass_of

__all__ = [
    "BUILDERS", "CallbacksConfig", "ConfigError", "ConfigLike",
    "DATASET_PRESETS", "DATA_FORMATS", "DEFAULTS", "DTYPE_ALIASES",
    "DatasetConfig", "EvalConfig", "ExperimentConfig", "ExportConfig",
    "FLOAT32_MAX", "FrozenConfigError", "GPU_THREAD_MODES", "HorovodConfig",
    "INT64_MAX", "LOSSES", "LR_COMPAT", "LR_SCHEDULES", "Layer",
    "LayerBuilder",
    "LearningRateConfig", "LossConfig", "MAX_BATCH", "MAX_CLASSES",
    "MAX_CPU_DEVICES", "MAX_CYCLE_MS", "MAX_EPOCHS", "MAX_EXAMPLES",
    "MAX_FUSION_MB", "MAX_GPUS", "MAX_GPU_THREADS", "MAX_IMAGE_SIZE",
    "MAX_LAYER_VALUES", "MAX_NESTING", "MAX_NUM_PACKS",
    "MAX_PRIVATE_THREADS", "MAX_REPLICAS", "MAX_RESNET_CIFAR_DEPTH",
    "MAX_SECONDS", "MAX_SEED", "MAX_SHUFFLE_BUFFER", "MAX_STEPS",
    "MAX_SYNTHETIC_CHANNELS", "MAX_TASK_INDEX", "MAX_WIDTH", "MIRRORED_ALGS",
    "MODEL_NAMES", "MODES", "MULTI_WORKER_ALGS", "MetricsConfig",
    "ModelConfig", "ModelParams", "OPTIMIZERS", "OptimizerConfig",
    "OverrideLike", "RESNET_DEPTHS", "RuntimeConfig", "STRATEGIES",
    "SYNTHETIC_LOCATIONS", "TensorboardConfig", "TimeHistoryConfig",
    "TrainConfig", "base_config", "build_config", "check_numbers",
    "compute_dtype", "dataclass_of", "fill_derived", "layers_of",
    "load_config", "parse_params_override", "read_yaml_file", "replace_keys",
]
