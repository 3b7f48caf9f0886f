"""Running the run scripts on tiny CPU configs: their environment and the
tails of failed runs' logs for assertion messages."""

import os
import sys

from official_bench.launch import settings as settings_lib
from support.helpers import REPO  # noqa: F401 - re-exported for the tests

PY = os.environ.get("OB_TEST_PYTHON", sys.executable)


TINY = ",".join([
    "model.name=resnet_cifar", "model.model_params.depth=8",
    "train_dataset.image_size=16", "train_dataset.num_classes=10",
    "validation_dataset.image_size=16", "validation_dataset.num_classes=10",
    "evaluation.skip_eval=true",
])


def clean_env(tmp_path, **knobs):
    drop = {k.env for k in settings_lib.KNOBS} | {"TF_CONFIG"}
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith("SLURM")}
    env.update(PYTHON=PY, LOG_DIR=str(tmp_path / "logs"),
               MODEL_DIR=str(tmp_path / "model_dir"), SLEEP_SECONDS="0",
               DEVICE="cpu", STEPS="6", LOG_STEPS="2", PARAMS_OVERRIDE=TINY,
               RUN_TIMEOUT="240", KILL_AFTER="10")
    env.update({k.upper(): str(v) for k, v in knobs.items()})
    return env


def failures(tmp_path, output):
    """The launcher's output plus the end of every failed run's log."""
    parts = [output]
    for log in sorted((tmp_path / "logs").rglob("*.log")):
        text = log.read_text()
        if " ok (exit 0)" not in text:
            parts.append(f"--- {log}\n" + "\n".join(
                text.splitlines()[-25:]))
    return "\n".join(parts)
