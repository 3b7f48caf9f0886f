"""Learning-rate schedules with linear warm-up.

Rates in the config are per 256 images: the peak rate is
`initial_lr * global_batch * scale_by_batch_size` (scale_by_batch_size
defaults to 1/256; 0 turns scaling off). Model Garden r2.3's
piecewise_constant_with_warmup ignored initial_lr and used 0.1 per 256
images; we honour the key, so DLPerf's 0.256 means 0.256 per 256 images.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional

from official_bench.config import LearningRateConfig
from official_bench.runtime.keras_setup import keras, tf


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
        self.kind = name
        self.peak = float(peak)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)
        self.boundaries = [int(b) for b in boundaries or []]
        self.multipliers = [float(m) for m in multipliers or [1.0]]
        self.decay_steps = decay_steps
        self.decay_rate = decay_rate
        self.staircase = bool(staircase)

    def _decayed(self, step):
        if self.kind == "piecewise_constant_with_warmup":
            values = [self.peak * m for m in self.multipliers]
            lr = tf.constant(values[0])
            for boundary, value in zip(self.boundaries, values[1:]):
                lr = tf.where(step >= boundary, value, lr)
            return lr
        if self.kind == "cosine_with_warmup":
            span = max(1, self.total_steps - self.warmup_steps)
            progress = tf.clip_by_value(
                (step - self.warmup_steps) / span, 0.0, 1.0)
            return 0.5 * self.peak * (1.0 + tf.cos(math.pi * progress))
        if self.kind == "exponential":
            exponent = step / self.decay_steps
            if self.staircase:
                exponent = tf.floor(exponent)
            return self.peak * tf.pow(self.decay_rate, exponent)
        return tf.constant(self.peak)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        decayed = self._decayed(step)
        if self.warmup_steps <= 0:
            return decayed
        warm = self.peak * step / self.warmup_steps
        return tf.where(step < self.warmup_steps, warm, decayed)

    def get_config(self) -> Dict:
        return dict(name=self.kind, peak=self.peak,
                    warmup_steps=self.warmup_steps,
                    total_steps=self.total_steps, boundaries=self.boundaries,
                    multipliers=self.multipliers, decay_steps=self.decay_steps,
                    decay_rate=self.decay_rate, staircase=self.staircase)


def build_schedule(lr: LearningRateConfig, global_batch: int,
                   total_steps: int) -> WarmupSchedule:
    """Epoch-based config values -> step-based schedule for this batch."""
    steps_per_epoch = max(1, lr.examples_per_epoch // global_batch)
    scale = global_batch * lr.scale_by_batch_size if lr.scale_by_batch_size \
        else 1.0
    return WarmupSchedule(
        name=lr.name,
        peak=lr.initial_lr * scale,
        warmup_steps=int(lr.warmup_epochs * steps_per_epoch),
        total_steps=total_steps,
        boundaries=[int(b * steps_per_epoch) for b in lr.boundaries or []],
        multipliers=lr.multipliers,
        decay_steps=(lr.decay_epochs or 0) * steps_per_epoch or None,
        decay_rate=lr.decay_rate,
        staircase=bool(lr.staircase))
