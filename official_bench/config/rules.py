"""Keys that must agree with each other: what one key needs of another, and
keys that apply to one strategy, builder or precision only.

The values a key may take on its own are config/ranges.py's; config/
validate.py runs both in one order. A strategy's differences are asked of
its traits (config/strategies.py); a strategy name the range check refused
counts as one with none of them.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from official_bench.config import backends
from official_bench.config.builder import LayerBuilder
from official_bench.config.paths import DATA_DIR_READERS, datasets_read
from official_bench.config.ranges import FLOAT32_MAX, MAX_REPLICAS
from official_bench.config.schema import (
    DTYPE_ALIASES,
    DatasetConfig,
    ExperimentConfig,
    HorovodConfig,
    LearningRateConfig,
    RuntimeConfig,
    TrainConfig,
)
from official_bench.config.strategies import TRAITS, StrategyTraits
from official_bench.contracts.hostport import HostListError, split_list


def _traits(rt: RuntimeConfig) -> Optional[StrategyTraits]:
    """The strategy's traits; None for a name the range check refused."""
    return TRAITS.get(rt.distribution_strategy)


def thread_count_needs_mode(rt: RuntimeConfig, b: LayerBuilder) -> None:
    if rt.per_gpu_thread_count and not rt.gpu_thread_mode and \
            not b.reported("runtime.per_gpu_thread_count"):
        b.error("runtime.per_gpu_thread_count", "needs "
                "runtime.gpu_thread_mode (gpu_private, gpu_shared); set it "
                "or set this to 0")


def loss_scale_needs_float16(rt: RuntimeConfig, dtype: str,
                             b: LayerBuilder) -> None:
    """`dtype`: the precision this run computes in (validate.compute_dtype)."""
    if rt.loss_scale is not None and dtype != "float16" and \
            not b.reported("runtime.loss_scale"):
        b.error("runtime.loss_scale", f"applies to float16 training only; "
                f"this run computes in {dtype}")


def cluster_keys_need_parameter_server(rt: RuntimeConfig,
                                       b: LayerBuilder) -> None:
    """ps_hosts and chief_host name the tasks that serve a parameter-server
    coordinator."""
    traits = _traits(rt)
    if (rt.ps_hosts or rt.chief_host) and \
            not (traits and traits.tasks_serve_coordinator):
        b.error("runtime.ps_hosts", "ps_hosts/chief_host apply to "
                "distribution_strategy parameter_server only")


def horovod_knobs_need_horovod(rt: RuntimeConfig, b: LayerBuilder) -> None:
    """Each knob set (not its default) is named with the layer setting it."""
    traits = _traits(rt)
    if traits and traits.horovod_allreduce:
        return
    for knob, default in dataclasses.asdict(HorovodConfig()).items():
        if getattr(rt.horovod, knob) != default:
            b.error(f"runtime.horovod.{knob}", "Horovod knobs apply to "
                    "distribution_strategy horovod only")


def reduction(rt: RuntimeConfig, b: LayerBuilder) -> None:
    """How the strategy places and reduces gradients, from the config alone
    (these were run-time errors in runtime/distribute.py and
    runtime/horovod_backend.py, after TensorFlow had started).

    mirrored's replicas are GPUs exactly when runtime.num_gpus > 0
    (runtime/devices.py); CPU replicas reduce on one device, which has no
    all-reduce algorithm and no packs. multi_worker_mirrored's collectives
    pack by themselves. Horovod runs one process per GPU.
    """
    if b.reported("runtime.distribution_strategy") or \
            b.reported("runtime.num_gpus"):
        return
    traits, packs = _traits(rt), rt.num_packs
    packs_set = packs != 1 and not b.reported("runtime.num_packs")
    if traits.peer_workers and packs_set:
        b.error("runtime.num_packs", f"is {packs}, but it applies to mirrored "
                "only; multi_worker_mirrored packs by itself: set it to 1")
    if traits.gpu_cross_device_ops and rt.num_gpus == 0:
        alg = rt.all_reduce_alg
        if alg is not None and not b.reported("runtime.all_reduce_alg"):
            b.error("runtime.all_reduce_alg", f"{alg!r} needs GPUs "
                    "(runtime.num_gpus > 0); mirrored CPU replicas reduce on "
                    "one device: set it to null")
        if packs_set:
            b.error("runtime.num_packs", f"is {packs}, but it applies to the "
                    "nccl and hierarchical_copy all-reduce on GPUs "
                    "(runtime.num_gpus > 0); mirrored CPU replicas reduce on "
                    "one device: set it to 1")
    if rt.backend == "tensorflow":  # JAX names them as ignored instead
        _reduction_keys_unused(rt, traits, packs_set, b)
    if traits.one_process_per_gpu and rt.num_gpus > 1:
        b.error("runtime.num_gpus", f"is {rt.num_gpus} with horovod: Horovod "
                "runs one process per GPU; set runtime.num_gpus=1 and start "
                "one process per GPU (horovodrun -np <total GPUs> -H "
                "host:<GPUs per host>)")


