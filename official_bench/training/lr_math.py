"""The learning-rate schedules' arithmetic, once, for either backend's ops.

Rates in the config are per 256 images: the peak rate is
`initial_lr * global_batch * scale_by_batch_size` (scale_by_batch_size
defaults to 1/256; 0 turns scaling off). Model Garden r2.3's
piecewise_constant_with_warmup ignored initial_lr and used 0.1 per 256
images; we honour the key, so DLPerf's 0.256 means 0.256 per 256 images, and
DLPerf's multi-node 1.024 means a peak of 8.2 (2x8 GPUs) to 16.4 (4x8).
`model.learning_rate.compat: model_garden_r23` gives r2.3's schedule instead,
exactly (`r23_rate`): what DLPerf's YAMLs trained with.

Each rate is a function of the step and an `ops` namespace (TensorFlow's
for tf-keras, training/schedules.py; keras.ops for Keras 3,
jax_backend/schedules.py), so both backends follow the same schedule.
TensorFlow-free.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional

from official_bench.config import LearningRateConfig

# r2.3 (official/vision/image_classification/learning_rate.py):
# BASE_LEARNING_RATE = 0.1 per base_lr_batch_size = 256 images.
R23_BASE_LR = 0.1
R23_BASE_BATCH = 256


@dataclasses.dataclass(frozen=True)
class Warmup:
    """Linear warm-up from 0 to `peak`, then the named decay."""
    kind: str
    peak: float
    warmup_steps: int
    total_steps: int
    boundaries: List[int]
    multipliers: List[float]
    decay_steps: Optional[float] = None
    decay_rate: Optional[float] = None
    staircase: bool = False


@dataclasses.dataclass(frozen=True)
class R23Piecewise:
    """Model Garden r2.3's PiecewiseConstantDecayWithWarmup, value for value.

    From r2.3's learning_rate.py and optimizer_factory.py (the schedule got
    the *global* batch): steps_per_epoch = examples_per_epoch //
    global_batch; peak = 0.1 * global_batch / 256 (initial_lr and
    scale_by_batch_size never read); warm-up lr = peak * (step /
    warmup_steps) in float32 while step < warmup_epochs * steps_per_epoch;
    then peak * multipliers[0] up to and *including* the first boundary step
    (float(steps_per_epoch) * epoch), multipliers[i] after boundary i-1
    (tf.compat.v1.train.piecewise_constant switches when step > boundary).
    """
    global_batch: int
    examples_per_epoch: int
    warmup_epochs: float
    boundaries: List[float]
    multipliers: List[float]

    @property
    def steps_per_epoch(self) -> int:
        return self.examples_per_epoch // self.global_batch

    @property
    def peak(self) -> float:
        return R23_BASE_LR * self.global_batch / R23_BASE_BATCH

    @property
    def step_boundaries(self) -> List[float]:
        return [float(self.steps_per_epoch) * b for b in self.boundaries]

    @property
    def values(self) -> List[float]:
        return [self.peak * m for m in self.multipliers]

    @property
    def warmup_steps(self) -> float:
        return self.warmup_epochs * self.steps_per_epoch


def r23_piecewise(global_batch: int, examples_per_epoch: int,
                  warmup_epochs: float, boundaries: List[float],
                  multipliers: List[float]) -> R23Piecewise:
    if len(boundaries) != len(multipliers) - 1:
        raise ValueError(f"{len(boundaries)} boundaries need "
                         f"{len(boundaries) + 1} multipliers, got "
                         f"{len(multipliers)}")
    return R23Piecewise(int(global_batch), int(examples_per_epoch),
                        warmup_epochs, list(boundaries), list(multipliers))


def _decayed(s: Warmup, step, ops):
    if s.kind == "piecewise_constant_with_warmup":
        values = [s.peak * m for m in s.multipliers]
        lr = ops.constant(values[0])
        for boundary, value in zip(s.boundaries, values[1:]):
            lr = ops.where(step >= boundary, value, lr)
        return lr
    if s.kind == "cosine_with_warmup":
        span = max(1, s.total_steps - s.warmup_steps)
        progress = ops.clip((step - s.warmup_steps) / span, 0.0, 1.0)
        return 0.5 * s.peak * (1.0 + ops.cos(math.pi * progress))
    if s.kind == "exponential":
        exponent = step / s.decay_steps
        if s.staircase:
            exponent = ops.floor(exponent)
        return s.peak * ops.pow(s.decay_rate, exponent)
    return ops.constant(s.peak)


def warmup_rate(s: Warmup, step, ops):
    """The rate at `step` (any integer or float tensor of `ops`)."""
    step = ops.float32(step)
    decayed = _decayed(s, step, ops)
    if s.warmup_steps <= 0:
        return decayed
    warm = s.peak * step / s.warmup_steps
    return ops.where(step < s.warmup_steps, warm, decayed)


def r23_rate(s: R23Piecewise, step, ops):
    """r2.3's rate at `step`, the iteration count cast to float32 first, as
    TF 2.3's Keras optimizer passed it."""
    step = ops.float32(step)
    lr = ops.constant(s.values[0])
    for boundary, value in zip(s.step_boundaries, s.values[1:]):
        lr = ops.where(step > boundary, ops.constant(value), lr)
    if not s.warmup_steps:
        return lr
    warm = s.peak * (step / ops.float32(s.warmup_steps))
    return ops.where(step < s.warmup_steps, warm, lr)


