"""A run on the JAX backend (Keras 3 on JAX), top to bottom.

`train_and_evaluate` reads in labelled steps: runtime (Keras 3 on JAX, the
devices, jax.distributed across nodes), plan, model and optimizer, data,
compiled steps, measurement, the loop, results, history. The same config
keys, model definition, precision names, schedules, TimeHistory lines,
statistics, result.json and run history as the TensorFlow backend
(training/tf_trainer.py); what differs is in docs/backends.md.
TensorFlow-free: official_bench.trainer chooses it for `runtime.backend:
jax`, on machines with or without TensorFlow.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
from absl import logging

from official_bench import config as config_lib
from official_bench.config import (
    ConfigError,
    DatasetConfig,
    ExperimentConfig,
    backends,
)
from official_bench.contracts import stage_line
from official_bench.data.records import file_verdict
from official_bench.data.records.framing import FileCheck
from official_bench.host import probes
from official_bench.host.atomic import write_text_atomic
from official_bench.host.write_errors import writing
from official_bench.jax_backend import (
    devices as devices_lib,
    environment,
    flop_check,
    host_feed,
    keras3,
    peers,
    precision,
    schedules,
    step as step_lib,
)
from official_bench.jax_backend.synthetic import SyntheticFeed
from official_bench.measure import mfu, sampling, wait_meter
from official_bench.measure.intervals import IntervalClock
from official_bench.measure.stages import Stage
from official_bench.models import build_model
from official_bench.runtime import stop_signals
from official_bench.training import lr_math, objectives, run_end, run_record
from official_bench.training.batch_plan import BatchPlan, batch_plan
from official_bench.training.nan_check import (
    NanCheck,
    NonFiniteLossError as NanCheckError,
)
from official_bench.training.optimizers import build_optimizer
from official_bench.training.run_result import RunResult

FEED_WAIT = ("host time the training loop waited in its feed's next() / "
             "host time (the steps' input wait; jax_backend/trainer.py)")

Feed = Union[SyntheticFeed, host_feed.HostFeed]  # next(), close()


def train_and_evaluate(cfg: ExperimentConfig) -> RunResult:
    """Trains (and evaluates) one experiment on Keras 3 + JAX."""
    rt = cfg.runtime

    # 1. Runtime: Keras 3 on JAX, the devices, the other nodes.
    loading = "loading Keras 3 and the devices"
    with Stage(loading), stop_signals.ctrl_c_deferred(loading):
        run = devices_lib.start(rt)
    keras = run.keras
    seed = rt.seed if rt.seed is not None else \
        (0 if run.process_count > 1 else None)
    if seed is not None:  # every process must build the same weights
        keras3.set_seed(keras, seed)
    dtype = config_lib.compute_dtype(cfg)
    policy = precision.set_policy(keras, dtype)
    ignored = backends.ignored_keys(cfg)
    if ignored:
        logging.info("official_bench: runtime.backend jax: these only tune "
                     "TensorFlow and have no effect here: %s",
                     ", ".join(ignored))
    try:
        return _train(cfg, run, dtype, policy, seed or 0)
    finally:
        precision.reset_policy(keras)
        keras.distribution.set_distribution(None)


def _train(cfg: ExperimentConfig, run: devices_lib.JaxRuntime, dtype: str,
           policy: str, seed: int) -> RunResult:
    rt, keras, jax = cfg.runtime, run.keras, run.jax

    # 2. Plan: replicas, global batch, steps; the files this process owns
    #    and the decoders its input workers will use, found and checked
    #    before the model is built (minutes on a GPU): a data_dir without
    #    them, or a decode library missing, stops the run here.
    files = {"train": _record_files(cfg.train_dataset, run, True),
             "validation": _eval_files(cfg, run)}
    decoders = _decoders(cfg, run)
    plan = _eval_steps_every_process_gives(cfg, run, batch_plan(
        cfg, len(run.devices)), files["validation"])
    cfg = config_lib.replace_keys(cfg, {
        f"{name}.num_devices": plan.num_replicas
        for name in ("train_dataset", "validation_dataset")})
    result_path = _write_params(cfg, run, plan, policy)

    # 3. Model, optimizer and loss, under the DataParallel distribution:
    #    their variables are the processes' first collectives.
    with peers.before_the_loop(run, plan.total_steps):
        model, optimizer, loss_fn = _model(cfg, run, plan, dtype)

    # 4. Data: synthetic, records or Python batches, sharded over the
    #    mesh's batch axis (records: input workers start decoding now, and
    #    the record files' framing is checked beside training). From here
    #    on, whatever raises closes the feeds: their workers and shared
    #    memory must not outlive a failed run in a notebook.
    with contextlib.ExitStack() as open_feeds:
        feeds = _feeds(cfg, run, plan, seed, open_feeds, files, decoders)
        file_check = file_verdict.start_local(cfg.train_dataset, True)

        # 5. Steps, compiled before the clock starts.
        steps = step_lib.build(jax, keras, model, optimizer, loss_fn,
                               run.mesh, cfg.train_dataset.one_hot,
                               rt.loss_scale_update)
        _compile(steps, _first_batch(feeds["train"], cfg.train_dataset),
                 run, plan)

        # 6. Measurement: FLOPs (once, before the first step), the interval
        #    clock, the NaN check, the input wait, the utilisation sampler.
        with Stage("counting FLOPs"):
            counted = mfu.ModelFlops.of(
                model, keras, lambda m: flop_check.forward_gflop(jax, m),
                "xla")
        loop = _Loop(run=run, plan=plan, steps=steps, feeds=feeds,
                     clock=_clock(cfg, plan), guard=NanCheck(
                         cfg.train.stop_on_nan,
                         cfg.train.time_history.log_steps),
                     wait=wait_meter.InputWaitMeter(FEED_WAIT),
                     sampler=_sampler(rt.sample_period_seconds, run),
                     file_check=file_check, train_data=cfg.train_dataset)

        # 7. The loop; then every record file whole, however far it read
        #    (data/records/file_verdict.py): the same answer in every run.
        history, evaluation = _run_loop(cfg, loop, model.name)
        file_verdict.finish(file_check, cfg.train_dataset)
    step_lib.write_back(model, optimizer, steps.state)

    # 8. Results and 9. history (training/run_end.py).
    return run_end.finish(_run_end(cfg, loop, dtype, model, counted, history,
                                   evaluation, result_path))


def _model(cfg: ExperimentConfig, run, plan: BatchPlan, dtype: str):
    """The model, its optimizer (built) and the loss function."""
    keras = run.keras
    start = time.perf_counter()
    with Stage("building the model"):
        model = build_model(cfg, cfg.runtime.num_gpus, keras=keras,
                            backend="jax")
    logging.info("official_bench: built %s (%d parameters) in %.1f s",
                 model.name, model.count_params(), time.perf_counter() - start)
    _check_kernels(cfg, run)
    lr = cfg.model.learning_rate
    logging.info("%s", lr_math.describe_schedule(lr, plan.global_batch))
    schedule = schedules.build_schedule(keras, lr_math.schedule_of(
        lr, plan.global_batch, plan.total_steps))
    optimizer = precision.wrap_optimizer(
        keras, build_optimizer(cfg.model.optimizer, schedule, keras), dtype)
    optimizer.build(model.trainable_variables)
    return model, optimizer, objectives.build_loss(cfg, keras)


@dataclasses.dataclass
class _Loop:
    """What the training loop drives (the compiled steps and their feeds)
    and what measures it."""
    run: devices_lib.JaxRuntime
    plan: BatchPlan
    steps: step_lib.Steps
    feeds: Dict[str, Feed]
    clock: IntervalClock
    guard: NanCheck
    wait: wait_meter.InputWaitMeter
    sampler: Optional[sampling.Sampler]
    file_check: Optional[FileCheck]  # the training records' framing
    train_data: DatasetConfig


def _check_kernels(cfg: ExperimentConfig, run) -> None:
    """bn_statistics pallas on GPUs: the kernel compiles on this JAX and
    card, or one line before the step is compiled (on CPUs jax.numpy does
    its sums: nothing to check)."""
    if cfg.model.model_params.bn_statistics != "pallas":
        return
    if run.platform == "cpu":
        logging.info("official_bench: bn_statistics pallas on cpu: the "
                     "batch-norm sums come from jax.numpy (one_pass' "
                     "arithmetic); the Pallas kernel is for GPUs")
        return
    from official_bench.models.pallas_moments import compile_error
    why = compile_error(run.local_devices[0], config_lib.compute_dtype(cfg))
    if why:
        raise ConfigError(
            "model.model_params.bn_statistics: pallas: the Pallas kernel "
            f"does not compile on {run.local_devices[0]} with JAX "
            f"{run.jax.__version__} ({why}); use one_pass or two_pass")


def _clock(cfg: ExperimentConfig, plan: BatchPlan) -> IntervalClock:
    th = cfg.train.time_history
    return IntervalClock(plan.global_batch, th.log_steps, plan.total_steps,
                         progress_seconds=th.progress_seconds)


def _write_params(cfg: ExperimentConfig, run, plan: BatchPlan,
                  policy: str) -> Optional[str]:
    """params.yaml on the chief, the one config line; result.json's path."""
    params_path, result_path = run_record.task_files(
        cfg.model_dir, run.tag, run.is_chief)
    if params_path and cfg.mode in ("train", "train_and_eval"):
        with writing(params_path, "the run's configuration"):
            write_text_atomic(params_path, cfg.to_yaml())
    logging.info("official_bench config (mode %s, backend jax on %s, %s, %s, "
                 "%d process(es), %d replica(s), global batch %d, %d steps): "
                 "%s", cfg.mode, run.platform,
                 cfg.runtime.distribution_strategy, policy, run.process_count,
                 plan.num_replicas, plan.global_batch, plan.total_steps,
                 params_path or "\n" + cfg.to_yaml())
    return result_path


