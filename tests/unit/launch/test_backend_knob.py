"""BACKEND, the run scripts' backend switch (runtime.backend), in dry runs:
what it puts in the trainer's command and where its logs go, what the
interpreter check asks for, the knobs BACKEND=jax refuses, and that
BACKEND=tensorflow plans exactly what no BACKEND plans. No trainer
starts; addresses are 127.0.0.1 and 10.200.0.0/24 literals never
contacted.
"""

import json
import os
import re
import subprocess

import pytest

from official_bench.contracts import exit_status, log_tree
from official_bench.launch import (
    plan as plan_lib,
    preflight,
    settings as settings_lib,
)
from support.launch_cli import PY, SCRIPTS, clean_env, script

OVERRIDE = re.compile(r"'--params_override=(\{.*\})'")
STAMP = re.compile(r"\d{8}-\d{6}")
TWO_NODES = dict(NODES="10.200.0.1:2222,10.200.0.2:2222", TASK_INDEX=1)


def overrides(text):
    """The --params_override of every command a dry run shows."""
    found = [json.loads(m) for m in OVERRIDE.findall(text)]
    assert found, text
    return found


@pytest.mark.parametrize("mode, knobs, case", [
    ("single", {}, "1n1g"),
    ("two", TWO_NODES, "2n1g/node1"),
])
def test_jax_sets_runtime_backend_and_trees_under_jax(tmp_path, mode, knobs,
                                                      case):
    out = script(mode, tmp_path, "4", "fp32", "1", "--dry-run",
                 DEVICE="cpu", BACKEND="jax", **knobs)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    (override,) = overrides(text)
    assert override["runtime"]["backend"] == "jax"
    logs, models = tmp_path / "logs", tmp_path / "model_dir"
    assert f"log:       {logs}/jax/resnet50/bz4/{case}/rn50_b4_fp32_1.log" \
        in text
    model_dirs = re.findall(r"--model_dir=(\S+)", text)
    assert len(model_dirs) == 1
    assert model_dirs[0].startswith(
        f"{models}/jax/resnet50/bz4/{case.split('/')[0]}/rn50_b4_fp32_1.")
    parsed = log_tree.parse_model_dir(model_dirs[0])
    assert parsed is not None and parsed.backend == "jax"
    assert "/tensorflow/" not in text
    assert not logs.exists()  # a dry run writes nothing


@pytest.mark.parametrize("mode, knobs", [("single", {}), ("two", TWO_NODES)])
def test_tensorflow_plans_what_no_backend_plans(tmp_path, mode, knobs):
    """BACKEND=tensorflow is the default: the same dry run, byte for byte
    (but the session stamp), no runtime.backend in the overrides, logs
    under tensorflow/."""
    runs = [script(mode, tmp_path, "4", "fp32", "2", "--dry-run",
                   DEVICE="cpu", **dict(knobs, **backend))
            for backend in ({}, {"BACKEND": "tensorflow"})]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    default, explicit = (STAMP.sub("STAMP", r.stdout) for r in runs)
    assert explicit == default
    assert all("backend" not in o["runtime"] for o in overrides(default))
    assert f"{tmp_path}/logs/tensorflow/resnet50/bz4/" in default
    assert "/jax/" not in default


def _plan(tmp_path, **knobs):
    env = {"DEVICE": "cpu", "LOG_DIR": str(tmp_path / "logs"),
           "MODEL_DIR": str(tmp_path / "md"), "PATH": os.environ["PATH"]}
    env.update({k.upper(): str(v) for k, v in knobs.items()})
    return plan_lib.make_plan(
        settings_lib.parse(["4", "fp32", "1"], environ=env, mode="single"),
        log_tree.session_stamp(0))


def test_interpreter_check_asks_for_the_backend_modules(tmp_path):
    """The plan asks the trainer's Python for JAX's modules, not
    TensorFlow's; a Python without site-packages is told so, before any
    run, in one line (exit 2)."""
    jax_plan = _plan(tmp_path, backend="jax")
    assert jax_plan.check_modules == ["jax", "keras", "absl", "yaml"]
    assert jax_plan.check_modules == list(preflight.BACKEND_MODULES["jax"])
    assert "tensorflow" in _plan(tmp_path).check_modules

    bare = tmp_path / "bare" / "python3"
    bare.parent.mkdir()
    bare.write_text(f"#!/bin/sh\nexec {PY} -S \"$@\"\n")
    bare.chmod(0o755)
    out = subprocess.run(
        ["bash", SCRIPTS["single"], "4", "--python", str(bare)],
        cwd=tmp_path, env=clean_env(tmp_path, BACKEND="jax", DEVICE="cpu",
                                    TEST_NUM=1, PYTHON_CHECK_TIMEOUT=60),
        capture_output=True, text=True, timeout=60)
    assert out.returncode == exit_status.CONFIG, (out.stdout, out.stderr)
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr
    assert "lacks jax, keras, absl (pip absl-py), yaml (pip pyyaml); fix: " \
        in out.stderr
    assert "tensorflow" not in out.stderr
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("mode, knobs, words", [
    ("single", {"LAUNCHER": "horovod"},
     "LAUNCHER=horovod needs BACKEND=tensorflow; BACKEND=jax runs "
     "LAUNCHER=tf"),
    ("single", {"WORKERS_PER_NODE": 2},
     "WORKERS_PER_NODE=2 needs BACKEND=tensorflow; BACKEND=jax runs one "
     "process per node"),
    ("two", dict(TWO_NODES, WORKERS_PER_NODE=2),
     "WORKERS_PER_NODE=2 needs BACKEND=tensorflow"),
    ("single", {"BENCH": "allreduce"},
     "BENCH=allreduce needs BACKEND=tensorflow; BACKEND=jax runs "
     "BENCH=train"),
])
def test_jax_refuses_what_it_cannot_run(tmp_path, mode, knobs, words):
    """One line naming both knobs, exit 2, before anything is planned."""
    out = script(mode, tmp_path, "4", "fp32", "1", "--dry-run",
                 DEVICE="cpu", BACKEND="jax", **knobs)
    assert out.returncode == exit_status.CONFIG, (out.stdout, out.stderr)
    assert out.stdout == ""
    assert out.stderr.startswith(f"error: run_{mode}_node.sh: {words}"), \
        out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    # The same knobs with the default backend plan fine.
    if "LAUNCHER" not in knobs:  # horovod's dry run wants its venv
        ok = script(mode, tmp_path, "4", "fp32", "1", "--dry-run",
                    DEVICE="cpu", **knobs)
        assert ok.returncode == 0, ok.stderr
