"""A signal during `--mode=eval` on the TensorFlow backend names its stage
(docs/exit_status.md): the checkpoint's restore and evaluation run in the
stage "evaluating the checkpoint (N steps)", so a Ctrl-C there ends in
`stopped by SIGINT while evaluating the checkpoint (N steps); no result
written`, not "outside the training steps". The model and checkpoint are
stand-ins; the Ctrl-C is a KeyboardInterrupt raised by evaluate."""

import signal
from types import SimpleNamespace

import pytest

from official_bench import trainer
from official_bench.training import tf_trainer


def test_a_ctrl_c_in_the_evaluation_names_its_stage(monkeypatch):
    monkeypatch.setattr(tf_trainer.checkpoints, "require_checkpoint",
                        lambda cfg: "/md/model.ckpt-0004")
    monkeypatch.setattr(tf_trainer.checkpoints, "restore",
                        lambda model, path, for_training: 4)

    def evaluate(*args, **kwargs):
        raise KeyboardInterrupt

    prep = SimpleNamespace(
        cfg=None, plan=SimpleNamespace(eval_steps=7),
        model=SimpleNamespace(evaluate=evaluate),
        validation_data=lambda: None)
    with pytest.raises(KeyboardInterrupt) as raised:
        tf_trainer._evaluate_only(prep)
    stop = trainer.stopped_outside(signal.SIGINT, raised.value)
    assert str(stop) == ("official_bench: stopped by SIGINT while evaluating "
                         "the checkpoint (7 steps); no result written")
