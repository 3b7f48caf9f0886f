"""Every console script in setup.cfg answers --help (issue 28 §5): exit 0,
its flags listed, no line wider than 80 columns even on a wide terminal,
and TensorFlow not imported to say so (help is instant)."""

import configparser
import os
import subprocess
import sys

import pytest

from support.helpers import REPO, cli_env

# A few flags each script must list; every console script must be here.
KNOWN_FLAGS = {
    "official-bench-train": [
        "--mode", "--model_type", "--dataset", "--model_dir", "--data_dir",
        "--config_file", "--params_override", "--log_steps", "--num_gpus",
        "--profile_steps", "--[no]run_eagerly"],
    "official-bench-extract": [
        "--log_dir", "--output_dir", "--warmup_batches", "--train_batches",
        "--method", "--compare", "--no_plot"],
    "official-bench-build-records": [
        "--output_dir", "--input_dir", "--layout", "--train_shards",
        "--validation_shards", "--num_workers", "--verify"],
    "official-bench-allreduce": [
        "--config_file", "--params_override", "--model_dir", "--sizes",
        "--dtypes", "--iters", "--warmup", "--compute_wait_cycles"],
    "official-bench-doctor": [
        "--workdir", "--output", "--quick", "--only", "--list", "--timeout"],
    "official-bench-zmq-producer": [
        "--connect", "--bind", "--synthetic", "--folder", "--records",
        "--python_source", "--batch_size", "--dtype", "--max_batches"],
    "official-bench-input-bench": [
        "--config_file", "--params_override", "--model_type", "--dataset",
        "--seconds"],
    "official-bench-compare": [
        "--a", "--b", "--a-override", "--b-override", "--a-config",
        "--b-config", "--config", "--pairs", "--json"],
    "official-bench-history": [
        "--db", "--case", "--plot", "--import", "--json"],
    "official-bench-data-service": [
        "--dispatcher", "--worker", "--port", "--dispatcher_address",
        "--worker_address"],
}
WIDTH = 80


def console_scripts():
    """{script name: module} from setup.cfg's entry points."""
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(REPO, "setup.cfg"))
    scripts = {}
    for line in cfg["options.entry_points"]["console_scripts"].splitlines():
        if line.strip():
            name, target = (part.strip() for part in line.split("="))
            scripts[name] = target.split(":")[0]
    return scripts


def test_every_console_script_has_known_flags():
    assert sorted(console_scripts()) == sorted(KNOWN_FLAGS)


def imported_modules(importtime_stderr):
    """Module names from `python -X importtime` lines on stderr."""
    names = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


@pytest.mark.parametrize("script", sorted(KNOWN_FLAGS))
def test_help_lists_flags_fits_80_columns_without_tensorflow(script):
    module = console_scripts()[script]
    # A wide terminal: argparse and absl would wrap at 200 columns.
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", module, "--help"],
        cwd=REPO, env=cli_env({"COLUMNS": "200"}), capture_output=True,
        text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    missing = [f for f in KNOWN_FLAGS[script] if f not in p.stdout]
    assert not missing, f"{script} --help lacks {missing}:\n{p.stdout}"
    wide = [line for line in p.stdout.splitlines() if len(line) > WIDTH]
    assert not wide, f"{script} --help lines over {WIDTH} columns:\n" + \
        "\n".join(wide)
    tf = sorted(m for m in imported_modules(p.stderr)
                if m == "tensorflow" or m.startswith("tensorflow."))
    assert not tf, f"{script} --help imported {tf[:3]}"
