"""python -m official_bench.data.input_bench: the input pipeline alone."""

import os
import re
import subprocess
import sys

import pytest

from official_bench.data import input_bench
from support.helpers import REPO, TINY_OVERRIDE, cli_env

RATE = re.compile(r"input_bench: (\d+) steps, ([\d.]+) images/second from "
                  r"this worker's input pipeline alone")


def _run(*extra, seconds="3"):
    override = ",".join([TINY_OVERRIDE, "train.steps=100000",
                         "train.time_history.log_steps=5", *extra])
    env = cli_env({"PYTHONPATH": os.pathsep.join(
        [REPO, os.path.join(REPO, "tests")])})
    return subprocess.run(
        [sys.executable, "-m", "official_bench.data.input_bench",
         f"--params_override={override}", f"--seconds={seconds}"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=240)


def test_jax_is_refused_naming_the_input_workers_benchmark(capsys):
    """It builds tf.data's pipeline, which a JAX run does not use: exit 2
    before TensorFlow or the pipeline starts."""
    assert input_bench.main([
        "--params_override=runtime.backend=jax"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "error: input_bench: runtime.backend jax: this tool measures the "
        "TensorFlow backend's tf.data pipeline") and \
        "benchmarks/input_workers.py" in err, err
    assert os.path.isfile(os.path.join(REPO, "benchmarks",
                                       "input_workers.py"))


def test_seconds_help_says_the_steps_end_it_sooner(capsys):
    with pytest.raises(SystemExit):
        input_bench.parse_args(["--help"])
    assert "stops sooner at the config's train.steps" in " ".join(
        capsys.readouterr().out.split())


def test_bad_seconds_is_a_usage_error():
    with pytest.raises(SystemExit) as e:
        input_bench.parse_args(["--seconds=0"])
    assert e.value.code == 2


@pytest.mark.slow
def test_rates_of_a_slow_source_and_synthetic_data():
    slow = _run("train_dataset.builder=python",
                "train_dataset.python_source=support.python_sources:slow_source")
    assert slow.returncode == 0, slow.stdout[-3000:]
    # The trainer's progress output: TimeHistory and step lines.
    assert re.search(r"TimeHistory: [\d.]+ seconds, [\d.]+ examples/second "
                     r"between steps 0 and 5", slow.stdout)
    assert "official_bench: step " in slow.stdout
    steps, rate = RATE.search(slow.stdout).groups()
    # 4 images per 0.15 s batch: at most ~27 images/second.
    assert float(rate) < 30 and int(steps) >= 10
    fast = _run(seconds="1")  # thousands of steps: a rate already
    assert fast.returncode == 0, fast.stdout[-3000:]
    assert float(RATE.search(fast.stdout).group(2)) > 10 * float(rate)


def test_pipeline_errors_exit_1_naming_the_source():
    p = _run("train_dataset.builder=python",
             "train_dataset.python_source=support.python_sources:float64_source",
             seconds="2")
    assert p.returncode == 1, p.stdout[-3000:]
    assert "error: official_bench: python_source support.python_sources:" \
           "float64_source: batch 0: images dtype float64" in p.stdout
