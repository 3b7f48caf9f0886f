"""The notebook API (official_bench.run, trainer.train_and_evaluate) in a
fresh process: what the CLI checks before TensorFlow loads, it checks
before TensorFlow loads too."""

import subprocess
import sys

from support.helpers import REPO, cli_env

# Each call's exception, and whether TensorFlow was imported by then.
CALLS = """
import sys
import official_bench
from official_bench import trainer
config, model_dir = sys.argv[1:]
calls = [
    lambda: official_bench.run(
        config, model_dir=model_dir + "/ok",
        params_override="train_dataset.builder=records,"
                        "train_dataset.data_dir=/nonexistent/imagenet"),
    lambda: official_bench.run(config, model_dir=model_dir + "/link/md"),
    lambda: trainer.train_and_evaluate(config),
]
for call in calls:
    try:
        call()
    except Exception as e:
        print(type(e).__name__, "|", e)
print("tensorflow" in sys.modules)
"""


def test_api_checks_before_tensorflow_and_refuses_a_non_config(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "not-mounted")
    config = "configs/examples/resnet/imagenet/cpu_smoke.yaml"
    p = subprocess.run([sys.executable, "-c", CALLS, config, str(tmp_path)],
                       cwd=REPO, env=cli_env(), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "ConfigError | train_dataset.data_dir '/nonexistent/imagenet' does "
        "not exist or is not a directory",
        f"NotWritable | cannot write the run's files (model_dir) to "
        f"{tmp_path}/link/md: {tmp_path}/link is a broken symbolic link "
        f"(to {tmp_path}/not-mounted)",
        "TypeError | train_and_evaluate takes an ExperimentConfig (from "
        "official_bench.load_config or trainer.run_config), got str; use "
        "official_bench.run() for a dict or a YAML path",
        "False"], p.stderr


def test_train_and_evaluate_shows_info_lines_as_run_does(tmp_path,
                                                         monkeypatch):
    """absl hides INFO until a program asks; a notebook calling
    train_and_evaluate(cfg) sees the run's lines as run()'s caller does,
    and gets its verbosity back."""
    import types

    from absl import logging

    from official_bench import trainer
    backend = types.ModuleType("fake_backend")
    backend.train_and_evaluate = lambda cfg: logging.get_verbosity()
    monkeypatch.setitem(sys.modules, "fake_backend", backend)
    monkeypatch.setitem(trainer.BACKEND_MODULES, "tensorflow", "fake_backend")
    cfg = trainer.run_config(model_dir=str(tmp_path))
    before = logging.get_verbosity()
    logging.set_verbosity(logging.WARNING)
    try:
        assert trainer.train_and_evaluate(cfg) == logging.INFO
        assert logging.get_verbosity() == logging.WARNING
    finally:
        logging.set_verbosity(before)


def test_api_errors_name_its_arguments_not_the_clis_flags():
    """Errors raised through the API name its keyword arguments; the CLI's
    "--params_override" / "--model_type" stay the CLI's (test_config)."""
    import pytest

    import official_bench
    from official_bench import trainer
    config = "configs/examples/resnet/imagenet/cpu_smoke.yaml"
    calls = [
        (lambda: official_bench.load_config(
            config, params_override="train.stepz=2"),
         "(from params_override 'train.stepz=2')"),
        (lambda: trainer.run_config(config, params_override="train.steps"),
         "params_override must be a mapping, a file or a.b=value pairs"),
        (lambda: trainer.run_config(config, model_type="vgg"),
         "unknown model_type 'vgg'; valid: resnet, resnet_cifar"),
        (lambda: trainer.run_config(config, dataset="cifar"),
         "unknown dataset 'cifar'; valid: imagenet, cifar10"),
        (lambda: official_bench.load_config(5),
         "config: expected a YAML path, a mapping or an ExperimentConfig, "
         "got int")]
    for call, words in calls:
        with pytest.raises(official_bench.ConfigError) as info:
            call()
        assert words in str(info.value) and "--" not in str(info.value)


NOTEBOOK_LOGGING = """
import logging, sys, types
from absl import logging as absl_logging
from official_bench import trainer
backend = types.ModuleType("fake_backend")

def train_and_evaluate(cfg):
    absl_logging.info("a line of the run")
    return "trained"

backend.train_and_evaluate = train_and_evaluate
sys.modules["fake_backend"] = backend
trainer.BACKEND_MODULES["tensorflow"] = "fake_backend"
print(trainer.train_and_evaluate(trainer.run_config(model_dir=sys.argv[1])))
print("root handlers after the run:", len(logging.getLogger().handlers))
logging.basicConfig(level=logging.INFO, format="MINE %(message)s")
logging.getLogger("notebook").info("my own line")
"""


def test_a_notebooks_own_logging_setup_works_after_a_run(tmp_path):
    """absl's first record set up the root logger (basicConfig) where
    nothing had; the handler stayed, and the notebook's own basicConfig
    after a run silently did nothing."""
    p = subprocess.run([sys.executable, "-c", NOTEBOOK_LOGGING,
                        str(tmp_path)], cwd=REPO, env=cli_env(),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "a line of the run" in p.stderr  # shown during the run
    assert p.stdout.splitlines() == ["trained",
                                     "root handlers after the run: 0"]
    assert "MINE my own line" in p.stderr
