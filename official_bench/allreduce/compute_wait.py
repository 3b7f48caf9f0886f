"""Compute after a wait: how much slower the model's step is when the
device waited on communication just before it.

The scaling model takes an N-device step's compute from the 1n1g run,
whose steps run back to back; a multi-worker step waits first, and the
compute that follows can be slower (measured 10-60% on 2 CPU cores;
unknown on GPUs, so measured, not assumed). In the all-reduce benchmark's
process the model is compiled once more on the first device alone and
timed in cycles of: sleep as long as the step's communication, one step
(after a wait), one untimed step, one step (back to back), side by side.
The penalty is the slowest process's after-wait median over the chief's
back-to-back median (docs/scaling_model.md).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable, Dict, List, Sequence

WARMUP_STEPS = 5  # untimed steps before the cycles (tracing, first runs)


@dataclasses.dataclass
class Cycles:
    """One process's timings: per cycle, the step after the wait and the
    step back to back (seconds)."""
    after: List[float]
    back: List[float]


@dataclasses.dataclass
class ComputeWait:
    """Compute after a wait of gap_seconds, against back to back.

    after_wait_seconds: the median over cycles of the slowest process's
    step after the wait; back_to_back_seconds: the median of the chief's
    (process 0's) back-to-back step, which runs where the 1n1g baseline
    runs. A multi-worker step waits for its slowest worker, so a slower
    device or one worker's jitter count in the penalty as they do in
    training; per_process keeps each process's own medians.
    """
    gap_seconds: float
    after_wait_seconds: float
    back_to_back_seconds: float
    cycles: int
    processes: int = 1
    per_process: List[Dict[str, float]] = dataclasses.field(
        default_factory=list)
    device: str = ""

    @property
    def penalty(self) -> float:
        return self.after_wait_seconds / self.back_to_back_seconds

    def as_dict(self):
        return dict(dataclasses.asdict(self), penalty=self.penalty)

    def line(self) -> str:
        who = ("the slowest of %d processes" % self.processes
               if self.processes > 1 else "this process")
        return ("Compute after wait: %.1f ms after a %.1f ms wait (%s), "
                "%.1f ms back to back (x%.2f; %d cycles, first device %s)"
                % (self.after_wait_seconds * 1e3, self.gap_seconds * 1e3,
                   who, self.back_to_back_seconds * 1e3, self.penalty,
                   self.cycles, self.device or "of this process"))


def measure(step: Callable[[], None], gap_seconds: float, cycles: int,
            sleep=time.sleep, clock=time.perf_counter) -> Cycles:
    """Times `step` (runs one step and waits for it) after a sleep of
    gap_seconds and back to back, once each per cycle (module docstring).
    The untimed step between them is there so the back-to-back step follows
    a step, not the wait."""
    if cycles < 1:
        raise ValueError(f"cycles must be >= 1, got {cycles}")
    for _ in range(WARMUP_STEPS):
        step()
    after: List[float] = []
    back: List[float] = []
    for _ in range(cycles):
        sleep(gap_seconds)
        for times in (after, None, back):
            start = clock()
            step()
            if times is not None:
                times.append(clock() - start)
    return Cycles(after, back)


def summarize(gap_seconds: float, processes: Sequence[Cycles]) -> ComputeWait:
    """Every process's cycles (process 0 first: the chief) -> ComputeWait.
    Cycles are matched by number; processes run theirs at about the same
    time, and where they do not, the slowest of independent draws is
    still what a step waiting for every worker pays."""
    cycles = min(len(p.after) for p in processes)
    slowest = [max(p.after[c] for p in processes) for c in range(cycles)]
    return ComputeWait(
        gap_seconds, statistics.median(slowest),
        statistics.median(processes[0].back[:cycles]), cycles,
        len(processes), [{"after_wait_seconds": statistics.median(p.after),
                          "back_to_back_seconds": statistics.median(p.back)}
                         for p in processes])


def local_config(cfg, num_replicas: int):
    """The config of one device's share of `cfg`'s step: one_device, the
    per-device batch, synthetic data, no model_dir (writes nothing), the
    same model, precision, XLA and optimizer. A new config: `cfg` is
    frozen and stays as it is."""
    from official_bench.config import replace_keys
    from official_bench.config.batching import global_batch_size
    return replace_keys(cfg, {
        "model_dir": None,
        "runtime.distribution_strategy": "one_device",
        "runtime.num_gpus": min(cfg.runtime.num_gpus, 1),
        "train_dataset.batch_size": global_batch_size(
            cfg.train_dataset, num_replicas) // num_replicas,
        "train_dataset.use_per_replica_batch_size": True,
        "train_dataset.builder": "synthetic"})


def local_step(cfg, replica_devices: List[str], dtype: str, policy: str,
               num_replicas: int) -> Callable[[], None]:
    """One compiled Keras train step of `cfg`'s model on this process's
    first replica device (local_config), as a function that runs it and
    reads the loss back (so the step's time is waited for)."""
    from official_bench.runtime.cluster import Cluster
    from official_bench.training import setup
    local = local_config(cfg, num_replicas)
    prep = setup.setup_run(local, Cluster(workers=[]), replica_devices[:1],
                           dtype, policy)
    fn, iterator = compiled_train_function(prep)
    return lambda: float(fn(iterator)["loss"])


def compiled_train_function(prep):
    """(the compiled train function fit would call, an iterator over the
    run's training input) for the trainer's prepared run: the step outside
    `fit`, for timing single steps."""
    from tf_keras.src.engine import data_adapter

    from official_bench.data.fit_input import fit_input
    train_input = fit_input(prep.dist, prep.cfg.train_dataset,
                            prep.plan.global_batch, True, 0)
    prep.dist.prepare_fit(prep.model)
    train_input.prepare_fit(prep.model)
    handler = data_adapter.get_data_handler(
        x=train_input.data, model=prep.model, steps_per_epoch=10 ** 6,
        epochs=1)
    iterator = next(iter(handler.enumerate_epochs()))[1]
    return prep.model.make_train_function(), iterator
