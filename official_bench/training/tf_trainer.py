"""A run on the TensorFlow backend (tf-keras + tf.distribute), top to bottom.

`train_and_evaluate` reads in labelled steps: runtime, strategy, model and
compile (training/setup.py), data, resume, callbacks, fit, results,
history. official_bench.trainer chooses this module for
`runtime.backend: tensorflow` (the default, DLPerf's path); the JAX
backend's steps are jax_backend/trainer.py.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, List, Optional

from absl import logging

from official_bench import config as config_lib
from official_bench.config import ConfigError, ExperimentConfig
from official_bench.contracts import stage_line
from official_bench.data.feeds import python_batches, zmq_feed
from official_bench.data.fit_input import fit_input
from official_bench.data.records import file_check
from official_bench.measure import (
    fit_tail,
    flops,
    mfu,
    profiler,
    timing,
    utilisation,
    wait_meter,
)
from official_bench.measure.stages import Stage
from official_bench.runtime import (
    cluster as cluster_lib,
    cpu_kernels,
    distribute,
    precision,
    stop_signals,
)
from official_bench.runtime.keras_setup import keras, tf
from official_bench.runtime.stop_callback import StopCallback
from official_bench.training import checkpoints, nan_guard, run_end
from official_bench.training.run_result import RunResult
from official_bench.training.setup import Prepared, prepare_runtime, setup_run


def train_and_evaluate(cfg: ExperimentConfig) -> RunResult:
    """Runs one experiment described by a validated config (any mode)."""
    rt = cfg.runtime

    # 1. Runtime: devices, threads, cluster, precision.
    replica_devices, cluster = prepare_runtime(rt)
    dtype = config_lib.compute_dtype(cfg)
    refused = cpu_kernels.nchw_refusal(
        cfg, cpu_kernels.settle(rt.cpu_kernels, rt.num_gpus, dtype))
    if refused:  # Eigen's CPU kernels would fail at the first step
        raise ConfigError(refused)
    if rt.seed is not None:
        keras.utils.set_random_seed(rt.seed)
    policy = precision.set_policy(dtype)
    # A process that only serves another's coordinator (runtime/
    # distribute.py) serves until that run is over, and has no result.
    if distribute.serve_if_not_coordinator(rt, cluster):
        return RunResult(config=cfg, model_dir=cfg.model_dir)
    try:
        # 2-4. Strategy, batch plan, model, compile.
        with Stage("building the model"):
            prepared = setup_run(cfg, cluster, replica_devices, dtype, policy)
        if cfg.mode == "eval":
            return _evaluate_only(prepared)
        if cfg.mode == "export_only":
            return _export_only(prepared)
        return _fit(prepared)
    finally:
        precision.reset_policy()


@dataclasses.dataclass
class _Callbacks:
    """What fit is given to measure, guard and stop the run with."""
    time_history: timing.TimeHistory
    timed: bool
    guard: nan_guard.NanGuard
    profile: Optional[profiler.ProfileSteps]
    sampler: Optional[utilisation.UtilisationSampler]
    keras_callbacks: List[Any]


def _fit(prep: Prepared) -> RunResult:
    cfg, plan, model = prep.cfg, prep.plan, prep.model

    # 5. Data.
    evaluate = cfg.mode == "train_and_eval" and not cfg.evaluation.skip_eval
    with Stage("building the input pipeline"):
        train_input = fit_input(prep.dist, cfg.train_dataset,
                                plan.global_batch, True, cfg.runtime.seed or 0)
        val_data = prep.validation_data() if evaluate else None

    # 6. Resume.
    initial_epoch = _resume(prep)
    prep.dist.prepare_fit(model)
    train_input.prepare_fit(model)

    # 7. Callbacks; FLOPs per image counted once, before the first step.
    cbs = _callbacks(prep, initial_epoch * plan.steps_per_epoch)
    cbs.keras_callbacks += file_check.callbacks(train_input.file_check,
                                                cfg.train_dataset)
    with Stage("counting FLOPs"):
        counted = flops.model_flops(model) if cbs.timed else None

    # 8. Fit.
    history, wall = _run_fit(prep, train_input.data, val_data, evaluate,
                             initial_epoch, cbs)
    # Every record file whole, however far fit read (data/records/
    # file_check.py): the same answer in every run.
    file_check.finish(train_input.file_check, cfg.train_dataset)
    prep.finish_validation()
    if cfg.train.callbacks.enable_checkpoint_and_export and cfg.model_dir \
            and prep.dist.saves_checkpoints:
        checkpoints.export_saved_model(
            model, cfg.export.destination or
            os.path.join(cfg.model_dir, "saved_model"), prep.dist.is_chief)

    # 9. Results and 10. history.
    return _results(prep, history, wall, cbs, counted)


def _resume(prep: Prepared) -> int:
    """The epoch to start from: 0, or the latest checkpoint's
    (train.resume_checkpoint), restored into the model."""
    cfg, plan = prep.cfg, prep.plan
    initial_step = 0
    if cfg.train.resume_checkpoint:
        path = checkpoints.latest_checkpoint(cfg.model_dir)
        if path:
            initial_step = checkpoints.restore(
                prep.model, path, check_step=lambda step:
                checkpoints.check_resume_plan(path, step,
                                              plan.steps_per_epoch,
                                              plan.global_batch))
        else:
            logging.info("train.resume_checkpoint: no checkpoint in %s yet; "
                         "starting from scratch", cfg.model_dir)
    initial_epoch = initial_step // plan.steps_per_epoch
    if initial_epoch >= cfg.train.epochs:
        raise ConfigError(
            f"the checkpoint in {cfg.model_dir} is at epoch {initial_epoch} "
            f"(step {initial_step}); train.epochs {cfg.train.epochs} leaves "
            "nothing to train")
    if cfg.train.resume_checkpoint:
        prep.write_params()  # its checkpoint is accepted (or there is none)
    return initial_epoch


def _callbacks(prep: Prepared, initial_step: int) -> _Callbacks:
    """TimeHistory, the NaN guard, the strategy's own, checkpoints, the
    profiler and the utilisation sampler, in that order."""
    cfg, plan, rt = prep.cfg, prep.plan, prep.cfg.runtime
    th = cfg.train.time_history
    time_history = timing.TimeHistory(
        plan.global_batch, th.log_steps, plan.total_steps,
        progress_seconds=th.progress_seconds, initial_step=initial_step)
    timed = cfg.train.callbacks.enable_time_history and \
        prep.dist.logs_throughput
    guard = nan_guard.NanGuard(cfg.train.stop_on_nan, th.log_steps,
                               initial_step)
    callbacks = prep.dist.callbacks() + ([time_history] if timed else []) + \
        [guard]
    if prep.dist.saves_checkpoints:
        callbacks += checkpoints.build_callbacks(cfg)
    profile = profiler.ProfileSteps(
        rt.profile_steps, profiler.trace_dir(cfg.model_dir),
        initial_step) if rt.profile_steps else None
    callbacks += [profile] if profile else []
    sampler = utilisation.build(rt.sample_period_seconds)
    callbacks += [sampler] if sampler else []
    return _Callbacks(time_history=time_history, timed=timed, guard=guard,
                      profile=profile, sampler=sampler,
                      keras_callbacks=callbacks)


def _run_fit(prep: Prepared, data, val_data, evaluate: bool,
             initial_epoch: int, cbs: _Callbacks):
    """model.fit under the stop-signal handler; (history, wall seconds)."""
    cfg, plan = prep.cfg, prep.plan
    logging.info("Training %s for epochs %d..%d x %d steps", prep.model.name,
                 initial_epoch + 1, cfg.train.epochs, plan.steps_per_epoch)
    with Stage(stage_line.training(  # no done line if fit raises
            initial_epoch * plan.steps_per_epoch + 1, plan.total_steps),
            heartbeat=0):
        return _fit_under_signals(prep, data, val_data, evaluate,
                                  initial_epoch, cbs)


def _input_ends():
    """A zmq feed waiting for a batch stops waiting when training ends (its
    producers may have stopped; fit's teardown would wait out the
    timeout)."""
    return keras.callbacks.LambdaCallback(
        on_train_end=lambda logs: zmq_feed.end_of_training())


def _fit_under_signals(prep: Prepared, data, val_data, evaluate: bool,
                       initial_epoch: int, cbs: _Callbacks):
    """model.fit under the stop-signal handler. A failure after a signal
    or a lost peer is reported as that cause."""
    cfg, plan, rt = prep.cfg, prep.plan, prep.cfg.runtime
    start = time.perf_counter()
    tail = fit_tail.FitTail()  # last callback: says what fit does after it
    first = Stage("tracing and compiling the first step").start()
    with stop_signals.StopOnSignal(rt.stop_grace_seconds,
                                   log=logging.warning) as stopper:
        try:
            history = prep.model.fit(
                data, epochs=cfg.train.epochs, initial_epoch=initial_epoch,
                steps_per_epoch=plan.steps_per_epoch,
                callbacks=cbs.keras_callbacks + [StopCallback(
                    stopper, initial_epoch * plan.steps_per_epoch),
                    _input_ends(), tail, _ends_at_first_step(first)],
                validation_data=val_data,
                validation_steps=plan.eval_steps if evaluate else None,
                validation_freq=plan.eval_epochs if evaluate else 1,
                verbose=0)
        except Exception as e:
            # A stopped worker leaves its peers mid-collective; what fails
            # after that is a consequence, the signal is the cause.
            if stopper.requested:
                raise stop_signals.run_stopped(
                    stopper.signum, stopper.step, plan.total_steps) from e
            if prep.cluster.peers():
                lost = cluster_lib.lost_peers_error(
                    prep.cluster, stopper.step, plan.total_steps)
                if lost is not None:
                    raise lost from e
            raise
        finally:
            first.end(ok=False)  # fit raised before its first step ended
            tail.returned()
            if cbs.sampler:  # Keras skips on_train_end when fit raises
                cbs.sampler.on_train_end()
    if stopper.requested:
        raise stop_signals.run_stopped(stopper.signum, stopper.step,
                                       plan.total_steps)
    _check_input_lasted(cfg, stopper.step, plan.total_steps)
    return history, cbs.time_history.wall_time or time.perf_counter() - start


class InputExhausted(RuntimeError):
    """fit ended before train.steps because the training input ran out."""


def _check_input_lasted(cfg: ExperimentConfig, step: int, total: int) -> None:
    """tf-keras ends fit early, with a warning only, when the dataset runs
    out (a python_source that ends): the run would then report a result
    for fewer steps than asked. One line instead, naming the source."""
    if step >= total:
        return
    raise InputExhausted(python_batches.ran_out_message(
        cfg.train_dataset, "train_dataset", step, total))


def _ends_at_first_step(stage: Stage):
    """A callback ending ``stage`` when the first step (or loop) ends;
    it reads no logs, so Keras converts none to numpy."""
    callback = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: stage.end())
    callback._supports_tf_logs = True  # pylint: disable=protected-access
    return callback


def _results(prep: Prepared, history, wall: float, cbs: _Callbacks,
             counted: Optional[mfu.ModelFlops]) -> RunResult:
    """The evaluation said, then the end of the run (training/run_end.py):
    statistics, the summary line, result.json and the run history."""
    hist = {k: [float(v) for v in vals] for k, vals in history.history.items()}
    evaluation = {k[4:]: vals[-1] for k, vals in hist.items()
                  if k.startswith("val_") and vals}
    if evaluation:
        run_end.log_evaluation(prep.plan, evaluation)
    result = run_end.finish(_run_end(prep, hist, evaluation, wall, cbs,
                                     counted))
    prep.dist.report_finished()
    return result


def _run_end(prep: Prepared, hist, evaluation, wall: float,
             cbs: _Callbacks, counted) -> run_end.RunEnd:
    """What this backend hands the end of the run: the TimeHistory clock
    (when timed), the input wait tf.data measured, TensorFlow's TF32 rule,
    the CPU-kernel note."""
    cfg = prep.cfg
    environment = prep.environment()
    return run_end.RunEnd(
        cfg=cfg, plan=prep.plan, dtype=prep.dtype,
        clock=cbs.time_history if cbs.timed else None, guard=cbs.guard,
        history=hist, evaluation=evaluation, model=prep.model,
        environment=environment, task=prep.task(),
        result_path=prep.result_path, num_workers=prep.dist.num_workers,
        counted=counted,
        tf32=tf.config.experimental.tensor_float_32_execution_enabled(),
        wall_time=wall,
        excluded_steps=cbs.profile.traced if cbs.profile else None,
        sampler=cbs.sampler,
        input_wait=_input_wait(cfg, prep) if cbs.timed else None,
        summary_note=cpu_kernels.summary_note(environment))


def _input_wait(cfg: ExperimentConfig, prep: Prepared):
    """The training input's wait (measure/wait_meter.py), and a warning with
    the input_bench command when it is more than 10% of the time."""
    if not prep.dist.traits.measures_input_wait:
        return None  # their datasets are not metered (input_wait.py)
    local_replicas = prep.plan.num_replicas // prep.dist.num_workers
    wait = wait_meter.TRAIN_METER.summary(wait_meter.warmup_skip(
        cfg.train.time_history.warmup_steps, local_replicas))
    params = os.path.join(cfg.model_dir, "params.yaml") \
        if cfg.model_dir and prep.dist.is_chief else None
    wait_meter.warn_if_input_bound(wait, wait_meter.tf_data_hint(
        params if params and os.path.isfile(params) else None))
    return wait


def _evaluate_only(prep: Prepared) -> RunResult:
    """--mode=eval: the latest checkpoint in model_dir on the validation
    set."""
    cfg = prep.cfg
    path = checkpoints.require_checkpoint(cfg)
    # A stage, so a signal here names it ("stopped by SIGINT while
    # evaluating the checkpoint ...; no result written").
    with Stage(f"evaluating the checkpoint ({prep.plan.eval_steps} "
               "steps)"):
        step = checkpoints.restore(prep.model, path, for_training=False)
        evaluation = prep.model.evaluate(prep.validation_data(),
                                        steps=prep.plan.eval_steps,
                                        verbose=0, return_dict=True)
        prep.finish_validation()
    evaluation = {k: float(v) for k, v in evaluation.items()}
    run_end.log_evaluation(prep.plan, evaluation)
    if prep.result_path:
        prep.result_path = prep.result_path.replace(".json", "_eval.json")
    prep.write(None, {}, evaluation, {"checkpoint": path, "step": step})
    return RunResult(config=cfg, evaluation=evaluation,
                     environment=prep.environment(), model_dir=cfg.model_dir,
                     result_path=prep.result_path, model=prep.model)


def _export_only(prep: Prepared) -> RunResult:
    """--mode=export_only: a SavedModel from the latest (or named)
    checkpoint."""
    cfg = prep.cfg
    path = checkpoints.require_checkpoint(cfg, cfg.export.checkpoint)
    checkpoints.restore(prep.model, path, for_training=False)
    destination = cfg.export.destination or os.path.join(
        cfg.model_dir or ".", "saved_model")
    checkpoints.export_saved_model(prep.model, destination,
                                   prep.dist.is_chief)
    return RunResult(config=cfg, environment=prep.environment(),
                     model_dir=cfg.model_dir, model=prep.model)