def _record_files(ds: DatasetConfig, run, training: bool
                  ) -> Optional[List[str]]:
    """This process's record files of `ds`, found once for the plan and
    the feed (ConfigError naming the key and data_dir when there are
    none); None for builders other than records."""
    if ds.builder != "records":
        return None
    from official_bench.data.records import host_examples
    return host_examples.process_files(ds, run.process_index,
                                       run.process_count, training)


def _eval_files(cfg: ExperimentConfig, run) -> Optional[List[str]]:
    """The validation record files; None when the run does not evaluate
    on records."""
    if not _evaluates(cfg):
        return None
    return _record_files(cfg.validation_dataset, run, False)


def _decoders(cfg: ExperimentConfig, run) -> Dict[str, Optional[tuple]]:
    """The (decoder, GPU ordinals) of each records feed's input workers
    (host_feed.workers_decoder: ConfigError naming the key and what is
    missing), checked once here and kept for the feeds; None for other
    builders."""
    datasets = {"train": (cfg.train_dataset, "train_dataset")}
    if _evaluates(cfg):
        datasets["validation"] = (cfg.validation_dataset,
                                  "validation_dataset")
    return {name: host_feed.workers_decoder(run.jax, ds, key)
            if ds.builder == "records" else None
            for name, (ds, key) in datasets.items()}


