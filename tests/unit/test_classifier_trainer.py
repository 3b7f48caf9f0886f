"""The absl CLI in a subprocess: flags, exit codes, DLPerf YAMLs, log lines."""

import json
import os
import subprocess
import sys

import pytest

from official_bench.contracts import exit_status
from official_bench.host import cuda_noise
from support.helpers import (
    DLPERF_CONFIGS,
    DLPERF_REGEX,
    REPO,
    TINY_OVERRIDE,
    cli,
    cli_env,
)
from support.line_gaps import MAX_SILENCE, timed_cli

# main() in a fresh process; prints its status and whether TensorFlow was
# imported by then.
BEFORE_TF = """
import sys
from absl import flags
from official_bench import classifier_trainer
argv = ["classifier_trainer"] + sys.argv[1:]
flags.FLAGS(argv)
status = classifier_trainer.main(argv[:1])
print(status, "tensorflow" in sys.modules)
"""


# config_from_flags in a fresh process: the model_dir of each line's flags.
MODEL_DIRS = """
import sys
from absl import flags
from official_bench.config.flags import config_from_flags
for line in sys.stdin.read().splitlines():
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["classifier_trainer"] + line.split())
    print(config_from_flags(model_dir="the-default").model_dir)
"""


def test_default_model_dir_is_below_every_layer(tmp_path):
    """The CLI's model_dir/run-<stamp> is used only where no layer names a
    model_dir: --config_file and --params_override win over it (it used to
    win over both), --model_dir over all."""
    f = tmp_path / "a.yaml"
    f.write_text(f"model_dir: {tmp_path / 'file'}\n")
    override = f"--params_override=model_dir={tmp_path / 'override'}"
    cases = [([], "the-default"),
             ([f"--config_file={f}"], tmp_path / "file"),
             ([f"--config_file={f}", override], tmp_path / "override"),
             ([f"--config_file={f}", override,
               f"--model_dir={tmp_path / 'flag'}"], tmp_path / "flag")]
    p = subprocess.run(
        [sys.executable, "-c", MODEL_DIRS], cwd=REPO, env=cli_env(),
        input="".join(" ".join(argv) + "\n" for argv, _ in cases),
        capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(want) for _, want in cases]


@pytest.mark.parametrize("flags, words", [
    (["--params_override=train.stpes=1"],
     "train.stpes: unknown key; did you mean 'steps'? valid keys here: "),
    # --data_dir sets both datasets' data_dir: both read records.
    (["--params_override=train_dataset.builder=records,"
      "validation_dataset.builder=records",
      "--data_dir=/nonexistent/imagenet"],
     "train_dataset.data_dir '/nonexistent/imagenet' does not exist"),
])
def test_bad_config_ends_before_tensorflow_once(tmp_path, flags, words):
    """A typo or a missing data directory is refused before TensorFlow is
    imported, and said once, as the last line."""
    p = subprocess.run([sys.executable, "-c", BEFORE_TF,
                        f"--model_dir={tmp_path}", *flags], cwd=REPO,
                       env=cli_env(), capture_output=True, text=True,
                       timeout=120)
    assert p.stdout.split() == [str(exit_status.CONFIG), "False"], p.stderr
    err = "\n" + p.stderr
    last = err[err.rindex("\nerror: ") + 1:]  # the message: the last lines
    assert words in last and p.stderr.count(words) == 1, p.stderr


def test_a_runs_params_yaml_given_back_is_refused_before_tensorflow(
        tmp_path):
    """--config_file=run/params.yaml (its model_dir: that run's folder)
    would have replaced the run's result.json and checkpoint: exit 2 before
    TensorFlow loads, the files untouched."""
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "result.json").write_text('{"kept": 1}')
    (run / "params.yaml").write_text(f"model_dir: {run}\nmode: train\n")
    p = subprocess.run([sys.executable, "-c", BEFORE_TF,
                        f"--config_file={run / 'params.yaml'}"], cwd=REPO,
                       env=cli_env(), capture_output=True, text=True,
                       timeout=120)
    assert p.stdout.split() == [str(exit_status.CONFIG), "False"], p.stderr
    assert p.stderr.rstrip().splitlines()[-1].startswith(
        f"error: model_dir {str(run)!r} (from file {run / 'params.yaml'}) "
        "already holds a run (result.json): this run would replace its")
    assert (run / "result.json").read_text() == '{"kept": 1}'


def test_model_dir_under_a_broken_link_ends_before_tensorflow(tmp_path):
    """A model_dir that cannot be made (a dangling scratch link on its way)
    is the launcher's one line and exit 5, before TensorFlow loads."""
    link = tmp_path / "scratch"
    link.symlink_to(tmp_path / "not-mounted")
    p = subprocess.run([sys.executable, "-c", BEFORE_TF,
                        f"--model_dir={link / 'md'}"], cwd=REPO,
                       env=cli_env(), capture_output=True, text=True,
                       timeout=120)
    assert p.stdout.split() == [str(exit_status.NOT_WRITABLE), "False"], \
        p.stderr
    assert p.stderr.rstrip().splitlines()[-1] == (
        f"error: cannot write the run's files (model_dir) to {link / 'md'}: "
        f"{link} is a broken symbolic link (to {tmp_path / 'not-mounted'})")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc")
