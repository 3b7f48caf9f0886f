"""train.resume_checkpoint, --mode=eval and export_only on a checkpoint
written by another model or with epochs of another length: one ConfigError
line naming the checkpoint, not a traceback or a resume at a wrong epoch."""

import shutil

import pytest

from official_bench import trainer
from official_bench.config import ConfigError
from official_bench.contracts import exit_status
from official_bench.training import checkpoints
from support.helpers import TINY_OVERRIDE, cli, tiny

CKPT = {"enable_checkpoint_and_export": True}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """One epoch of 2 steps: model.ckpt-0001 at step 2."""
    md = tmp_path_factory.mktemp("ckpt")
    trainer.run(tiny(train={"epochs": 1, "steps": 2, "callbacks": CKPT}),
                model_dir=str(md))
    return md


def _resume(md, **sections):
    train = {"epochs": 2, "steps": 2, "resume_checkpoint": True,
             "callbacks": CKPT}
    train.update(sections.pop("train", {}))
    return trainer.run(tiny(train=train, **sections), model_dir=str(md))


def test_another_model_is_named(model_dir):
    with pytest.raises(ConfigError) as e:
        _resume(model_dir, model={"model_params": {"depth": 14}})
    assert str(e.value).startswith(
        f"checkpoint {model_dir}/model.ckpt-0001 does not fit the model "
        "resnet14_cifar: ")
    assert "\n" not in str(e.value)


def test_eval_of_another_model_is_named(model_dir):
    with pytest.raises(ConfigError, match="does not fit the model resnet14"):
        trainer.run(tiny(model={"model_params": {"depth": 14}}),
                    model_dir=str(model_dir), mode="eval")


def test_epochs_of_another_length_are_refused(model_dir):
    with pytest.raises(ConfigError) as e:
        _resume(model_dir, train={"steps": 1})
    assert str(e.value) == (
        f"train.resume_checkpoint: {model_dir}/model.ckpt-0001 ends epoch 1 "
        "at step 2 (2 steps per epoch), but this run has 1 steps per epoch "
        "(global batch 8): resume with the batch size, num_examples and "
        "train.steps it was trained with, or train in a new model_dir")


def test_a_refused_resume_keeps_the_runs_params_yaml(model_dir):
    """The refusal says to resume with what the run was trained with:
    params.yaml, which the refused config must not have replaced."""
    params = model_dir / "params.yaml"
    before = params.read_text()
    with pytest.raises(ConfigError, match="ends epoch 1 at step 2"):
        _resume(model_dir, train={"steps": 1})
    with pytest.raises(ConfigError, match="does not fit the model"):
        _resume(model_dir, model={"model_params": {"depth": 14}})
    assert params.read_text() == before


def test_an_accepted_resume_writes_its_config(model_dir, tmp_path):
    md = tmp_path / "copy"
    shutil.copytree(model_dir, md)
    _resume(md)  # epoch 2 of 2
    text = (md / "params.yaml").read_text()
    assert "resume_checkpoint: true" in text and "epochs: 2" in text
    assert (md / "model.ckpt-0002.index").is_file()


def test_the_clis_error_line_stays_last(model_dir):
    """TensorFlow warns about a half-used restore when the model goes, at
    the process's end (30 lines here): after the error line, never."""
    p = cli([f"--model_dir={model_dir}", "--mode=eval",
             f"--params_override={TINY_OVERRIDE},model.model_params.depth=14"],
            timeout=120)
    assert p.returncode == exit_status.CONFIG, p.stdout[-2000:]
    assert p.stdout.rstrip().splitlines()[-1].startswith(
        f"error: checkpoint {model_dir}/model.ckpt-0001 does not fit the "
        "model resnet14_cifar: "), p.stdout[-3000:]


@pytest.mark.parametrize("name, step, per_epoch, ok", [
    ("model.ckpt-0002", 8, 4, True),
    ("model.ckpt-0002", 8, 2, False),
    ("other-name", 8, 3, True),  # not ours: the step is all there is
])
def test_check_resume_plan(name, step, per_epoch, ok):
    call = lambda: checkpoints.check_resume_plan(  # noqa: E731
        f"/m/{name}", step, per_epoch, 16)
    if ok:
        call()
    else:
        with pytest.raises(ConfigError, match="ends epoch 2 at step 8"):
            call()