def schedule_of(lr: LearningRateConfig, global_batch: int, total_steps: int):
    """Epoch-based config values -> the step-based Warmup or R23Piecewise
    for this global batch."""
    if lr.compat == "model_garden_r23":
        return r23_piecewise(global_batch, lr.examples_per_epoch,
                             lr.warmup_epochs, lr.boundaries or [],
                             lr.multipliers or [1.0])
    steps_per_epoch = max(1, lr.examples_per_epoch // global_batch)
    scale = global_batch * lr.scale_by_batch_size if lr.scale_by_batch_size \
        else 1.0
    return Warmup(
        kind=lr.name, peak=float(lr.initial_lr * scale),
        warmup_steps=int(lr.warmup_epochs * steps_per_epoch),
        total_steps=int(total_steps),
        boundaries=[int(b * steps_per_epoch) for b in lr.boundaries or []],
        multipliers=[float(m) for m in lr.multipliers or [1.0]],
        decay_steps=(lr.decay_epochs or 0) * steps_per_epoch or None,
        decay_rate=lr.decay_rate, staircase=bool(lr.staircase))


def describe_schedule(lr: LearningRateConfig, global_batch: int) -> str:
    """One line saying which schedule runs and its peak, for the run's log."""
    if lr.compat == "model_garden_r23":
        s = r23_piecewise(global_batch, lr.examples_per_epoch,
                          lr.warmup_epochs, lr.boundaries or [],
                          lr.multipliers or [1.0])
        return (f"official_bench: learning rate: Model Garden r2.3's "
                f"piecewise_constant_with_warmup (model.learning_rate.compat="
                f"model_garden_r23): 0.1 per 256 images x global batch "
                f"{global_batch} = peak {s.peak:g} (initial_lr "
                f"{lr.initial_lr:g} ignored, as r2.3 did), warm-up "
                f"{s.warmup_steps:g} steps, x{s.multipliers} after steps "
                f"{[int(b) for b in s.step_boundaries]}")
    scale = global_batch * lr.scale_by_batch_size \
        if lr.scale_by_batch_size else 1.0
    text = (f"official_bench: learning rate: {lr.name}, initial_lr "
            f"{lr.initial_lr:g} x {scale:g} (global batch {global_batch} x "
            f"scale_by_batch_size {lr.scale_by_batch_size:g}) = peak "
            f"{lr.initial_lr * scale:g}, "
            f"warm-up {lr.warmup_epochs:g} epoch(s)")
    if lr.name == "piecewise_constant_with_warmup":
        text += (f"; Model Garden r2.3 ignored initial_lr here (0.1 per 256 "
                 f"images, peak "
                 f"{R23_BASE_LR * global_batch / R23_BASE_BATCH:g})"
                 f": model.learning_rate.compat=model_garden_r23 trains as it "
                 f"did")
    return text