def _eval_steps_every_process_gives(cfg: ExperimentConfig, run,
                                    plan: BatchPlan,
                                    files: Optional[List[str]]
                                    ) -> BatchPlan:
    """With several processes evaluating on records, a pass is as many
    batches as the process with the fewest records gives: files that
    split unevenly (64 validation files over 3 processes) would end one
    process's pass early while the others wait in the next eval step's
    collective. Every process counts its share's records (16 bytes read
    per record) and all take the smallest count of batches. `files`: this
    process's validation files (_eval_files). One process: a pass too
    short for the evaluation is refused now, not after training."""
    if files is None:
        return plan
    if run.process_count == 1:
        host_feed.check_eval_pass(files, plan.eval_global_batch,
                                  plan.eval_steps)
        return plan
    from jax.experimental import multihost_utils

    from official_bench.data.records import host_examples
    local_batch = plan.eval_global_batch // run.process_count
    mine = host_examples.records_of(files) // local_batch
    with peers.before_the_loop(run, plan.total_steps):
        every = [int(n) for n in multihost_utils.process_allgather(
            np.int64(mine))]
    fewest = min(every)
    if fewest >= plan.eval_steps:
        return plan
    if fewest == 0:
        raise ConfigError(
            f"validation_dataset: process {every.index(0)} of "
            f"{run.process_count} has fewer records than one batch of "
            f"{local_batch} in its share of the files; use fewer processes "
            "or more validation files")
    logging.warning(
        "official_bench: validation_dataset: an evaluation takes %d batches "
        "of %d, not %d: the processes' shares of the files give %s "
        "batches, and every process must run the same eval steps",
        fewest, plan.eval_global_batch, plan.eval_steps,
        ", ".join(map(str, every)))
    return dataclasses.replace(plan, eval_steps=fewest)


