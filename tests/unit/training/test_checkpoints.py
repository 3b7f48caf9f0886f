"""Checkpoints each epoch, resume, --mode=eval, --mode=export_only,
TensorBoard."""

import glob
import os

import numpy as np
import pytest

from official_bench import config as C, trainer
from official_bench.runtime.keras_setup import tf
from support.helpers import tiny

CKPT = {"callbacks": {"enable_checkpoint_and_export": True}}


def _weights(model):
    return [w.numpy() for w in model.weights]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two epochs of 3 steps with checkpoints and TensorBoard."""
    md = tmp_path_factory.mktemp("ckpt")
    r = trainer.run(tiny(train={"epochs": 2, "steps": 3, "callbacks": {
        "enable_checkpoint_and_export": True, "enable_tensorboard": True}}),
        model_dir=str(md))
    return md, r


def test_checkpoint_each_epoch_and_saved_model(trained):
    md, r = trained
    assert os.path.exists(md / "model.ckpt-0001.index")
    assert os.path.exists(md / "model.ckpt-0002.index")
    assert tf.train.latest_checkpoint(str(md)).endswith("model.ckpt-0002")
    loaded = tf.saved_model.load(str(md / "saved_model"))
    x = np.zeros((2, 16, 16, 3), np.float32)
    out = loaded.signatures["serving_default"](tf.constant(x))
    probs = list(out.values())[0].numpy()
    np.testing.assert_allclose(probs, r.model(x).numpy(), rtol=1e-4,
                               atol=1e-5)


def test_tensorboard_events_written(trained):
    md, _ = trained
    events = glob.glob(str(md / "train" / "events.out.tfevents.*"))
    assert events


def test_eval_mode_uses_latest_checkpoint(trained):
    md, r = trained
    ev = trainer.run(tiny(evaluation={"steps": 2}), model_dir=str(md),
                     mode="eval")
    for got, want in zip(_weights(ev.model), _weights(r.model)):
        np.testing.assert_array_equal(got, want)
    assert set(ev.evaluation) == {"loss", "accuracy", "top_5_accuracy"}
    assert os.path.exists(md / "result_eval.json")


def test_export_only_from_named_checkpoint(trained, tmp_path):
    md, _ = trained
    dest = tmp_path / "exported"
    trainer.run(tiny(export={"checkpoint": str(md / "model.ckpt-0001"),
                             "destination": str(dest)}),
                model_dir=str(md), mode="export_only")
    assert os.path.exists(dest / "saved_model.pb")


def test_resume_continues_from_the_checkpoint_step(tmp_path):
    """Resuming after epoch 1 of 2 runs epoch 2; resuming with train.epochs
    1 (past the last epoch) is an error and leaves it to run."""
    first = trainer.run(tiny(train=dict(CKPT, epochs=1, steps=3)),
                        model_dir=str(tmp_path))
    assert int(first.model.optimizer.iterations.numpy()) == 3
    with pytest.raises(C.ConfigError, match="leaves nothing to train"):
        trainer.run(tiny(train=dict(CKPT, epochs=1, steps=3,
                                    resume_checkpoint=True)),
                    model_dir=str(tmp_path))
    again = trainer.run(tiny(train=dict(CKPT, epochs=2, steps=3,
                                        resume_checkpoint=True)),
                        model_dir=str(tmp_path))
    # Only epoch 2 ran, on top of the restored optimizer step.
    assert int(again.model.optimizer.iterations.numpy()) == 6
    assert again.stats.total_steps == 3
    assert [i.start_step for i in again.stats.intervals] == [3]
    assert len(again.history["loss"]) == 1


def test_missing_named_checkpoint_is_named(tmp_path):
    with pytest.raises(C.ConfigError, match="export.checkpoint .*nope"):
        trainer.run(tiny(export={"checkpoint": str(tmp_path / "nope")}),
                    model_dir=str(tmp_path), mode="export_only")
