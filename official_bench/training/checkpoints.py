"""Checkpoints, resume, SavedModel export and TensorBoard callbacks.

Layout in model_dir (as Model Garden r2.3): `model.ckpt-{epoch:04d}` weight
checkpoints (TF format: they carry the optimizer state and its step
counter), `saved_model/` (or export.destination) and TensorBoard event files
under `train/` and `validation/`. In multi-worker runs Keras' callbacks send
the non-chief workers' copies to temporary directories they delete; the
export below does the same by hand.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from typing import Callable, List, Optional

from absl import logging

from official_bench.config import ConfigError, ExperimentConfig
from official_bench.config.paths import no_checkpoint_message
from official_bench.runtime.keras_setup import keras, tf
from official_bench.runtime.tf_write_errors import tf_writing

CHECKPOINT_PATTERN = "model.ckpt-{epoch:04d}"


def latest_checkpoint(model_dir: Optional[str]) -> Optional[str]:
    if not model_dir or not os.path.isdir(model_dir):
        return None
    return tf.train.latest_checkpoint(model_dir)


def require_checkpoint(cfg: ExperimentConfig, explicit: Optional[str] = None
                       ) -> str:
    """The checkpoint eval/export reads: explicit path, else the latest."""
    path = explicit or latest_checkpoint(cfg.model_dir)
    if explicit and not tf.io.gfile.glob(explicit + "*"):
        raise ConfigError(f"export.checkpoint {explicit!r} does not exist")
    if not path:
        raise ConfigError(no_checkpoint_message(cfg.model_dir))
    return path


def restore(model, path: str, for_training: bool = True,
            check_step: Optional[Callable[[int], None]] = None) -> int:
    """Loads weights (and optimizer state to train on); returns the step.

    A checkpoint of another model (another depth, width, class count) is a
    ConfigError naming it, not a traceback from a variable's assign or a
    silent partial restore; so is what `check_step(step)` refuses (the
    restore then marked partial: TensorFlow warns at the process's end
    about a restore whose values were never all used)."""
    status, problem = None, None
    try:
        status = model.load_weights(path)
        if status is not None:
            status.assert_existing_objects_matched()
            if not for_training:
                status.expect_partial()  # optimizer slots are not needed
    except (ValueError, AssertionError, tf.errors.OpError) as e:
        problem = mismatch_message(path, model.name, e)
    step = None
    if problem is None:
        step = int(model.optimizer.iterations.numpy())
        try:
            if check_step:
                check_step(step)
        except ConfigError as e:
            problem = str(e)
    if problem is not None:
        if status is not None:
            status.expect_partial()
        raise ConfigError(problem)
    logging.info("Restored %s at step %d", path, step)
    return step


def mismatch_message(path: str, model_name: str, error: Exception) -> str:
    """The line for a checkpoint this model cannot load."""
    detail = " ".join(str(error).split())
    if len(detail) > 300:
        detail = detail[:300] + " ..."
    return (f"checkpoint {path} does not fit the model {model_name}: "
            f"{detail}; it was written by another model or config (model.*, "
            "image_size, num_classes): use that config, or a new model_dir")


def checkpoint_epoch(path: str) -> Optional[int]:
    """The epoch in a model.ckpt-NNNN name, or None for another name."""
    m = re.fullmatch(r"model\.ckpt-(\d+)", os.path.basename(path))
    return int(m.group(1)) if m else None


def check_resume_plan(path: str, step: int, steps_per_epoch: int,
                      global_batch: int) -> None:
    """ConfigError when the checkpoint's epochs had another length than
    this run's (another global batch or num_examples): resuming would
    start at a wrong epoch and follow another learning-rate schedule."""
    epoch = checkpoint_epoch(path)
    if not epoch or step == epoch * steps_per_epoch:
        return
    theirs = f"{step / epoch:g}"
    raise ConfigError(
        f"train.resume_checkpoint: {path} ends epoch {epoch} at step {step} "
        f"({theirs} steps per epoch), but this run has {steps_per_epoch} "
        f"steps per epoch (global batch {global_batch}): resume with the "
        "batch size, num_examples and train.steps it was trained with, or "
        "train in a new model_dir")


class _TensorBoard(keras.callbacks.TensorBoard):
    """Keras' TensorBoard with train.tensorboard.track_lr honoured."""

    def __init__(self, track_lr: bool, **kwargs):
        super().__init__(**kwargs)
        self._track_lr = track_lr

    def _collect_learning_rate(self, logs):
        return super()._collect_learning_rate(logs) if self._track_lr \
            else (logs or {})