def _feeds(cfg: ExperimentConfig, run, plan: BatchPlan, seed: int,
           closing: contextlib.ExitStack,
           files: Dict[str, Optional[List[str]]],
           decoders: Dict[str, Optional[tuple]]) -> Dict[str, Feed]:
    """The training feed, and the validation feed when the run evaluates
    (a fresh pass of plan.eval_steps batches each time): synthetic
    batches, or records and Python sources from the host
    (jax_backend/host_feed.py), sharded over the mesh's batch axis. Each
    feed's close() goes on `closing` as soon as the feed exists;
    records' feeds read `files` (_record_files) with `decoders`
    (_decoders)."""
    from jax.sharding import NamedSharding, PartitionSpec
    sharding = NamedSharding(run.mesh, PartitionSpec(step_lib.AXIS))
    feeds = {"train": _feed(cfg.train_dataset, run, plan.global_batch,
                            sharding, seed, None, files["train"],
                            plan.total_steps, decoders["train"])}
    closing.callback(feeds["train"].close)
    if _evaluates(cfg):
        feeds["validation"] = _feed(cfg.validation_dataset, run,
                                    plan.eval_global_batch, sharding,
                                    seed + 1, plan.eval_steps,
                                    files["validation"],
                                    decoder=decoders["validation"])
        closing.callback(feeds["validation"].close)
    return feeds


def _feed(ds, run, global_batch: int, sharding, seed: int,
          eval_steps: Optional[int], files: Optional[List[str]] = None,
          total_steps: Optional[int] = None,
          decoder: Optional[tuple] = None) -> Feed:
    """One dataset's feed of this process's share of `global_batch`
    (training: `total_steps` steps, named if the source ends early)."""
    local = global_batch // run.process_count
    if ds.builder == "synthetic":
        return SyntheticFeed(run.jax, ds, local, sharding, seed,
                             run.process_index)
    where = dict(training=eval_steps is None, seed=seed,
                 process_index=run.process_index,
                 process_count=run.process_count, steps_per_pass=eval_steps,
                 total_steps=total_steps)
    if ds.builder == "records":
        return host_feed.records_feed(run.jax, ds, local, sharding,
                                      files=files, decoder=decoder, **where)
    replicas = len(run.local_devices)  # python: one batch per replica
    return host_feed.python_feed(run.jax, ds, local // replicas, replicas,
                                 sharding, **where)


def _evaluates(cfg: ExperimentConfig) -> bool:
    return cfg.mode == "train_and_eval" and not cfg.evaluation.skip_eval


def _first_batch(feed: Feed, ds: DatasetConfig):
    """The first training batch, which the compile is shaped by; awaited
    in a stage of its own, so a stalled input (a dead mount) is not taken
    for a slow compile. Synthetic batches are made at once: no stage."""
    what = _first_batch_wait(feed, ds)
    if what is None:
        return feed.next()
    with Stage(what):
        return feed.next()


def _first_batch_wait(feed: Feed, ds: DatasetConfig) -> Optional[str]:
    """The first batch's stage: what it waits on; None for synthetic."""
    if ds.builder == "synthetic":
        return None
    info = getattr(feed, "info", {})
    if ds.builder == "records":
        source = f"{info.get('num_workers', '?')} input worker(s)"
    else:
        source = f"python_source {ds.python_source}"
    return f"waiting for the first batch of train_dataset ({source})"


def _compile(steps: step_lib.Steps, first_batch, run,
             plan: BatchPlan) -> None:
    """Compiles the train step ahead of the loop for `first_batch`'s
    (images, labels), so the wait is said (a stage line, with a heartbeat
    while XLA compiles)."""
    images, labels = first_batch
    with Stage(f"compiling the train step (XLA, {plan.num_replicas} "
               f"replica(s) on {run.platform})"):
        steps.train = steps.train.lower(steps.state, images,
                                        labels).compile()


