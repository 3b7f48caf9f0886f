"""The end of a timed run, one way for both backends: statistics, the FLOP
check and peak, the summary line, result.json, the run history, RunResult.

Each backend's trainer (training/tf_trainer.py, jax_backend/trainer.py)
hands `finish` one `RunEnd`: what its loop measured, and as fields the few
facts that differ by backend (whether float32 matrix work ran as TF32, the
input wait, its environment record, its words for the summary line).
TensorFlow-free.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

from absl import logging

from official_bench.config import ExperimentConfig, strategies
from official_bench.contracts import (
    flops as flops_contract,
    utilisation as usage_contract,
)
from official_bench.data.records import record_problems
from official_bench.measure import mfu, stats as stats_lib, wait_meter
from official_bench.measure.intervals import IntervalClock
from official_bench.measure.sampling import Sampler
from official_bench.training import run_history, run_record
from official_bench.training.batch_plan import BatchPlan
from official_bench.training.nan_check import NanCheck
from official_bench.training.run_result import RunResult


@dataclasses.dataclass(frozen=True)
class RunEnd:
    """What a backend's loop leaves for the end of its run."""
    cfg: ExperimentConfig
    plan: BatchPlan
    dtype: str
    clock: Optional[IntervalClock]  # None: the run was not timed
    guard: NanCheck
    history: Dict[str, List[float]]
    evaluation: Dict[str, float]
    model: Any
    environment: Dict[str, Any]  # result.json's; gpu_names picks the peak
    task: Dict[str, Any]  # result.json's: type, index, tag, is_chief
    result_path: Optional[str]  # None: this process writes no result
    num_workers: int
    counted: Optional[mfu.ModelFlops] = None  # FLOPs per image
    tf32: bool = False  # float32 matrix work ran as TF32 (the peak follows)
    wall_time: Optional[float] = None  # None: the clock's
    excluded_steps: Optional[Tuple[int, int]] = None  # profiled steps
    sampler: Optional[Sampler] = None
    input_wait: Optional[Dict[str, Any]] = None  # wait_meter's summary
    summary_note: str = ""  # the backend's last words on the summary line
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def is_chief(self) -> bool:
        return bool(self.task.get("is_chief"))


def finish(end: RunEnd) -> RunResult:
    """Statistics, the summary line, result.json and the run history; the
    RunResult a notebook or the CLI gets."""
    stats = statistics(end)
    usage = end.sampler.summary() if end.sampler else None
    flops_item, peak = flops(end, stats)
    skipped = records_skipped(end.cfg)
    wait_note = None if end.input_wait else _unmeasured_wait(end, stats)
    if stats is not None:
        # Model Garden's last lines; ours, the summary, stays the last.
        logging.info("Run stats:\n%s", run_stats(end, stats))
        logging.info(stats.summary() + mfu.summary_text(flops_item, peak) +
                     wait_meter.note(end.input_wait, wait_note) +
                     end.guard.summary_note() + _skipped_note(skipped) +
                     usage_contract.summary_text(usage) + end.summary_note)
    record = None
    fields = end.guard.result_fields()
    warnings = fields.pop("warnings", []) + _skipped_warnings(skipped)
    if warnings:
        fields["warnings"] = warnings
    if end.result_path:
        record = run_record.write_result(
            end.result_path, end.cfg, stats=stats,
            environment=end.environment, history=end.history,
            evaluation=end.evaluation,
            model=run_record.model_summary(end.model), task=end.task,
            extra=dict(fields, input_wait=end.input_wait,
                       input_wait_note=wait_note, records_skipped=skipped,
                       **{usage_contract.KEY: usage,
                          flops_contract.KEY: flops_item}, **end.extra))
    # The history: after the timed loop, so it cannot show in img/s.
    run_history.record_run(end.cfg, record, end.is_chief)
    return RunResult(config=end.cfg, stats=stats, history=end.history,
                     evaluation=end.evaluation, environment=end.environment,
                     model_dir=end.cfg.model_dir,
                     result_path=end.result_path, model=end.model,
                     flops=flops_item, records_skipped=skipped,
                     warnings=warnings, input=end.extra.get("input"),
                     input_wait=end.input_wait)