def _reduction_keys_unused(rt: RuntimeConfig, traits: StrategyTraits,
                           packs_set: bool, b: LayerBuilder) -> None:
    """num_packs and all_reduce_alg set for a strategy that never reads
    them (off, one_device, parameter_server; num_packs with horovod too):
    the run would record a setting it did not use. Horovod keeps an
    all_reduce_alg, which LAUNCHER=horovod inherits from the multi-node
    YAMLs (it reduces with its own fusion knobs, runtime.horovod)."""
    if traits.gpu_cross_device_ops or traits.peer_workers:
        return
    name = rt.distribution_strategy
    if packs_set:
        b.error("runtime.num_packs", f"is {rt.num_packs}, but {name} does "
                "not use it (it packs mirrored's nccl and hierarchical_copy "
                "all-reduce on GPUs): set it to 1")
    alg = rt.all_reduce_alg
    if alg is not None and not traits.keeps_all_reduce_alg and \
            not b.reported("runtime.all_reduce_alg"):
        b.error("runtime.all_reduce_alg", f"{alg!r}, but {name} does not "
                "all-reduce with it (it picks mirrored's GPU all-reduce and "
                "multi_worker_mirrored's collectives): set it to null")


def xla_refusal(traits: StrategyTraits, num_gpus: int, cpu_devices: int,
                num_workers: int) -> Optional[str]:
    """Why TensorFlow 2.21 cannot run an XLA-compiled train step
    (runtime.enable_xla) for this strategy and these devices; None when it
    can. Shared by the config check (worker_hosts) and runtime/distribute.py
    (the resolved cluster, TF_CONFIG's too). Measured on CPU: mirrored over
    2 logical CPUs fails 'Trying to access resource ... located in device
    CPU:1 from device CPU:0', multi_worker_mirrored over 2 CPU workers
    'Collectives are not yet implemented for CPU devices when compiling
    with XLA' (then aborts), parameter_server 'Trying to access resource
    ... located in device /job:ps'."""
    if not traits.jit_compiles_step:
        return (f"{traits.name} keeps the variables on the ps tasks, which an "
                "XLA-compiled step cannot read; set runtime.enable_xla=false")
    if num_gpus > 0 or not traits.collectives_in_step_graph:
        return None
    if traits.cpu_replicas_from_config and \
            not traits.one_cpu_replica_per_worker and cpu_devices > 1:
        return (f"{traits.name} over runtime.cpu_devices={cpu_devices} CPU "
                "replicas cannot run an XLA-compiled step (XLA compiles it "
                "for CPU:0 and cannot read the other CPU devices' "
                "variables); set runtime.enable_xla=false or "
                "runtime.cpu_devices=1")
    if traits.peer_workers and num_workers > 1:
        return (f"{traits.name} over {num_workers} CPU workers cannot run an "
                "XLA-compiled step (TensorFlow has no XLA collectives on "
                "CPU); set runtime.enable_xla=false, or train on GPUs "
                "(runtime.num_gpus > 0)")
    return None


def xla_can_compile_the_step(rt: RuntimeConfig, b: LayerBuilder) -> None:
    """runtime.enable_xla where the strategy's step cannot be compiled
    (xla_refusal), with the workers runtime.worker_hosts lists; a TF_CONFIG
    cluster is checked when the strategy is built."""
    traits = _traits(rt)
    if not rt.enable_xla or rt.backend != "tensorflow" or traits is None or \
            traits.horovod_allreduce or b.reported("runtime.enable_xla") or \
            b.reported("runtime.cpu_devices") or \
            b.reported("runtime.num_gpus"):
        return
    try:
        workers = len(split_list(rt.worker_hosts or ""))
    except HostListError:  # the cluster's own check names it
        return
    why = xla_refusal(traits, rt.num_gpus, rt.cpu_devices, workers)
    if why:
        b.error("runtime.enable_xla", f"is true, but {why}")