def _sampler(period: float, run) -> Optional[sampling.Sampler]:
    """The utilisation sampler (None when runtime.sample_period_seconds is
    0), with XLA's peak memory on GPUs."""
    if not period:
        return None
    gpus = [d for d in run.local_devices if d.platform != "cpu"]
    reader, note = (probes.make_gpu_reader() if gpus
                    else (None, "JAX uses no GPU in this run"))
    return sampling.Sampler(
        period, [f"{d.platform}:{d.id}" for d in gpus], reader, note,
        peak_reader=devices_lib.peak_memory_reader(gpus), allocator="xla")


def _run_loop(cfg: ExperimentConfig, loop: _Loop, model_name: str
              ) -> Tuple[Dict[str, list], Dict[str, float]]:
    """Epochs of steps, evaluation between them; Keras-style history. The
    start line names the built model (resnet8_cifar), as TensorFlow's."""
    plan = loop.plan
    logging.info("Training %s for epochs 1..%d x %d steps", model_name,
                 cfg.train.epochs, plan.steps_per_epoch)
    # (no done line if the loop raises)
    with Stage(stage_line.training(1, plan.total_steps), heartbeat=0):
        return _loop_under_signals(cfg, loop)


def _loop_under_signals(cfg: ExperimentConfig, loop: _Loop
                        ) -> Tuple[Dict[str, list], Dict[str, float]]:
    """The loop under the stop-signal handler; a failure after a signal
    or a lost peer is reported as that cause."""
    run, plan = loop.run, loop.plan
    loop.clock.on_train_begin()
    if loop.sampler:
        loop.sampler.on_train_begin()
    with stop_signals.StopOnSignal(cfg.runtime.stop_grace_seconds,
                                   log=logging.warning) as stopper:
        try:
            history, evaluation = _epochs(cfg, loop, stopper)
        except Exception as e:
            # A stopped or lost process leaves its peers mid-collective:
            # the signal or the lost peer is the cause, not what failed.
            if stopper.requested:
                raise stop_signals.run_stopped(
                    stopper.signum, stopper.step, plan.total_steps) from e
            if run.process_count > 1 and not isinstance(
                    e, (NanCheckError, file_verdict.BadRecordFile) +
                    host_feed.INPUT_ERRORS):
                raise peers.lost_peer(run, stopper.step, plan.total_steps,
                                      e) from e
            raise
        finally:
            loop.clock.on_train_end()
            if loop.sampler:
                loop.sampler.on_train_end()
    if stopper.requested:
        raise stop_signals.run_stopped(stopper.signum, stopper.step,
                                       plan.total_steps)
    return history, evaluation


def _epochs(cfg: ExperimentConfig, loop: _Loop, stopper
            ) -> Tuple[Dict[str, list], Dict[str, float]]:
    """Every epoch until the last or a stop signal, the evaluations the
    plan asks for between them."""
    top1, top5 = objectives.wanted_metrics(cfg)
    history: Dict[str, list] = {}
    evaluation: Dict[str, float] = {}
    for epoch in range(cfg.train.epochs):
        logs = _epoch(loop, stopper, epoch)
        if stopper.requested:
            break
        for k, v in step_lib.epoch_metrics(
                loop.steps.state["sums"], top1, top5).items():
            history.setdefault(k, []).append(v)
        loop.guard.on_epoch_end(epoch, logs)
        if "validation" in loop.feeds and \
                epoch + 1 in loop.plan.eval_epochs:
            evaluation = _evaluate(loop, stopper, top1, top5)
            if stopper.requested:
                break
            for k, v in evaluation.items():
                history.setdefault("val_" + k, []).append(v)
    return history, evaluation


