"""Horovod for real: horovodrun -np 2 --gloo through the CLI, in the
TF 2.18 venv that scripts/install_horovod.sh builds (`make horovod`).

The same venv checks that official_bench itself runs on TensorFlow 2.18.
Without that venv these tests skip with the reason; the install hint for a
missing Horovod is covered in test_training.py on every machine.
"""

import json
import os
import subprocess

import pytest

from helpers import REPO, TINY_OVERRIDE, cli_env

pytestmark = pytest.mark.multiworker

SCRIPT = os.path.join(REPO, "scripts", "install_horovod.sh")


def _venv():
    path = subprocess.run(["bash", SCRIPT, "--print-venv"], text=True,
                          capture_output=True).stdout.strip()
    done = subprocess.run(["bash", SCRIPT, "--check"], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"Horovod venv not built at {path}: run `make horovod` "
                    "(scripts/install_horovod.sh)")
    return path


@pytest.fixture(scope="module")
def venv():
    return _venv()


def _env(venv):
    return cli_env({"PATH": os.path.join(venv, "bin") + os.pathsep +
                    os.environ.get("PATH", ""),
                    "TF_USE_LEGACY_KERAS": "1", "CUDA_VISIBLE_DEVICES": ""})


@pytest.mark.slow
def test_horovodrun_two_ranks_train_through_cli(venv, tmp_path):
    cmd = [os.path.join(venv, "bin", "horovodrun"), "-np", "2", "-H",
           "localhost:2", "--gloo", os.path.join(venv, "bin", "python"),
           "-m", "official_bench.classifier_trainer", "--mode=train",
           f"--model_dir={tmp_path}",
           f"--params_override={TINY_OVERRIDE},train.steps=6,"
           "runtime.distribution_strategy=horovod,"
           "runtime.horovod.fp16_allreduce=true,"
           "runtime.horovod.fusion_threshold_mb=32"]
    p = subprocess.run(cmd, cwd=REPO, env=_env(venv), text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-4000:]
    th = [l for l in p.stdout.splitlines() if "TimeHistory: " in l]
    # Only rank 0 logs: one line per interval, not one per rank.
    assert len(th) == 3, th
    assert all(l.startswith("[0]") for l in th)
    chief = json.load(open(tmp_path / "result.json"))
    other = json.load(open(tmp_path / "result_rank1.json"))
    assert chief["environment"]["horovod"]["size"] == 2
    assert chief["environment"]["tensorflow"].startswith("2.18")
    assert chief["stats"]["global_batch_size"] == 8  # 4 per rank x 2
    assert chief["config"]["runtime"]["horovod"]["fp16_allreduce"] is True
    # Both ranks end with the same weights and the same averaged metrics.
    assert chief["model"]["trainable_weights_sha256"] == \
        other["model"]["trainable_weights_sha256"]
    assert chief["history"]["loss"] == pytest.approx(other["history"]["loss"])
    assert other["stats"] is None  # rank 1 does not time


def test_trainer_runs_on_tensorflow_218(venv, tmp_path):
    """The package supports the Horovod environment's TensorFlow too."""
    cmd = [os.path.join(venv, "bin", "python"), "-m",
           "official_bench.classifier_trainer", "--mode=train_and_eval",
           f"--model_dir={tmp_path}",
           f"--params_override={TINY_OVERRIDE},train.steps=4,"
           "evaluation.skip_eval=false,evaluation.steps=1,"
           "train.callbacks.enable_checkpoint_and_export=true"]
    p = subprocess.run(cmd, cwd=REPO, env=_env(venv), text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=300)
    assert p.returncode == 0, p.stdout[-4000:]
    result = json.load(open(tmp_path / "result.json"))
    assert result["environment"]["tensorflow"].startswith("2.18")
    assert result["evaluation"]["accuracy"] >= 0.0
    assert os.path.exists(tmp_path / "saved_model" / "saved_model.pb")
