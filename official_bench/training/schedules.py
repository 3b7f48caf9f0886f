"""The learning-rate schedules as tf-keras schedule objects.

The arithmetic (warm-up, decays, Model Garden r2.3's piecewise schedule,
what a config's rates mean) is training/lr_math.py's, shared with the JAX
backend; here it runs on TensorFlow's ops inside tf-keras'
LearningRateSchedule classes. The schedule in use is logged at the start
of every run.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from absl import logging

from official_bench.config import LearningRateConfig
from official_bench.runtime.keras_setup import keras, tf
from official_bench.training import lr_math
from official_bench.training.lr_math import describe_schedule


class TfOps:
    """lr_math's ops on TensorFlow."""
    float32 = staticmethod(lambda x: tf.cast(x, tf.float32))
    constant = staticmethod(lambda v: tf.constant(v, tf.float32))
    where = staticmethod(tf.where)
    clip = staticmethod(tf.clip_by_value)
    cos = staticmethod(tf.cos)
    floor = staticmethod(tf.floor)
    pow = staticmethod(tf.pow)


@keras.saving.register_keras_serializable(package="official_bench")
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to `peak`, then the named decay."""

    def __init__(self, name: str, peak: float, warmup_steps: int,
                 total_steps: int, boundaries: Optional[List[int]] = None,
                 multipliers: Optional[List[float]] = None,
                 decay_steps: Optional[float] = None,
                 decay_rate: Optional[float] = None,
                 staircase: bool = False):
        super().__init__()
        self.spec = lr_math.Warmup(
            kind=name, peak=float(peak), warmup_steps=int(warmup_steps),
            total_steps=int(total_steps),
            boundaries=[int(b) for b in boundaries or []],
            multipliers=[float(m) for m in multipliers or [1.0]],
            decay_steps=decay_steps, decay_rate=decay_rate,
            staircase=bool(staircase))
        self.kind, self.peak = self.spec.kind, self.spec.peak
        self.warmup_steps = self.spec.warmup_steps
        self.total_steps = self.spec.total_steps
        self.boundaries = self.spec.boundaries
        self.multipliers = self.spec.multipliers
        self.decay_steps, self.decay_rate = decay_steps, decay_rate
        self.staircase = self.spec.staircase

    def __call__(self, step):
        return lr_math.warmup_rate(self.spec, step, TfOps)

    def get_config(self) -> Dict:
        return dict(name=self.kind, peak=self.peak,
                    warmup_steps=self.warmup_steps,
                    total_steps=self.total_steps, boundaries=self.boundaries,
                    multipliers=self.multipliers, decay_steps=self.decay_steps,
                    decay_rate=self.decay_rate, staircase=self.staircase)


@keras.saving.register_keras_serializable(package="official_bench")
class ModelGardenR23Piecewise(keras.optimizers.schedules.LearningRateSchedule):
    """Model Garden r2.3's PiecewiseConstantDecayWithWarmup, value for value
    (lr_math.R23Piecewise says what r2.3 did)."""

    def __init__(self, global_batch: int, examples_per_epoch: int,
                 warmup_epochs: float, boundaries: List[float],
                 multipliers: List[float]):
        super().__init__()
        self.spec = lr_math.r23_piecewise(global_batch, examples_per_epoch,
                                          warmup_epochs, boundaries,
                                          multipliers)
        self.global_batch = self.spec.global_batch
        self.examples_per_epoch = self.spec.examples_per_epoch
        self.warmup_epochs = warmup_epochs
        self.boundaries = self.spec.boundaries
        self.multipliers = self.spec.multipliers
        self.steps_per_epoch = self.spec.steps_per_epoch
        self.peak = self.spec.peak
        self.step_boundaries = self.spec.step_boundaries
        self.values = self.spec.values
        self.warmup_steps = self.spec.warmup_steps

    def __call__(self, step):
        return lr_math.r23_rate(self.spec, step, TfOps)

    def get_config(self) -> Dict:
        return dict(global_batch=self.global_batch,
                    examples_per_epoch=self.examples_per_epoch,
                    warmup_epochs=self.warmup_epochs,
                    boundaries=self.boundaries, multipliers=self.multipliers)


def build_schedule(lr: LearningRateConfig, global_batch: int,
                   total_steps: int):
    """Epoch-based config values -> step-based schedule for this batch.

    Logs which schedule it built (describe_schedule).
    """
    logging.info("%s", describe_schedule(lr, global_batch))
    spec = lr_math.schedule_of(lr, global_batch, total_steps)
    if isinstance(spec, lr_math.R23Piecewise):
        return ModelGardenR23Piecewise(
            spec.global_batch, spec.examples_per_epoch, spec.warmup_epochs,
            spec.boundaries, spec.multipliers)
    return WarmupSchedule(
        name=spec.kind, peak=spec.peak, warmup_steps=spec.warmup_steps,
        total_steps=spec.total_steps, boundaries=spec.boundaries,
        multipliers=spec.multipliers, decay_steps=spec.decay_steps,
        decay_rate=spec.decay_rate, staircase=spec.staircase)
