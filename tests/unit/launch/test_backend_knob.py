"""BACKEND, the run scripts' backend switch (runtime.backend), in dry runs:
what it puts in the trainer's command and where its logs go, what the
interpreter check asks for, the knobs BACKEND=jax refuses, and that
BACKEND=tensorflow plans exactly what no BACKEND plans; and the one
backend per sweep decided from BACKEND, CONFIG_FILE and PARAMS_OVERRIDE
(issue 45 §1): the log tree, the check, the refusals and the trainer
follow it, a contradiction is one line. No trainer starts; addresses are
127.0.0.1 and 10.200.0.0/24 literals never contacted.
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
from official_bench.launch.backend_choice import Backend
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


def test_the_docs_name_what_jax_refuses():
    """docs/run_scripts.md's list of the knobs BACKEND=jax refuses is the
    one above: DATA_DIR is not among them (a JAX sweep reads records;
    test_data_dir.py plans one)."""
    with open(os.path.join(plan_lib.REPO_ROOT, "docs", "run_scripts.md"),
              encoding="utf-8") as f:
        text = " ".join(f.read().split())
    listed = re.search(r"`BACKEND=jax` and its config form refuse (.*?)[;)]",
                       text)
    assert listed, "the backend section no longer lists the refusals"
    assert set(re.findall(r"`([A-Z_]+)", listed.group(1))) == {
        "LAUNCHER", "WORKERS_PER_NODE", "BENCH"}, listed.group(0)


# -- one backend per sweep, decided before the plan (issue 45 §1) ----------

SMOKE = os.path.join(plan_lib.DEFAULT_CONFIG_DIR, "cpu_smoke.yaml")


def _config_naming(tmp_path, backend):
    """The CPU smoke config with runtime.backend set in the file."""
    import yaml
    with open(SMOKE, encoding="utf-8") as f:
        tree = yaml.safe_load(f)
    tree["runtime"]["backend"] = backend
    path = tmp_path / f"smoke_{backend}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return str(path)


def _filed_under(text, tmp_path):
    """The backend folder of every log and model_dir a dry run plans."""
    logs = set(re.findall(rf"{tmp_path}/logs/(\w+)/resnet50/", text))
    models = set(re.findall(rf"{tmp_path}/model_dir/(\w+)/resnet50/", text))
    return logs, models


@pytest.mark.parametrize("knobs, where", [
    ({"PARAMS_OVERRIDE": "runtime.backend=jax"},
     "runtime.backend in PARAMS_OVERRIDE"),
    ({"CONFIG_FILE": "jax"}, "runtime.backend in {config}"),
])
def test_the_configs_backend_files_the_run_where_the_trainer_runs(
        tmp_path, knobs, where):
    """BACKEND unset, the config (file or PARAMS_OVERRIDE) names jax: the
    log tree is jax's, and the trainer's overrides name it too."""
    if knobs.get("CONFIG_FILE"):
        knobs = dict(CONFIG_FILE=_config_naming(tmp_path, "jax"))
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 DEVICE="cpu", **knobs)
    assert out.returncode == exit_status.OK, out.stderr
    assert _filed_under(out.stdout, tmp_path) == ({"jax"}, {"jax"})
    (override,) = overrides(out.stdout)
    assert override["runtime"]["backend"] == "jax"
    assert "note: backend jax: " + where.format(
        config=knobs.get("CONFIG_FILE")) + ", which the trainer follows " \
        "(BACKEND unset)" in out.stdout


def test_params_override_over_the_config_file_decides(tmp_path):
    """The trainer's order: PARAMS_OVERRIDE over the file; BACKEND that
    agrees with the result is no contradiction."""
    config = _config_naming(tmp_path, "jax")
    for knobs in ({}, {"BACKEND": "tensorflow"}):
        out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                     DEVICE="cpu", CONFIG_FILE=config,
                     PARAMS_OVERRIDE="runtime.backend=tensorflow", **knobs)
        assert out.returncode == exit_status.OK, out.stderr
        assert _filed_under(out.stdout, tmp_path) == \
            ({"tensorflow"}, {"tensorflow"})
        (override,) = overrides(out.stdout)
        assert override["runtime"]["backend"] == "tensorflow"


@pytest.mark.parametrize("knobs, words", [
    ({"BACKEND": "jax", "PARAMS_OVERRIDE": "runtime.backend=tensorflow"},
     "BACKEND=jax (env BACKEND) contradicts runtime.backend tensorflow "
     "(PARAMS_OVERRIDE): the trainer follows the config and would run "
     "tensorflow; set one of them, or the same backend in both"),
    ({"BACKEND": "tensorflow", "CONFIG_FILE": "jax"},
     "BACKEND=tensorflow (env BACKEND) contradicts runtime.backend jax "
     "({config}): the trainer follows the config and would run jax"),
    ({"PARAMS_OVERRIDE": "runtime.backend=torch"},
     "runtime.backend 'torch' (PARAMS_OVERRIDE) is not a backend; valid: "
     "tensorflow, jax"),
])
def test_a_contradiction_is_one_line_before_anything_starts(tmp_path, knobs,
                                                            words):
    """A real run (not a dry run): exit 2 with one line, no trainer
    started (no 'loading TensorFlow'), nothing written."""
    if knobs.get("CONFIG_FILE"):
        knobs = dict(knobs, CONFIG_FILE=_config_naming(tmp_path, "jax"))
    out = script("single", tmp_path, "8", "fp32", TEST_NUM=1, DEVICE="cpu",
                 **knobs)
    assert out.returncode == exit_status.CONFIG, (out.stdout, out.stderr)
    assert out.stdout == ""
    assert out.stderr.startswith("error: run_single_node.sh: " + words.format(
        config=knobs.get("CONFIG_FILE"))), out.stderr
    assert out.stderr.count("\n") == 1
    assert "loading TensorFlow" not in out.stdout + out.stderr
    assert not (tmp_path / "logs").exists()
    assert not (tmp_path / "model_dir").exists()


def test_the_configs_backend_picks_the_interpreter_check_and_refusals(
        tmp_path):
    """PARAMS_OVERRIDE's jax: the trainer's Python is asked for JAX's
    modules; a config file's jax refuses WORKERS_PER_NODE, naming it."""
    bare = tmp_path / "bare" / "python3"
    bare.parent.mkdir()
    bare.write_text(f"#!/bin/sh\nexec {PY} -S \"$@\"\n")
    bare.chmod(0o755)
    out = subprocess.run(
        ["bash", SCRIPTS["single"], "4", "--python", str(bare)],
        cwd=tmp_path, env=clean_env(
            tmp_path, PARAMS_OVERRIDE="runtime.backend=jax", DEVICE="cpu",
            TEST_NUM=1, PYTHON_CHECK_TIMEOUT=60),
        capture_output=True, text=True, timeout=60)
    assert out.returncode == exit_status.CONFIG, (out.stdout, out.stderr)
    assert "lacks jax, keras, absl (pip absl-py), yaml (pip pyyaml)" in \
        out.stderr
    assert "tensorflow" not in out.stderr.split("; fix:")[0]

    config = _config_naming(tmp_path, "jax")
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 DEVICE="cpu", CONFIG_FILE=config, WORKERS_PER_NODE=2)
    assert out.returncode == exit_status.CONFIG, (out.stdout, out.stderr)
    assert out.stderr == (
        "error: run_single_node.sh: WORKERS_PER_NODE=2 needs runtime.backend "
        f"tensorflow; runtime.backend jax ({config}) runs one process per "
        "node over all its devices\n")


def test_the_plan_holds_the_one_backend(tmp_path):
    """Plan.backend: what the log root, the interpreter check and the
    nodes' digest use."""
    plan = _plan(tmp_path, params_override="runtime.backend=jax")
    assert plan.backend.name == "jax" and plan.backend.knob == ""
    assert plan.backend.layer == "PARAMS_OVERRIDE"
    assert plan.log_root.endswith("/logs/jax/resnet50/bz4")
    assert plan.check_modules == list(preflight.BACKEND_MODULES["jax"])
    both = _plan(tmp_path, backend="jax",
                 params_override="runtime.backend=jax").backend
    assert both == Backend("jax", knob="BACKEND=jax (env BACKEND)",
                           layer="PARAMS_OVERRIDE")
    assert _plan(tmp_path).backend.name == "tensorflow"
