"""The trainer end to end on the JAX backend, where TensorFlow cannot be
imported (tensorflow and tf_keras blocked, as on a GPU image that has only
JAX and Keras 3): one CLI run (tiny resnet_cifar, mirrored over 2 CPU
devices, train_and_eval), its TimeHistory lines, result.json, params.yaml
and history row; the extractor and the launcher's dry run on it, also
without TensorFlow; and a run that diverges, stopped by the NaN guard."""

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from official_bench.contracts import history_db, log_tree
from official_bench.contracts.trainer_command import trainer_argv
from support.helpers import DLPERF_REGEX, REPO, cli_env, without_module_env

BLOCKED = ("tensorflow", "tf_keras")
PER_REPLICA, REPLICAS, STEPS, LOG_STEPS = 4, 2, 12, 4
GLOBAL = PER_REPLICA * REPLICAS
TINY_JAX = ",".join([
    "runtime.backend=jax", "runtime.distribution_strategy=mirrored",
    "runtime.num_gpus=0", f"runtime.cpu_devices={REPLICAS}",
    "runtime.sample_period_seconds=0.2",
    "model.name=resnet_cifar", "model.model_params.depth=8",
    "train_dataset.builder=synthetic", "train_dataset.image_size=16",
    "train_dataset.num_classes=10", f"train_dataset.batch_size={PER_REPLICA}",
    "validation_dataset.builder=synthetic",
    "validation_dataset.image_size=16", "validation_dataset.num_classes=10",
    f"validation_dataset.batch_size={PER_REPLICA}",
    f"validation_dataset.num_examples={2 * GLOBAL}",  # 2 eval steps
    "evaluation.skip_eval=false",
    f"train.steps={STEPS}", f"train.time_history.log_steps={LOG_STEPS}",
])
_TH_LINE = re.compile(r"TimeHistory: (\d+\.\d+) seconds, (\d+\.\d+) "
                      r"examples/second between steps (\d+) and (\d+)")


def _trainer(tmp, model_dir, override, mode):
    """The CLI with TensorFlow blocked; (exit status, output)."""
    env = cli_env(without_module_env(tmp, BLOCKED))
    p = subprocess.run(
        trainer_argv(sys.executable, mode=mode, model_dir=str(model_dir),
                     params_override=override),
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=300)
    return p.returncode, p.stdout


