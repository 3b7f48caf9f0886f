"""A stop signal during the JAX backend's evaluation ends it at the next
eval step, as it ends the training steps: no whole evaluation first (one
longer than runtime.stop_grace_seconds would end in the hard exit), no
evaluation line, no epoch after it. The loop's parts are stand-ins; the
stopper is StopOnSignal's `requested`, set by the second eval step."""

from types import SimpleNamespace

from official_bench.jax_backend import trainer


class _Stopper:
    requested = False
    step = 10


def _loop(stopper, eval_steps=50):
    calls = {"eval": 0, "test_end": 0}

    def evaluate(trainable, non_trainable, images, labels, sums):
        calls["eval"] += 1
        if calls["eval"] == 2:  # the signal comes during the second
            stopper.requested = True
        return sums

    def test_end():
        calls["test_end"] += 1

    loop = SimpleNamespace(
        run=SimpleNamespace(jax=None, mesh=None),
        plan=SimpleNamespace(eval_steps=eval_steps, eval_epochs=[1, 2]),
        steps=SimpleNamespace(
            state={"trainable": 0, "non_trainable": 0, "sums": 0},
            evaluate=evaluate),
        feeds={"train": None,
               "validation": SimpleNamespace(next=lambda: (None, None))},
        clock=SimpleNamespace(on_test_begin=lambda: None,
                              on_test_end=test_end),
        guard=SimpleNamespace(on_epoch_end=lambda epoch, logs: None))
    return loop, calls


def _stand_ins(monkeypatch, logged, epochs=None):
    step_lib = trainer.step_lib
    monkeypatch.setattr(step_lib, "replicated", lambda jax, mesh, x: x)
    monkeypatch.setattr(step_lib, "zero_sums", lambda jax: 0)
    monkeypatch.setattr(step_lib, "epoch_metrics",
                        lambda sums, top1, top5: {"accuracy": 0.5})
    monkeypatch.setattr(trainer.run_end, "log_evaluation",
                        lambda plan, result: logged.append(result))
    if epochs is not None:
        monkeypatch.setattr(trainer, "_epoch",
                            lambda loop, stopper, epoch: epochs.append(epoch)
                            or {})


def test_a_stop_ends_the_evaluation_at_the_next_eval_step(monkeypatch):
    logged = []
    _stand_ins(monkeypatch, logged)
    stopper = _Stopper()
    loop, calls = _loop(stopper)
    assert trainer._evaluate(loop, stopper, True, False) == {}
    assert calls == {"eval": 2, "test_end": 1}
    assert logged == []


def test_no_stop_runs_every_eval_step(monkeypatch):
    logged = []
    _stand_ins(monkeypatch, logged)
    stopper = _Stopper()
    loop, calls = _loop(stopper, eval_steps=1)
    assert trainer._evaluate(loop, stopper, True, False) == {"accuracy": 0.5}
    assert calls["eval"] == 1 and logged == [{"accuracy": 0.5}]


def test_the_epochs_end_after_an_evaluation_a_stop_ended(monkeypatch):
    logged, epochs = [], []
    _stand_ins(monkeypatch, logged, epochs)
    stopper = _Stopper()
    loop, calls = _loop(stopper)
    cfg = SimpleNamespace(train=SimpleNamespace(epochs=3))
    monkeypatch.setattr(trainer.objectives, "wanted_metrics",
                        lambda cfg: (True, False))
    history, evaluation = trainer._epochs(cfg, loop, stopper)
    assert epochs == [0] and calls["eval"] == 2
    assert evaluation == {} and "val_accuracy" not in history
