"""Stop a run whose training loss becomes NaN or infinite (train.stop_on_nan).

TensorFlow-free (NanCheck), shared by both backends; training/nan_guard.py
makes it a tf-keras callback.

A diverged run (DLPerf's multi-node YAMLs at a peak learning rate of 8-16,
say) still prints images/second, but its losses and accuracy mean nothing.
Keras's own TerminateOnNaN reads the loss back to the host after every step,
which stalls asynchronous GPU execution; a benchmark cannot afford that. This
guard never reads the loss on its own schedule: it checks only every
``check_steps`` steps (the trainer passes ``log_steps``, so the read coincides
with the one TimeHistory makes anyway) and at the end of each epoch.

Nothing is missed between checks: the ``loss`` Keras reports is the running
mean over the epoch so far, and a mean that took in one NaN or infinite value
stays non-finite until the epoch ends, where it is checked once more. The step
named is the check that found it; the bad step lies after the previous check.

With ``stop=True`` the guard raises :class:`NonFiniteLossError` (its message
starts with ``official_bench:``, which the CLI prints as the error line before
exiting 1; no result.json is written). With ``stop=False`` training goes on and
:meth:`NanGuard.summary_note` / :meth:`NanGuard.result_fields` carry a warning
into the run's summary line and result.json.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Dict, Optional

from absl import logging


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite and train.stop_on_nan is on."""


@dataclasses.dataclass(frozen=True)
class BadLoss:
    """Where a non-finite loss was found: at the check at ``step``; the check
    at ``last_good`` (or the epoch start) still saw a finite running mean."""
    step: int
    value: float
    last_good: int
    check_steps: int

    def describe(self) -> str:
        """'loss is nan at step 140 (non-finite from a step in 121-140;
        ...)'."""
        return (f"loss is {self.value} at step {self.step} (non-finite from a "
                f"step in {self.last_good + 1}-{self.step}; checked every "
                f"{self.check_steps} steps and at epoch ends)")


class NanCheck:
    """Finds a NaN/infinite loss without a per-step host sync (module doc);
    owns the step count and the first bad loss found.

    Driven through Keras' callback method names: the TensorFlow backend's
    NanGuard is this check as a callback, the JAX loop calls them itself
    with its own running mean of the loss in `logs`."""

    def __init__(self, stop: bool, check_steps: int, initial_step: int = 0,
                 warn: Callable[..., None] = logging.warning):
        self.stop = bool(stop)
        self.check_steps = max(1, int(check_steps))
        self.step = int(initial_step)
        self.first_step = int(initial_step)
        self.last_good = int(initial_step)
        self.bad: Optional[BadLoss] = None
        self.warn = warn

    def on_epoch_begin(self, epoch, logs=None):
        # The running mean starts afresh; everything before was checked at
        # the previous epoch's end.
        self.last_good = self.step
        self._epoch_first_step = self.step

    def on_train_batch_end(self, batch, logs=None):
        """Called once per loop: with train.steps_per_loop > 1 Keras passes
        the index of the loop's last step in the epoch, so steps are counted
        from it (as TimeHistory does), and a check is due when the loop
        crossed a multiple of check_steps."""
        before = self.step
        base = getattr(self, "_epoch_first_step", self.first_step)
        self.step = max(before + 1, base + batch + 1)
        if (self.step - self.first_step) // self.check_steps > \
                (before - self.first_step) // self.check_steps:
            self._check(logs)

    def on_epoch_end(self, epoch, logs=None):
        self._check(logs)

    def _check(self, logs) -> None:
        """Reads the loss (a host sync) and acts on a non-finite value."""
        if self.bad is not None or logs is None:
            return
        if hasattr(logs, "fetch"):  # parameter-server RemoteValue
            logs = logs.fetch()
        loss = logs.get("loss") if isinstance(logs, dict) else None
        if loss is None:
            return
        value = float(loss)
        if math.isfinite(value):
            self.last_good = self.step
            return
        self.bad = BadLoss(self.step, value, self.last_good, self.check_steps)
        if self.stop:
            raise NonFiniteLossError(
                f"official_bench: {self.bad.describe()}: training stopped. "
                f"Too high a learning rate? (see the 'learning rate' line at "
                f"the start; DLPerf's YAMLs want model.learning_rate.compat="
                f"model_garden_r23). train.stop_on_nan=false lets a "
                f"throughput-only run go on")
        self.warn("official_bench: warning: %s; train.stop_on_nan is false, "
                  "so training goes on: throughput still counts, losses and "
                  "accuracy mean nothing", self.bad.describe())

    def summary_note(self) -> str:
        """Text to append to the run's summary line ('' when all was well)."""
        if self.bad is None:
            return ""
        return f"; WARNING: {self.bad.describe()}, training went on " \
               f"(train.stop_on_nan false)"

    def result_fields(self) -> Dict[str, Any]:
        """Extra result.json fields: {} or
        {"warnings": [...], "non_finite_loss": ...}."""
        if self.bad is None:
            return {}
        return {"warnings": [self.bad.describe() + "; training went on "
                             "(train.stop_on_nan false)"],
                "non_finite_loss": dataclasses.asdict(self.bad)}