def log_evaluation(plan: BatchPlan, metrics: Dict[str, float]) -> None:
    """The evaluation's line, the same on both backends: the images it
    covered (every one of its steps is a whole global batch), then the
    metrics: `official_bench: evaluation: 20 images (5 steps of 4),
    accuracy 0.2500, loss 1.3863`."""
    logging.info("official_bench: evaluation: %d images (%d step%s of %d), "
                 "%s", plan.eval_steps * plan.eval_global_batch,
                 plan.eval_steps, "s" * (plan.eval_steps != 1),
                 plan.eval_global_batch, ", ".join(
                     f"{k} {v:.4f}" for k, v in sorted(metrics.items())))


def run_stats(end: RunEnd, stats: stats_lib.ThroughputStats
              ) -> Dict[str, float]:
    """Model Garden's closing `Run stats:` dict (its common.build_stats),
    for harnesses that grep it, with the keys this run can fill: the last
    evaluation's and the last epoch's loss and top-1, and
    avg_exp_per_second, this run's average (the mean of its interval rates
    after warm-up; Model Garden's counted warm-up in)."""
    out: Dict[str, float] = {}
    ev, hist = end.evaluation or {}, end.history or {}
    for key, value in (("accuracy_top_1", ev.get("accuracy")),
                       ("eval_loss", ev.get("loss")),
                       ("loss", (hist.get("loss") or [None])[-1]),
                       ("training_accuracy_top_1",
                        (hist.get("accuracy") or [None])[-1])):
        if value is not None:
            out[key] = float(value)
    out["avg_exp_per_second"] = stats.average_examples_per_second
    return out


def records_skipped(cfg: ExperimentConfig) -> Optional[Dict[str, int]]:
    """result.json's records_skipped: the bad records this process skipped
    in this run, per split of each dataset with skip_bad_records (its
    input workers' included); None where no dataset skips."""
    splits = [ds.split for ds in (cfg.train_dataset, cfg.validation_dataset)
              if ds.skip_bad_records]
    if not splits:
        return None
    return {split: record_problems.PROCESS.count(split) for split in splits}


def _unmeasured_wait(end: RunEnd,
                     stats: Optional[stats_lib.ThroughputStats]) -> str:
    """Why this run has no input wait (wait_meter.unmeasured_note)."""
    rt = end.cfg.runtime
    unmetered = rt.backend == "tensorflow" and not strategies.traits(
        rt.distribution_strategy).measures_input_wait
    return wait_meter.unmeasured_note(
        unmetered_strategy=rt.distribution_strategy if unmetered else None,
        timed=end.clock is not None,
        steps=stats.total_steps if stats else None,
        warmup_steps=end.cfg.train.time_history.warmup_steps)


def _skipped_note(skipped: Optional[Dict[str, int]]) -> str:
    """The summary line's words for skipped records; "" for none."""
    total = sum((skipped or {}).values())
    if not total:
        return ""
    return f"; {total} bad record(s) skipped (" + ", ".join(
        f"{split} {n}" for split, n in skipped.items() if n) + ")"


def _skipped_warnings(skipped: Optional[Dict[str, int]]) -> List[str]:
    """result.json's warnings for skipped records (the extractor passes
    them on)."""
    return [f"{n} bad record(s) skipped in {split} (skip_bad_records: "
            "true): the run read the rest"
            for split, n in (skipped or {}).items() if n]


def statistics(end: RunEnd) -> Optional[stats_lib.ThroughputStats]:
    """The run's throughput statistics from its clock; None untimed."""
    clock = end.clock
    if clock is None:
        return None
    th = end.cfg.train.time_history
    return stats_lib.compute_stats(
        clock.intervals, clock.step_times, th.warmup_steps,
        total_steps=clock.step - clock.first_step,
        wall_time=clock.wall_time if end.wall_time is None
        else end.wall_time,
        global_batch=end.plan.global_batch,
        num_replicas=end.plan.num_replicas, log_steps=th.log_steps,
        excluded_steps=end.excluded_steps, first_step=clock.first_step,
        synced=clock.synced)


def flops(end: RunEnd, stats: Optional[stats_lib.ThroughputStats]):
    """result.json's flops object and the peak it used (measure/mfu.py);
    the rate is images / time over the counted window."""
    if end.counted is None or stats is None:
        return None, None
    rt = end.cfg.runtime
    devices = mfu.run_devices(
        num_gpus=rt.num_gpus, gpu_names=end.environment["gpu_names"],
        num_workers=end.num_workers, num_replicas=end.plan.num_replicas,
        dtype=end.dtype, peak_override=rt.peak_tflops, tf32=end.tf32)
    rate = stats.images_per_second_over_window or \
        stats.average_examples_per_second
    return mfu.record(end.counted, devices, rate), devices.peak