class Run:
    """The CLI run, its files, and where the run scripts would keep its
    log and result (for the extractor)."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.model_dir = tmp / "model_dir" / "run1"
        self.returncode, self.output = _trainer(tmp, self.model_dir,
                                                TINY_JAX, "train_and_eval")
        case = log_tree.case_dir(str(tmp / "logs"), PER_REPLICA,
                                 log_tree.case_name(1, REPLICAS),
                                 backend="jax")
        os.makedirs(case)
        self.log = os.path.join(case, log_tree.log_name(PER_REPLICA, "fp32",
                                                        1))
        with open(self.log, "w") as f:
            f.write(self.output)
        result = self.model_dir / "result.json"
        if result.exists():
            shutil.copy(result, log_tree.json_path(self.log))

    @property
    def result(self):
        return json.loads((self.model_dir / "result.json").read_text())


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    r = Run(tmp_path_factory.mktemp("jax_cli"))
    assert r.returncode == 0, r.output[-5000:]
    return r


def test_tensorflow_really_is_blocked(tmp_path):
    env = without_module_env(tmp_path, BLOCKED)
    for module in BLOCKED:
        p = subprocess.run([sys.executable, "-c", f"import {module}"],
                           env=env, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode != 0 and "ModuleNotFoundError" in p.stderr


def test_time_history_lines_count_the_global_batch(run):
    lines = [l for l in run.output.splitlines() if "TimeHistory" in l]
    assert len(lines) == STEPS // LOG_STEPS
    parsed = [_TH_LINE.search(l) for l in lines]
    assert all(parsed), lines
    assert [(int(m.group(3)), int(m.group(4))) for m in parsed] == \
        [(s, s + LOG_STEPS) for s in range(0, STEPS, LOG_STEPS)]
    # DLPerf's extractor reads the same rate
    assert [float(DLPERF_REGEX.search(l).group(1)) for l in lines] == \
        [float(m.group(2)) for m in parsed]
    stats = run.result["stats"]
    assert stats["global_batch_size"] == GLOBAL
    assert stats["num_replicas"] == REPLICAS
    assert stats["total_steps"] == STEPS
    for m, interval in zip(parsed, stats["intervals"]):
        assert interval["examples_per_second"] == pytest.approx(
            GLOBAL * LOG_STEPS / interval["seconds"])
        assert float(m.group(2)) == pytest.approx(
            interval["examples_per_second"], abs=0.006)


def test_start_line_names_the_built_model_as_tensorflows_does(run):
    built = re.search(r"official_bench: built (\S+) \(", run.output)
    started = re.search(r"Training (\S+) for epochs ", run.output)
    assert built and started, run.output[-3000:]
    assert started.group(1) == built.group(1) == "resnet8_cifar"


def test_result_environment_says_jax(run):
    env = run.result["environment"]
    assert env["backend"] == "jax"
    for package in ("keras", "jax", "jaxlib"):
        assert env[package] == importlib.metadata.version(package)
    assert env["num_replicas"] == REPLICAS and env["num_workers"] == 1
    assert env["devices"] == ["cpu:0", "cpu:1"]
    assert env["jax_devices"] == [
        {"id": i, "process": 0, "platform": "cpu", "kind": "cpu"}
        for i in range(REPLICAS)]
    assert env["strategy"] == "mirrored" and env["dtype"] == "float32"


def test_result_flops_utilisation_history(run):
    r = run.result
    flops = r["flops"]
    counted, xla = flops["gflop_per_image"], \
        flops["xla_cost_analysis_gflop_per_image"]
    # XLA leaves out the padded borders' multiply-adds: a bit fewer
    assert 0.7 * counted < xla < 1.05 * counted, flops
    assert 0 < flops["mfu"] < 1
    usage = r["utilisation"]
    assert usage["xla_peak_memory_mib"] == "no GPU"
    assert usage["gpu"] == "no GPU"
    assert usage["gpu_note"] == "JAX uses no GPU in this run"
    load = usage["load_average"]  # at the timed loop's start and end
    assert load["start"] >= 0 and load["end"] >= 0 and load["cpu_count"] >= 1
    history = r["history"]
    assert set(history) == {"loss", "accuracy", "top_5_accuracy",
                            "val_loss", "val_accuracy",
                            "val_top_5_accuracy"}
    assert all(len(v) == 1 for v in history.values())
    assert 0 < history["loss"][0] < 10 and 0 < history["val_loss"][0] < 10
    for key in ("accuracy", "top_5_accuracy", "val_accuracy",
                "val_top_5_accuracy"):
        assert 0.0 <= history[key][0] <= 1.0
    assert history["top_5_accuracy"][0] >= history["accuracy"][0]
    assert r["evaluation"]["loss"] == history["val_loss"][0]
    # The line says how many images the evaluation covered, as on TF.
    assert re.search(rf"official_bench: evaluation: {2 * GLOBAL} images "
                     rf"\(2 steps of {GLOBAL}\), accuracy \d\.\d{{4}}, ",
                     run.output), run.output[-2000:]


def test_params_yaml_and_history_row(run):
    params = yaml.safe_load((run.model_dir / "params.yaml").read_text())
    assert params["runtime"]["backend"] == "jax"
    assert params["runtime"]["distribution_strategy"] == "mirrored"
    rows = history_db.read_rows(history_db.default_path(str(run.model_dir)))
    assert len(rows) == 1
    row = rows[0]
    assert row.source_path == str(run.model_dir)
    assert (row.global_batch, row.gpus_per_node, row.precision) == \
        (GLOBAL, REPLICAS, "fp32")
    assert json.loads(row.environment)["backend"] == "jax"
    assert row.tensorflow is None


def test_extractor_reads_the_run_without_tensorflow(run):
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "extract_tensorflow_logs.py"),
         "--log_dir", os.path.dirname(os.path.dirname(run.log)),
         "--warmup_batches", str(LOG_STEPS), "--train_batches",
         str(STEPS - LOG_STEPS), "--output_dir", str(run.tmp / "table"),
         "--no_plot"],
        cwd=run.tmp, env=without_module_env(run.tmp, BLOCKED),
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    table = json.loads(next((run.tmp / "table").glob("*.json")).read_text())
    case = table["rn50"]["1n2g"]
    assert case["global_batch_size"] == GLOBAL and case["num_runs"] == 1
    assert case["environment"]["backend"] == "jax"
    assert case["measured"]["framework"] == (
        f"Keras {importlib.metadata.version('keras')} on JAX "
        f"{importlib.metadata.version('jax')}")
    # the rate of the intervals in its window, from result.json
    first, last = case["run_details"][0]["counted_steps"]
    counted = [i["examples_per_second"]
               for i in run.result["stats"]["intervals"]
               if i["start_step"] >= first and i["end_step"] <= last]
    assert counted and case["average_speed_unrounded"] == pytest.approx(
        sum(counted) / len(counted))


def test_launcher_dry_run_plans_jax_without_tensorflow(tmp_path):
    env = without_module_env(tmp_path, BLOCKED)
    for key in list(env):
        if key in ("TF_CONFIG", "NODES", "BACKEND") or \
                key.startswith("SLURM"):
            del env[key]
    env.update(PYTHON=sys.executable, LOG_DIR=str(tmp_path / "logs"),
               MODEL_DIR=str(tmp_path / "model_dir"), SLEEP_SECONDS="0",
               BACKEND="jax", DEVICE="cpu")
    p = subprocess.run([sys.executable, "-m", "official_bench.launch",
                        "single", "8", "fp32", "1", "--dry-run"],
                       cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "/jax/resnet50/bz8/1n1g/rn50_b8_fp32_1.log" in p.stdout
    assert '"backend": "jax"' in p.stdout
    assert "dry run: nothing was started" in p.stdout
    assert not (tmp_path / "logs").exists() or not any(
        f.is_file() for f in (tmp_path / "logs").rglob("*"))


def test_nan_guard_stops_a_diverging_run(tmp_path):
    """A learning rate of 1e30: the first update overflows the weights
    (their L2 penalty is inf at step 2); the guard reads the running loss
    at the interval end and stops: exit 1, one error line, no result."""
    override = ",".join([
        "runtime.backend=jax", "runtime.distribution_strategy=one_device",
        "runtime.num_gpus=0", "runtime.sample_period_seconds=0",
        "model.name=resnet_cifar", "model.model_params.depth=8",
        "model.learning_rate.name=constant",
        "model.learning_rate.initial_lr=1e30",
        "model.learning_rate.warmup_epochs=0",
        "model.learning_rate.scale_by_batch_size=0",
        "train_dataset.builder=synthetic", "train_dataset.image_size=16",
        "train_dataset.num_classes=10", "train_dataset.batch_size=4",
        "evaluation.skip_eval=true", "train.steps=6",
        "train.time_history.log_steps=2", "train.stop_on_nan=true"])
    model_dir = tmp_path / "model_dir" / "nan"
    code, output = _trainer(tmp_path, model_dir, override, "train")
    assert code == 1, output[-3000:]
    errors = [l for l in output.splitlines() if l.startswith("error: ")]
    assert len(errors) == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert re.match(r"error: official_bench: loss is (nan|inf|-inf) at "
                    r"step 2 ", errors[0]), errors
    assert "train.stop_on_nan=false" in errors[0]
    assert not (model_dir / "result.json").exists()
    assert not os.path.exists(history_db.default_path(str(model_dir)))
