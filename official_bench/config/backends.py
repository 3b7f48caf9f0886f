"""What each `runtime.backend` runs, written once.

`tensorflow` (the default) is tf-keras with tf.distribute: every strategy,
input builder and mode. `jax` is Keras 3 on JAX with keras.distribution's
DataParallel, one process per node driving all its devices: the strategies
that are data-parallel over local devices and peer workers, synthetic data,
training. The config check refuses anything else before a process starts,
in one line that names what works; keys that only tune TensorFlow
(its GPU threads, cuDNN's BN kernel, all-reduce packing) have no effect on
JAX and are named once at the start of a run (`ignored_keys`), never
silently dropped. JAX reads `records` without TensorFlow (decoded in input
worker processes: `num_workers`) and `python` sources' numpy batches;
what that path lacks (tf.data's cache) is refused. TensorFlow-free: it
only describes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Tuple

# The train_dataset.decode choices that decode on a GPU.
GPU_DECODES = ("gpu", "gpu_trainer")


@dataclasses.dataclass(frozen=True)
class BackendTraits:
    """One backend's answers: what it runs (the modules its processes need
    are launch/preflight.py's, which must not import the config)."""
    name: str
    strategies: Tuple[str, ...]  # None: all of config/strategies.py
    builders: Tuple[str, ...]
    modes: Tuple[str, ...]


ALL = None  # every value the config accepts

TRAITS: Dict[str, BackendTraits] = {t.name: t for t in (
    BackendTraits(
        "tensorflow", strategies=ALL, builders=ALL, modes=ALL),
    BackendTraits(
        "jax", strategies=("off", "one_device", "mirrored",
                           "multi_worker_mirrored"),
        builders=("synthetic", "records", "python"),
        modes=("train", "train_and_eval")),
)}

# (key, its value in a config that does not use it): TensorFlow-only tuning
# that the JAX backend has no equivalent for. XLA is always on with JAX.
TF_ONLY_TUNING = (
    ("runtime.enable_xla", False),
    ("runtime.gpu_thread_mode", None),
    ("runtime.per_gpu_thread_count", 0),
    ("runtime.dataset_num_private_threads", None),
    ("runtime.batchnorm_spatial_persistent", False),
    ("runtime.all_reduce_alg", None),
    ("runtime.num_packs", 1),
    ("runtime.collective_timeout_seconds", None),
)

# (key, its default, why the JAX backend cannot honour it): refused.
JAX_REFUSED = (
    ("train.resume_checkpoint", False, "checkpoints"),
    ("train.callbacks.enable_checkpoint_and_export", False, "checkpoints"),
    ("train.callbacks.enable_tensorboard", False, "TensorBoard logs"),
    ("runtime.profile_steps", None, "profiler traces"),
    ("runtime.run_eagerly", False, "eager steps"),
    ("train.steps_per_loop", 1, "several steps per call (each step is "
     "dispatched asynchronously already)"),
    ("train_dataset.transfer_uint8", False, "uint8 transfers"),
)

# (dataset key, its default, what needs TensorFlow): refused on JAX for the
# datasets a run reads.
JAX_DATASET_REFUSED = (
    ("cache", False, "tf.data's in-memory record cache"),
)


# (key, its default, why): JAX-only speed options, refused on tensorflow
# rather than ignored, so that an A/B never compares two identical runs.
TF_REFUSED = (
    ("runtime.xla_flags", [], "the JAX backend sets XLA_FLAGS from it "
     "before JAX starts; TensorFlow's XLA (runtime.enable_xla) reads the "
     "XLA_FLAGS environment variable itself"),
    ("model.model_params.pad_input_channels", None, "the padded stem is "
     "built on Keras 3's ops (models/channel_pad.py)"),
    ("model.model_params.bn_statistics", "two_pass", "one-pass and Pallas "
     "batch statistics are Keras 3 layers (models/bn_statistics.py)"),
    ("model.model_params.stem_space_to_depth", False, "the space-to-depth "
     "stem is built on Keras 3's ops (models/stem_s2d.py)"),
    ("model.model_params.stem_pool", "keras", "the shifted max-pool is "
     "built on Keras 3's ops (models/stem_pool.py)"),
    ("model.model_params.bn_backward", "autodiff", "the written-out batch "
     "norm backward is a JAX custom_vjp (models/bn_backward.py)"),
    ("runtime.loss_scale_update", "cond", "the select update replaces "
     "Keras 3's LossScaleOptimizer conditional in the JAX step "
     "(jax_backend/loss_scale.py)"),
)


def _get(cfg: Any, path: str) -> Any:
    for part in path.split("."):
        cfg = getattr(cfg, part)
    return cfg


def ignored_keys(cfg: Any) -> List[str]:
    """'key value' of each TensorFlow-only knob a jax config sets."""
    if cfg.runtime.backend != "jax":
        return []
    return [f"{key} {_get(cfg, key)!r}" for key, unused in TF_ONLY_TUNING
            if _get(cfg, key) != unused]


