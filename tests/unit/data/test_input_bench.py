"""python -m official_bench.data.input_bench: the input pipeline alone."""

import os
import re
import subprocess
import sys
import types

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


def test_the_trainers_data_flags_layer_as_the_trainers(tmp_path):
    """--data_dir (both datasets), --model_type, --dataset and --num_gpus as
    the trainer takes them: without --data_dir, a copy of the trainer's
    flags was refused, and dropping --model_type/--dataset measured
    ImageNet's 224x224 defaults."""
    cfg = input_bench.load_config(input_bench.parse_args([
        "--model_type=resnet_cifar", "--dataset=cifar10",
        f"--data_dir={tmp_path}", "--num_gpus=0",
        "--params_override=train_dataset.builder=records"]))
    assert cfg.train_dataset.data_dir == str(tmp_path) == \
        cfg.validation_dataset.data_dir
    assert (cfg.train_dataset.image_size, cfg.runtime.num_gpus) == (32, 0)


def test_a_runs_params_yaml_is_its_whole_input(tmp_path):
    """The input-bound warning's command: --config_file=params.yaml alone
    gives the run's training dataset, whatever the defaults."""
    from official_bench import config as C
    run = C.load_config(None, "train_dataset.builder=records",
                        {"train_dataset": {"data_dir": str(tmp_path)}},
                        model_type="resnet_cifar", dataset="cifar10")
    params = tmp_path / "params.yaml"
    params.write_text(run.to_yaml())
    cfg = input_bench.load_config(input_bench.parse_args(
        [f"--config_file={params}"]))
    assert cfg.train_dataset == run.train_dataset


def test_the_result_line_names_builder_data_and_image_size():
    from official_bench.config.schema import DatasetConfig
    stats = types.SimpleNamespace(
        total_steps=10, average_examples_per_second=100.0,
        median_examples_per_second=101.0, num_replicas=1,
        per_replica_batch_size=8, basis="intervals")
    line = input_bench.summary(stats, DatasetConfig(
        builder="records", data_dir="/data/rec", image_size=32))
    assert "images/second from this worker's input pipeline alone (records " \
           "builder from /data/rec, 32x32 images; median 101.00; 1 local " \
           "replica(s) x 8 images)" in line, line


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
