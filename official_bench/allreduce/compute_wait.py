"""Compute after a wait: how much slower the model's step is when the
device waited on communication just before it (issue 14 §4).

The scaling model (extract/scaling.py) takes the compute part of an
N-device step from the 1n1g run, whose steps run back to back. A
multi-worker step does not: each one waits on the gradient's all-reduce
and the step's small collectives, and the compute that follows is slower.
On this project's 2-core CPU machine a train step after a 37 ms pause was
15-60% slower than back to back on a busy evening and 10-20% on a quiet
night, whether the pause slept or spun
(benchmarks/idle_gap.py), and a profile of the 2-worker step at 100 Mbit/s
put its compute 5-10 ms above the 1-worker step's (benchmarks/
step_anatomy.py; BENCHMARKS.md, "Where the last ~10 ms goes"). On a GPU
the same can come from clocks or host threads going idle; nobody should
assume either way, so the all-reduce benchmark measures it.

How: in the all-reduce benchmark's process the configured model is
compiled once more by the trainer's own set-up on this process's first
replica device alone (one_device, the per-device batch, synthetic data:
compute only, no collective) and, once the communication is timed, its
step is timed in cycles of: sleep for the step's measured communication (the
gradient's all-reduce plus the k small collectives, as timed in training's
pattern by allreduce/in_step.py), one step (after a wait), one untimed step, one step (back to back). Taking
both kinds of step in every cycle puts them side by side, so a machine
whose speed drifts between minutes moves both. Every process does this at
the same time; the chief gathers their timings (summarize): a step waits
for its slowest worker, so the after-wait time is the slowest process's
per cycle. The penalty is its median over the chief's back-to-back
median; the scaling model charges the no-overlap bound's compute
T1 x penalty.
"""

from __future__ import annotations

import copy
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
    same model, precision, XLA and optimizer. A deep copy: the trainer's
    set-up writes into the dataset configs."""
    from official_bench.data.factory import global_batch_size
    local = copy.deepcopy(cfg)
    local.model_dir = None
    rt = local.runtime
    rt.distribution_strategy = "one_device"
    rt.num_gpus = min(rt.num_gpus, 1)
    ds = local.train_dataset
    ds.batch_size = global_batch_size(cfg.train_dataset, num_replicas) \
        // num_replicas
    ds.use_per_replica_batch_size = True
    ds.builder = "synthetic"
    return local


def local_step(cfg, replica_devices: List[str], dtype: str, policy: str,
               num_replicas: int) -> Callable[[], None]:
    """One compiled Keras train step of `cfg`'s model on this process's
    first replica device (local_config), as a function that runs it and
    reads the loss back (so the step's time is waited for)."""
    from official_bench.training import setup
    from official_bench.runtime.cluster import Cluster
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
