"""How long a training input kept its consumer waiting: the meter and its
words, TensorFlow-free, for both backends.

A feed records, per element, when its consumer asked for it and when it
was handed out; the difference is how long that request blocked. The
TensorFlow backend stamps tf.data elements (measure/input_wait.py); a JAX
feed stamps its own `next()`.

fraction = sum of waits / host time between the first counted and the
last hand-out, after leaving out the warm-up steps' elements (`warmup_skip`:
the first element waits for pipeline start-up and tracing).
"""

from __future__ import annotations

import shlex
import threading
from typing import Dict, List, Optional

import numpy as np
from absl import logging

INPUT_BOUND_FRACTION = 0.10

TF_DATA_MEASURE = (
    "host time the training pipeline's consumer was blocked in get_next / "
    "host time (upper bound on the steps' input wait; see "
    "measure/input_wait.py)")


class InputWaitMeter:
    """(request, hand-out) host timestamps of every element, thread-safe;
    `measure` says in result.json what the stamps bracket."""

    def __init__(self, measure: str = TF_DATA_MEASURE):
        self.measure = measure
        self._lock = threading.Lock()
        self._stamps: List[tuple] = []

    def reset(self) -> None:
        with self._lock:
            self._stamps = []

    def record(self, requested, handed_out):
        with self._lock:
            self._stamps.append((float(requested), float(handed_out)))
        return np.int64(len(self._stamps))

    def summary(self, skip: int) -> Optional[Dict]:
        """Wait statistics past the first `skip` elements, or None when
        fewer than two elements are left to measure."""
        with self._lock:
            stamps = self._stamps[skip:]
        if len(stamps) < 2:
            return None
        waits = [out - req for req, out in stamps]
        span = stamps[-1][1] - stamps[0][1]
        total = sum(waits[1:])  # waits inside the span
        return {
            "wait_seconds": total,
            "span_seconds": span,
            "fraction": total / span if span > 0 else 0.0,
            "mean_wait_ms": 1000 * total / (len(stamps) - 1),
            "elements": len(stamps),
            "skipped_elements": skip,
            "measure": self.measure,
        }


TRAIN_METER = InputWaitMeter()  # this process's tf.data training pipeline


def warmup_skip(warmup_steps: int, waits_per_step: int) -> int:
    """How many elements `InputWaitMeter.summary` leaves out: those of the
    first max(1, warmup_steps) steps (the TimeHistory warm-up; at least the
    first step, which waits for start-up and tracing), `waits_per_step`
    each. On TensorFlow an element of the process's metered tf.data
    pipeline is one replica's batch (distribute_datasets_from_function),
    so a step takes one per local replica; a JAX process has one host feed
    whose next() is the batch of all its devices, one wait per step."""
    return max(1, warmup_steps) * max(1, waits_per_step)


def note(summary: Optional[Dict], unmeasured: Optional[str] = None) -> str:
    """The summary line's input-wait part: the wait, else why there is
    none (`unmeasured`, unmeasured_note's words)."""
    if not summary:
        return f", input wait {unmeasured}" if unmeasured else ""
    return (f", input wait {100 * summary['fraction']:.1f}% "
            f"({summary['mean_wait_ms']:.1f} ms per element)")


def unmeasured_note(*, unmetered_strategy: Optional[str], timed: bool,
                    steps: Optional[int], warmup_steps: int) -> str:
    """Why a run has no input wait (result.json's input_wait_note): a
    strategy whose datasets are not metered, an untimed run, or too few
    steps past the warm-up steps' elements, which are left out."""
    if unmetered_strategy:
        return (f"not measured under {unmetered_strategy} (its datasets "
                "are not metered)")
    if not timed:
        return ("not measured: the run is untimed "
                "(train.callbacks.enable_time_history: false)")
    warmup = max(1, warmup_steps)
    if steps is not None and steps <= warmup + 1:
        return (f"not measured: {steps} step(s), too few past the {warmup} "
                "warm-up step(s) it leaves out (train.time_history."
                f"warmup_steps {warmup_steps}); run more steps or lower "
                "warmup_steps")
    return "not measured: fewer than two input elements after the warm-up"


def is_input_bound(summary: Optional[Dict]) -> bool:
    return bool(summary) and summary["fraction"] > INPUT_BOUND_FRACTION


def tf_data_hint(params_path: Optional[str] = None) -> str:
    """What to run next on an input-bound TensorFlow run: input_bench on
    the run's params.yaml (its whole config: builder, data_dir, image size,
    batch) where the run wrote one, else the flags to copy."""
    command = "python -m official_bench.data.input_bench"
    if params_path:
        return (f"measure the input pipeline alone with: {command} "
                f"--config_file={shlex.quote(params_path)} --seconds=30 "
                "(the run's own config)")
    return (f"measure the input pipeline alone with: {command} "
            "--seconds=30 and this run's --config_file, --params_override, "
            "--model_type, --dataset, --data_dir and --num_gpus")


def warn_if_input_bound(summary: Optional[Dict],
                        hint: Optional[str] = None) -> None:
    """A warning with what to do next (`hint`: by default tf_data_hint's
    flags to copy) when the steps waited for input more than
    INPUT_BOUND_FRACTION of the time."""
    if is_input_bound(summary):
        logging.warning(
            "official_bench: input-bound: steps waited for input %.0f%% of "
            "the time (%.1f ms per element); %s",
            100 * summary["fraction"], summary["mean_wait_ms"],
            hint or tf_data_hint())