def refusals(cfg: Any) -> List[Tuple[str, str]]:
    """(key, message) for each setting `cfg`'s backend cannot run."""
    t = TRAITS.get(cfg.runtime.backend)
    if t is None:
        return []
    if t.name == "tensorflow":
        return [(key, f"{_get(cfg, key)!r} needs runtime.backend jax: {why}")
                for key, default, why in TF_REFUSED
                if _get(cfg, key) != default] + _tf_decode(cfg) + \
            _unread_input_keys(cfg, read_datasets(cfg))
    what = f"runtime.backend {t.name} runs"
    out = []
    rt = cfg.runtime
    if t.strategies is not ALL and rt.distribution_strategy not in \
            t.strategies:
        out.append(("runtime.distribution_strategy",
                    f"{rt.distribution_strategy!r} needs runtime.backend "
                    f"tensorflow; {what} {', '.join(t.strategies)}"))
    datasets = read_datasets(cfg)
    for name in datasets:
        ds = getattr(cfg, name)
        if t.builders is not ALL and ds.builder not in t.builders:
            out.append((f"{name}.builder",
                        f"{ds.builder!r} needs runtime.backend tensorflow; "
                        f"{what} on {', '.join(t.builders)} data"
                        + (" (or set evaluation.skip_eval: true)"
                           if name == "validation_dataset" else "")))
        for key, default, why in JAX_DATASET_REFUSED:
            if ds.builder != "synthetic" and getattr(ds, key) != default:
                out.append((f"{name}.{key}", f"{getattr(ds, key)!r}: {why} "
                            f"needs runtime.backend tensorflow; leave it at "
                            f"{default!r} with {t.name}"))
    if t.modes is not ALL and cfg.mode not in t.modes:
        out.append(("mode", f"{cfg.mode!r} needs runtime.backend tensorflow "
                    f"(checkpoints); {what} {', '.join(t.modes)}"))
    for key, default, why in JAX_REFUSED:
        if _get(cfg, key) != default:
            out.append((key, f"{_get(cfg, key)!r}: {why} need runtime."
                        f"backend tensorflow; leave it at {default!r} with "
                        f"{t.name}"))
    out += _gpu_decode(cfg, datasets) + _unread_input_keys(cfg, datasets)
    scale = rt.loss_scale
    if scale is not None and scale != "dynamic":
        out.append(("runtime.loss_scale", f"{scale!r}: {what} float16 with "
                    "dynamic loss scaling only; leave it unset or 'dynamic'"))
    return out


def read_datasets(cfg: Any) -> List[str]:
    """The dataset sections a run of cfg.mode reads."""
    if cfg.mode == "eval":
        return ["validation_dataset"]
    if cfg.mode == "export_only":
        return []
    if cfg.mode == "train_and_eval" and not cfg.evaluation.skip_eval:
        return ["train_dataset", "validation_dataset"]
    return ["train_dataset"]


def _tf_decode(cfg: Any) -> List[Tuple[str, str]]:
    """decode other than cpu on tensorflow, whose tf.data decodes with
    TensorFlow's own decoder (in the datasets the run reads)."""
    return [(f"{name}.decode", f"{getattr(cfg, name).decode!r} needs "
             "runtime.backend jax (its input workers or trainer decode "
             "through nvImageCodec); tf.data decodes on the CPU: leave it "
             "at 'cpu'")
            for name in read_datasets(cfg)
            if getattr(cfg, name).decode != "cpu"]


# (dataset key, its default): read by the JAX backend's input workers
# (jax_backend/host_feed.py's records_feed) and nothing else.
INPUT_WORKER_KEYS = (("num_workers", "auto"),
                     ("worker_timeout_seconds", 300.0))
# The builders whose record reading skip_bad_records steers (service
# refuses it in config/rules.py).
SKIP_READERS = ("records", "tfds", "service")


def _unread_input_keys(cfg: Any, datasets: List[str]) -> List[Tuple[str, str]]:
    """Input keys set in a dataset the run reads, where nothing reads them:
    the input workers' keys off JAX's records feed, skip_bad_records with a
    builder that reads no record files."""
    workers = "the JAX backend's input workers read it, with builder records"
    out = []
    for name in datasets:
        ds = getattr(cfg, name)
        where = (f"runtime.backend {cfg.runtime.backend}"
                 if cfg.runtime.backend != "jax" else
                 f"builder {ds.builder!r}")
        if cfg.runtime.backend != "jax" or ds.builder != "records":
            out += [(f"{name}.{key}", f"{getattr(ds, key)!r} has no effect "
                     f"with {where} ({workers}); remove it")
                    for key, default in INPUT_WORKER_KEYS
                    if getattr(ds, key) != default]
        if ds.skip_bad_records and ds.builder not in SKIP_READERS:
            out.append((f"{name}.skip_bad_records", f"true has no effect "
                        f"with builder {ds.builder!r} (the records and tfds "
                        "builders read it); remove it"))
    return out


def _gpu_decode(cfg: Any, datasets: List[str]) -> List[Tuple[str, str]]:
    """decode other than cpu where there are records to decode, and GPUs
    where it decodes on them (gpu, gpu_trainer)."""
    out = []
    for name in datasets:
        ds = getattr(cfg, name)
        if ds.decode == "cpu":
            continue
        if ds.builder != "records":
            out.append((f"{name}.decode", f"{ds.decode!r} decodes record "
                        f"files' JPEGs; builder {ds.builder!r} has none: "
                        "leave it at 'cpu'"))
        elif ds.decode in GPU_DECODES and not cfg.runtime.num_gpus:
            out.append((f"{name}.decode", f"{ds.decode!r} needs a GPU, and "
                        "runtime.num_gpus is 0: set num_gpus or decode: "
                        "cpu"))
    return out