class _ModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Keras' ModelCheckpoint whose full disk is one line, not a traceback.

    TensorFlow leaves a ``model.ckpt-N_temp`` directory (and maybe a partial
    index) behind when a save fails; the ``model.ckpt-*`` and ``checkpoint*``
    entries the failed save added to model_dir are removed, so no checkpoint
    is ever half there.
    """

    def __init__(self, model_dir: str, **kwargs):
        super().__init__(os.path.join(model_dir, CHECKPOINT_PATTERN),
                         **kwargs)
        self._model_dir = model_dir

    def _saving(self):
        return tf_writing(self._model_dir, "a checkpoint (model.ckpt-*)",
                          cleanup_dir=self._model_dir,
                          cleanup_prefixes=("model.ckpt-", "checkpoint"))

    def on_train_batch_end(self, batch, logs=None):
        with self._saving():
            super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        with self._saving():
            super().on_epoch_end(epoch, logs)


def _require_tensorboard() -> None:
    """TensorFlow >= 2.21 no longer installs TensorBoard's summary writer."""
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise ConfigError("train.callbacks.enable_tensorboard needs the "
                          "tensorboard package: pip install "
                          "'official_bench[tensorboard]' (or tensorboard)")


def build_callbacks(cfg: ExperimentConfig) -> List:
    """Checkpoint and TensorBoard callbacks as the config asks."""
    callbacks = []
    if not cfg.model_dir:
        if cfg.train.callbacks.enable_checkpoint_and_export or \
                cfg.train.callbacks.enable_tensorboard:
            raise ConfigError("train.callbacks: checkpoints and TensorBoard "
                              "need a model_dir")
        return callbacks
    if cfg.train.callbacks.enable_checkpoint_and_export:
        callbacks.append(_ModelCheckpoint(cfg.model_dir,
                                          save_weights_only=True))
    if cfg.train.callbacks.enable_tensorboard:
        _require_tensorboard()
        tb = cfg.train.tensorboard
        callbacks.append(_TensorBoard(
            track_lr=tb.track_lr, log_dir=cfg.model_dir,
            update_freq=cfg.train.time_history.log_steps,
            histogram_freq=1 if tb.write_model_weights else 0,
            write_graph=False, profile_batch=0))
    return callbacks


def export_saved_model(model, destination: str, is_chief: bool) -> str:
    """Every worker saves (it may involve collectives); only the chief keeps
    it."""
    if not is_chief:
        target = tempfile.mkdtemp(prefix="official_bench_export_")
        try:
            model.save(target, include_optimizer=False)
        finally:
            shutil.rmtree(target, ignore_errors=True)
        return destination
    with tf_writing(destination, "the SavedModel"):
        _save_whole(model, destination)
    logging.info("official_bench: exported SavedModel to %s", destination)
    return destination


def _save_whole(model, destination: str) -> None:
    """A SavedModel is many files written one by one: a full disk half-way
    would leave one that does not load. Save it in a hidden folder beside
    the destination, then move its entries in (replacing an earlier
    export's, keeping anything else there); a failed save leaves nothing
    behind. URLs (gs://...) are saved in place."""
    if "://" in destination:
        model.save(destination, include_optimizer=False)
        return
    parent = os.path.dirname(os.path.abspath(destination))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(
        prefix=f".{os.path.basename(os.path.abspath(destination))}.",
        suffix=".tmp", dir=parent)
    try:
        model.save(staging, include_optimizer=False)
        os.makedirs(destination, exist_ok=True)
        for name in os.listdir(staging):
            target = os.path.join(destination, name)
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            os.replace(os.path.join(staging, name), target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