def feed_needs_its_source(ds: DatasetConfig, name: str,
                          b: LayerBuilder) -> None:
    """The python and zmq builders' own keys (data/feeds/python_source.py,
    data/feeds/zmq_feed.py)."""
    if ds.builder == "python" and not ds.python_source:
        b.error(f"{name}.python_source", "builder python needs "
                "'module:function' (a function returning (images, labels) "
                "batches)")
    if ds.builder == "zmq" and not ds.zmq_endpoints:
        b.error(f"{name}.zmq_endpoints", "builder zmq needs at least one "
                "endpoint, e.g. ['tcp://127.0.0.1:5555']")


def synthetic_on_device(ds: DatasetConfig, name: str,
                        b: LayerBuilder) -> None:
    if ds.synthetic_location == "device" and ds.builder != "synthetic":
        b.error(f"{name}.synthetic_location", f"device applies to builder "
                f"synthetic, the builder is {ds.builder!r}; set it to host")
    if ds.synthetic_location == "device" and name != "train_dataset":
        b.error(f"{name}.synthetic_location", "device applies to "
                "train_dataset only (the resident batch feeds the train "
                "step); set it to host")


def service_builder(ds: DatasetConfig, name: str, b: LayerBuilder) -> None:
    if ds.builder == "service" and not ds.data_service_address:
        b.error(f"{name}.data_service_address", "builder service needs the "
                "tf.data service dispatcher's host:port (start one with "
                "python -m official_bench.data.feeds.service --dispatcher "
                "--port P)")
    if ds.builder == "service" and ds.skip_bad_records:
        b.error(f"{name}.skip_bad_records", "builder service cannot send "
                "skip_bad_records' Python logging to the tf.data service "
                "workers; set it to false (bad records then stop the run)")


def worker_share_needs_gpu_trainer(ds: DatasetConfig, name: str,
                                   b: LayerBuilder) -> None:
    """worker_decode_share splits decode: gpu_trainer's batches only."""
    key = f"{name}.worker_decode_share"
    if ds.worker_decode_share and ds.decode != "gpu_trainer" and \
            not b.reported(key):
        b.error(key, f"{ds.worker_decode_share} applies to decode: "
                f"gpu_trainer (the share of its JPEGs the input workers "
                f"decode), the decode is {ds.decode!r}; set decode: "
                "gpu_trainer or leave this at 0")


def data_dir_needs_a_reader(cfg: ExperimentConfig, b: LayerBuilder) -> None:
    """A data_dir (--data_dir sets both datasets') on a dataset this mode
    reads with a builder that ignores it would train on other data than
    the user named: refused, naming the builders that read it."""
    for name, ds in datasets_read(cfg):
        if not ds.data_dir or ds.builder in DATA_DIR_READERS or \
                b.reported(f"{name}.builder"):
            continue
        b.error(f"{name}.data_dir", f"{ds.data_dir!r} is not read by "
                f"{name}.builder {ds.builder!r}; builders that read it: "
                f"{', '.join(DATA_DIR_READERS)} (TFRecords: set {name}."
                f"builder=records), or drop data_dir for {ds.builder} data")


def input_placement(cfg: ExperimentConfig, b: LayerBuilder) -> None:
    """Input keys that depend on the strategy or on the model's input.

    transfer_uint8 makes the model's input uint8 (it normalises on the
    device), so the validation set it evaluates must send uint8 too.
    """
    train, val = cfg.train_dataset, cfg.validation_dataset
    traits = _traits(cfg.runtime)
    if train.synthetic_location == "device" and \
            traits and traits.input_via_dataset_creator:
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


def r23_compat_schedule(lr: LearningRateConfig, b: LayerBuilder) -> None:
    if lr.compat == "model_garden_r23" and \
            lr.name != "piecewise_constant_with_warmup":
        b.error("model.learning_rate.compat", f"model_garden_r23 reproduces "
                f"r2.3's piecewise_constant_with_warmup only; name is "
                f"{lr.name!r} (set compat to null)")


