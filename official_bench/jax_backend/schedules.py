"""The learning-rate schedules as Keras 3 schedule objects on keras.ops.

The arithmetic is training/lr_math.py's, the TensorFlow backend's too; the
optimizer calls the schedule with its iteration count inside the compiled
step, so the rate follows the step on the device.
"""

from __future__ import annotations

from official_bench.training import lr_math


def _ops(keras):
    """lr_math's ops on keras.ops."""
    ops = keras.ops

    class KerasOps:
        """lr_math's ops on keras.ops."""
        float32 = staticmethod(lambda x: ops.cast(x, "float32"))
        constant = staticmethod(
            lambda v: ops.convert_to_tensor(v, dtype="float32"))
        where = staticmethod(ops.where)
        clip = staticmethod(ops.clip)
        cos = staticmethod(ops.cos)
        floor = staticmethod(ops.floor)
        pow = staticmethod(ops.power)
    return KerasOps


def build_schedule(keras, spec):
    """A Keras 3 LearningRateSchedule for lr_math's Warmup or
    R23Piecewise `spec`."""
    ops = _ops(keras)
    rate = lr_math.r23_rate if isinstance(spec, lr_math.R23Piecewise) \
        else lr_math.warmup_rate

    class Schedule(keras.optimizers.schedules.LearningRateSchedule):
        """lr_math's schedule `spec`."""

        def __call__(self, step):
            return rate(spec, step, ops)

        def get_config(self):
            return {"spec": repr(spec)}
    return Schedule()
