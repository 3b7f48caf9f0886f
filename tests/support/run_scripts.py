"""Running the run scripts on tiny CPU configs: their environment and the
tails of failed runs' logs for assertion messages."""

from support.helpers import REPO  # noqa: F401 - re-exported for the tests
from support.launch_cli import (
    PY,  # noqa: F401 - re-exported
    clean_env as bare_env,
)

# A depth-8 CIFAR ResNet on 16x16 images, no evaluation: seconds per run.
TINY = ",".join([
    "model.name=resnet_cifar", "model.model_params.depth=8",
    "train_dataset.image_size=16", "train_dataset.num_classes=10",
    "validation_dataset.image_size=16", "validation_dataset.num_classes=10",
    "evaluation.skip_eval=true",
])
# What every run-script test runs unless it says otherwise.
RUN_DEFAULTS = dict(DEVICE="cpu", STEPS="6", LOG_STEPS="2",
                    PARAMS_OVERRIDE=TINY, RUN_TIMEOUT="240", KILL_AFTER="10")


def clean_env(tmp_path, **knobs):
    """The launcher's clean environment (support/launch_cli.py) with the
    tiny CPU run's defaults; `knobs` win."""
    return bare_env(tmp_path, **dict(RUN_DEFAULTS, **knobs))


def failures(tmp_path, output):
    """The launcher's output plus the end of every failed run's log."""
    parts = [output]
    for log in sorted((tmp_path / "logs").rglob("*.log")):
        text = log.read_text()
        if " ok (exit 0)" not in text:
            parts.append(f"--- {log}\n" + "\n".join(
                text.splitlines()[-25:]))
    return "\n".join(parts)