def _check_peak_rate(cfg: ExperimentConfig, b: LayerBuilder) -> None:
    """The schedule's rates, initial_lr x global batch x scale_by_batch_size
    x multiplier, are float32 constants: each factor finite was not enough
    (1e30s together made TensorFlow fail before the first step). Checked for
    the largest global batch this config can have, MAX_REPLICAS replicas."""
    lr, ds = cfg.model.learning_rate, cfg.train_dataset
    keys = ("initial_lr", "scale_by_batch_size", "multipliers")
    if any(b.reported(f"model.learning_rate.{k}") for k in keys) or \
            b.reported("train_dataset.batch_size") or \
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


def model(cfg: ExperimentConfig, b: LayerBuilder) -> None:
    """The schedule's shape and peak rate; classes, dtype and loss agree
    with the training set."""
    m = cfg.model
    lr = m.learning_rate
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
                "(train_dataset.one_hot: true, categorical_crossentropy)"
                + ("" if cfg.train_dataset.one_hot else _MODEL_GARDEN_ONE_HOT))
    evaluates = cfg.mode in ("train_and_eval", "eval") and \
        not cfg.evaluation.skip_eval
    if evaluates and \
            cfg.validation_dataset.one_hot != cfg.train_dataset.one_hot:
        # One loss and one accuracy read both sets: the evaluation would
        # fail on the label shapes after the whole training.
        val, train = cfg.validation_dataset, cfg.train_dataset
        b.error("train_dataset.one_hot", f"{train.one_hot}, but "
                f"validation_dataset.one_hot is {val.one_hot}: the loss and "
                "accuracy read one label format for both sets; set both "
                "the same (or evaluation.skip_eval: true)")


# Model Garden's classifier_trainer set one_hot = label_smoothing > 0 for
# both datasets, whatever their one_hot key said (its tpu.yaml has
# one_hot: false with label_smoothing 0.1); here the keys must agree.
_MODEL_GARDEN_ONE_HOT = (
    "; Model Garden's classifier_trainer ignored the datasets' one_hot and "
    "used one-hot labels whenever label_smoothing > 0: to train as it did, "
    "set train_dataset.one_hot: true and validation_dataset.one_hot: true "
    "(or label_smoothing: 0 for integer labels without smoothing)")


def nchw_on_the_cpu(cfg: ExperimentConfig) -> bool:
    """A TensorFlow run that builds a channels_first model and runs it on
    the CPU (export_only builds and saves without running it)."""
    return (cfg.model.model_params.data_format == "channels_first" and
            cfg.runtime.num_gpus == 0 and cfg.runtime.backend == "tensorflow"
            and cfg.mode != "export_only")


def nchw_needs_onednn(why: str) -> str:
    """The refusal of channels_first on Eigen's CPU kernels, whose pooling
    and convolutions take NHWC only ("Default MaxPoolingOp only supports
    NHWC on device type CPU"); oneDNN's take NCHW. `why`: why Eigen."""
    return (f"channels_first cannot run on the CPU with Eigen's kernels "
            f"({why}): they take NHWC only; set model.model_params."
            "data_format to channels_last or auto, or runtime.cpu_kernels "
            "to onednn")


def channels_first_on_eigen(cfg: ExperimentConfig, b: LayerBuilder) -> None:
    """runtime.cpu_kernels eigen with channels_first on the CPU; where
    auto resolves to Eigen, the TensorFlow trainer refuses it once
    TensorFlow says so (runtime/cpu_kernels.nchw_refusal)."""
    if nchw_on_the_cpu(cfg) and cfg.runtime.cpu_kernels == "eigen":
        b.error("model.model_params.data_format",
                nchw_needs_onednn("runtime.cpu_kernels eigen"))


def steps_per_loop(tr: TrainConfig, b: LayerBuilder) -> None:
    """Loops and TimeHistory's intervals: TimeHistory times whole loops."""
    if b.reported("train.steps_per_loop") or \
            b.reported("train.time_history.log_steps"):
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


def backend_runs_it(cfg: ExperimentConfig, b: LayerBuilder) -> None:
    """What runtime.backend cannot run is refused, naming what it runs
    (config/backends.py)."""
    for key, message in backends.refusals(cfg):
        if not b.reported(key):
            b.error(key, message)