def test_model_dir_on_proc_ends_before_tensorflow():
    """/proc takes no folder (mkdir says ENOENT there): one line naming
    model_dir and exit 5, not a FileNotFoundError traceback."""
    p = subprocess.run([sys.executable, "-c", BEFORE_TF,
                        "--model_dir=/proc/x/run"], cwd=REPO,
                       env=cli_env(), capture_output=True, text=True,
                       timeout=120)
    assert p.stdout.split() == [str(exit_status.NOT_WRITABLE), "False"], \
        p.stderr
    assert p.stderr.rstrip().splitlines()[-1] == (
        "error: cannot write the run's files (model_dir) to /proc/x/run: "
        "/proc is on the kernel's proc file system, which takes no new "
        "files or folders")


def test_help_lists_model_garden_flags():
    p = cli(["--help"], timeout=120)
    assert p.returncode == exit_status.OK
    for flag in ("--mode", "--model_type", "--dataset", "--model_dir",
                 "--data_dir", "--config_file", "--params_override",
                 "--log_steps", "--num_gpus", "--[no]run_eagerly"):
        assert flag in p.stdout
    # What the trainer does, as docs/configuration.md says it (wrapping
    # aside): synthetic refuses --data_dir; the config's model_dir first.
    text = " ".join(p.stdout.split())
    for words in ("synthetic and zmq do not, and refuse it: exit 2",
                  "Default: the config's model_dir (from --config_file or "
                  "--params_override), else model_dir/run-<time>",
                  "'runtime.backend=jax' trains with Keras 3 on JAX"):
        assert words in text, p.stdout


def test_bad_config_exits_2_naming_the_key(tmp_path):
    p = cli([f"--model_dir={tmp_path}",
             "--params_override=runtime.distribution_strategy=mirored"],
            timeout=120)
    assert p.returncode == exit_status.CONFIG
    assert "runtime.distribution_strategy: unknown strategy 'mirored'; " \
           "valid: off, one_device, mirrored, multi_worker_mirrored" \
           in p.stdout
    assert not os.listdir(tmp_path)  # nothing written


def test_stray_words_are_refused_by_both_entry_points(tmp_path):
    """absl leaves words it did not parse; the trainer and the all-reduce
    benchmark (same flags, same first steps) name them and write nothing."""
    import subprocess
    import sys

    from support.helpers import REPO, cli_env
    for module in ("official_bench.classifier_trainer",
                   "official_bench.allreduce.bench"):
        p = subprocess.run([sys.executable, "-m", module,
                            f"--model_dir={tmp_path}", "stray"], cwd=REPO,
                           env=cli_env(), capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == exit_status.CONFIG, (module, p.stderr)
        assert "error: unexpected arguments ['stray']; see --help" in p.stderr
    assert not os.listdir(tmp_path)


def test_unknown_key_in_config_file_names_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  stepz: 3\n")
    p = cli([f"--config_file={bad}", f"--model_dir={tmp_path / 'm'}"],
            timeout=120)
    assert p.returncode == 2
    assert "train.stepz: unknown key" in p.stdout and str(bad) in p.stdout


def test_eval_without_checkpoint_is_a_clear_error(tmp_path):
    p = cli([f"--model_dir={tmp_path}", "--mode=eval",
             f"--params_override={TINY_OVERRIDE}"], timeout=120)
    assert p.returncode == 2
    assert (f"no checkpoint (model.ckpt-*) in model_dir '{tmp_path}'"
            in p.stdout)
    # said before TensorFlow starts (config/paths.check_checkpoint)
    assert "stage: loading TensorFlow" not in p.stdout, p.stdout[-2000:]


def test_dlperf_gpu_yaml_runs_on_cpu_through_cli(tmp_path):
    """gpu.yaml unchanged + CPU overrides; explicit flags beat the YAML;
    stage lines, and never a silence over MAX_SILENCE (issue 40)."""
    p = timed_cli(["--mode=train", "--model_type=resnet_cifar",
                   "--dataset=imagenet", f"--model_dir={tmp_path}",
                   f"--config_file={os.path.join(DLPERF_CONFIGS, 'gpu.yaml')}",
                   f"--params_override={TINY_OVERRIDE},train.steps=4",
                   "--num_gpus=0", "--log_steps=1"], timeout=300)
    assert p.returncode == exit_status.OK, p.stdout[-3000:]
    assert p.longest_gap() <= MAX_SILENCE, p.describe_gap()
    for stage in ("loading TensorFlow", "building the model",
                  "tracing and compiling the first step"):
        assert f"official_bench: stage: {stage}: done in " in p.stdout
    lines = [l for l in p.stdout.splitlines() if "TimeHistory" in l]
    assert len(lines) == 4  # --log_steps=1 beat log_steps=2 in the override
    for line in lines:
        assert DLPERF_REGEX.search(line)
        assert "] TimeHistory: " in line  # through absl logging
    result = json.load(open(tmp_path / "result.json"))
    cfg = result["config"]
    assert cfg["model"]["name"] == "resnet_cifar"
    assert cfg["model"]["optimizer"]["momentum"] == 0.875  # from gpu.yaml
    assert cfg["train"]["time_history"]["log_steps"] == 1
    assert cfg["runtime"]["batchnorm_spatial_persistent"] is True
    assert "official_bench: run finished" in p.stdout
    if cuda_noise.no_gpu_reason():  # a CPU machine: our line, not cuInit's
        assert "failed call to cuInit" not in p.stdout
        assert p.stdout.count("official_bench: no GPU on this machine") == 1