def _epoch(loop: _Loop, stopper, epoch: int) -> Dict[str, Any]:
    """One epoch's steps; logs hold the running loss, unread."""
    run, steps, clock, guard = loop.run, loop.steps, loop.clock, loop.guard
    feed, per_epoch = loop.feeds["train"], loop.plan.steps_per_epoch
    steps.state["sums"] = step_lib.replicated(
        run.jax, run.mesh, step_lib.zero_sums(run.jax))
    clock.on_epoch_begin(epoch)
    guard.on_epoch_begin(epoch)
    logs: Dict[str, Any] = {}
    for batch in range(per_epoch):
        requested = time.perf_counter()
        images, labels = feed.next()
        loop.wait.record(requested, time.perf_counter())
        steps.state, running_loss = steps.train(steps.state, images, labels)
        logs = {"loss": running_loss}
        clock.on_train_batch_end(batch, logs)
        guard.on_train_batch_end(batch, logs)
        file_verdict.stop_if_bad(loop.file_check, loop.train_data)
        stopper.step = epoch * per_epoch + batch + 1
        if stopper.requested:
            break
    return logs


def _evaluate(loop: _Loop, stopper, top1: bool, top5: bool
              ) -> Dict[str, float]:
    """plan.eval_steps eval steps, left out of the interval they fall in;
    a stop signal ends them at the next eval step (nothing logged, {}),
    as it ends the training steps."""
    run, steps = loop.run, loop.steps
    loop.clock.on_test_begin()
    sums = step_lib.replicated(run.jax, run.mesh, step_lib.zero_sums(run.jax))
    state = steps.state
    for _ in range(loop.plan.eval_steps):
        if stopper.requested:
            break
        images, labels = loop.feeds["validation"].next()
        sums = steps.evaluate(state["trainable"], state["non_trainable"],
                              images, labels, sums)
    loop.clock.on_test_end()
    if stopper.requested:
        return {}
    result = step_lib.epoch_metrics(sums, top1, top5)
    run_end.log_evaluation(loop.plan, result)
    return result


def _run_end(cfg: ExperimentConfig, loop: _Loop, dtype: str, model, counted,
             history, evaluation, result_path: Optional[str]
             ) -> run_end.RunEnd:
    """What this backend hands the end of the run: its environment record,
    the feed's input wait and XLA's TF32 rule."""
    run, plan = loop.run, loop.plan
    wait = _input_wait(cfg, loop)
    return run_end.RunEnd(
        cfg=cfg, plan=plan, dtype=dtype, clock=loop.clock, guard=loop.guard,
        history=history, evaluation=evaluation, model=model,
        environment=environment.collect(
            run, environment.versions(run), cfg.runtime.distribution_strategy,
            plan.num_replicas, dtype, len(run.local_devices)),
        task={"type": "worker", "index": run.process_index, "tag": run.tag,
              "is_chief": run.is_chief},
        result_path=result_path, num_workers=run.process_count,
        counted=counted, tf32=_tf32(run), sampler=loop.sampler,
        input_wait=wait, extra=_input_record(loop.feeds["train"]))


def _input_wait(cfg: ExperimentConfig, loop: _Loop) -> Optional[Dict]:
    """The train feed's wait past the warm-up steps (one next() per step,
    wait_meter.warmup_skip), and a warning when it is input-bound."""
    wait = loop.wait.summary(wait_meter.warmup_skip(
        cfg.train.time_history.warmup_steps, 1))
    wait_meter.warn_if_input_bound(wait, _input_hint(cfg.train_dataset))
    return wait


def _input_hint(ds: DatasetConfig) -> str:
    """What an input-bound JAX run can try next."""
    if ds.builder == "records":
        return (f"raise train_dataset.num_workers (now {ds.num_workers!r}) "
                "where cores are free, or measure the input workers alone "
                "with: python benchmarks/input_workers.py")
    if ds.builder == "synthetic":
        return ("synthetic data from the host: synthetic_location: device "
                "keeps the batch on the devices")
    return "the Python source is slower than the steps"


def _input_record(feed: Feed) -> Dict[str, Any]:
    """result.json's `input`: the decoder and workers of a host feed."""
    describe = getattr(feed, "describe", None)
    return {"input": describe()} if describe else {}


def _tf32(run) -> bool:
    """JAX lets XLA run float32 matrix work as TF32 on GPUs unless
    jax_default_matmul_precision asks for more."""
    flag = run.jax.config.jax_default_matmul_precision
    return run.platform == "gpu" and flag in (
        None, "default", "fastest", "tensorfloat32", "bfloat16")
