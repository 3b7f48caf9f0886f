"""Which Python the run scripts use, and the check that it can run the
trainer (issue 16): a fresh clone whose PATH python3 has none of the
trainer's packages.

"Clones" are copies of the repository tree in tmp_path. The bare python3 is
a wrapper that runs this test's Python with -S (no site-packages: no
tensorflow, absl, yaml), put first on PATH. Only 127.0.0.1 is used.
"""

import os
import shutil
import subprocess
import time

import pytest

from official_bench.launch import settings as settings_lib
from support.helpers import free_ports
from support.run_scripts import PY, TINY

REPO = os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TREE = ("official_bench", "configs", "scripts", "run_single_node.sh",
        "run_two_node.sh", "run_multi_node.sh")


def wrapper(path, command):
    """An executable shell script that execs `command "$@"`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nexec {command} \"$@\"\n")
    path.chmod(0o755)
    return path


def clone(tmp_path, with_venv):
    """A copy of the repository; with_venv: a .venv whose python is the
    test's Python (as `make bench` would make one)."""
    root = tmp_path / "clone"
    for name in TREE:
        src = os.path.join(REPO, name)
        if os.path.isdir(src):
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns(
                "__pycache__"))
        else:
            root.mkdir(exist_ok=True)
            shutil.copy2(src, root / name)
    if with_venv:
        wrapper(root / ".venv" / "bin" / "python", PY)
    return root


def bare_path(tmp_path):
    """PATH whose python3 lacks the trainer's packages."""
    wrapper(tmp_path / "bare" / "python3", f"{PY} -S")
    return f"{tmp_path / 'bare'}{os.pathsep}{os.environ.get('PATH', '')}"


def fresh_env(tmp_path, **knobs):
    """A new user's shell: no launcher knob, no PYTHON, no venv."""
    drop = {k.env for k in settings_lib.KNOBS} | {
        "TF_CONFIG", "VIRTUAL_ENV", "PYTHONPATH", "OB_LAUNCH_PYTHON",
        "OB_LAUNCH_PYTHON_FROM", "OB_LAUNCH_PYTHON_UNSET",
        "OB_LAUNCH_PYTHON_UNSET_FROM"}
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith("SLURM")}
    env.update(PATH=bare_path(tmp_path), DEVICE="cpu", SLEEP_SECONDS="0",
               LOG_DIR=str(tmp_path / "logs"),
               MODEL_DIR=str(tmp_path / "model_dir"))
    env.update({k.upper(): str(v) for k, v in knobs.items()})
    return env


def run(script, tmp_path, *args, env, timeout=60):
    return subprocess.run(["bash", str(script), *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_clone_with_venv_runs_with_it(tmp_path):
    """The issue's command in a clone after `make test`: the scripts pick
    .venv/bin/python although PATH's python3 lacks absl; the run succeeds."""
    root = clone(tmp_path, with_venv=True)
    out = run(root / "run_single_node.sh", tmp_path, "4", "fp32",
              env=fresh_env(tmp_path, TEST_NUM=1, STEPS=4, LOG_STEPS=2,
                            PARAMS_OVERRIDE=TINY, RUN_TIMEOUT=240),
              timeout=300)
    assert out.returncode == 0, (out.stdout, out.stderr)
    venv_python = f"{root}/.venv/bin/python"
    assert f"trainer python: {venv_python} (the repository's .venv)" \
        in out.stdout
    assert "done: 1 of 1 run(s) ok" in out.stdout
    log = tmp_path / "logs/tensorflow/resnet50/bz4/1n1g/rn50_b4_fp32_1.log"
    text = log.read_text()
    assert f" {venv_python} -m official_bench.classifier_trainer " in text
    assert "TimeHistory:" in text and log.with_suffix(".json").is_file()


def test_clone_without_venv_stops_with_one_line(tmp_path):
    """No .venv and a bare python3: exit 2, one line naming the
    interpreter, what it lacks and the fix; nothing written."""
    root = clone(tmp_path, with_venv=False)
    start = time.monotonic()
    out = run(root / "run_single_node.sh", tmp_path, "16", "fp32",
              env=fresh_env(tmp_path, TEST_NUM=1, STEPS=20, LOG_STEPS=5))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    line = lines[0]
    assert line.startswith("error: run_single_node.sh: the launcher's Python "
                           f"{tmp_path}/bare/python3 (python3 from PATH: "
                           f"PYTHON unset, no activated venv, no "
                           f"{root}/.venv) lacks tensorflow, "), line
    assert "absl (pip absl-py)" in line and "yaml (pip pyyaml)" in line
    assert f"`make bench` in {root} creates {root}/.venv" in line
    assert "set PYTHON=" in line
    assert not (tmp_path / "logs").exists()
    assert not (tmp_path / "model_dir").exists()
    assert time.monotonic() - start < 20


def test_trainer_python_without_packages_stops_before_any_run(tmp_path):
    """The launcher's Python is fine, the trainer's (--python) is not: the
    subprocess check names it; exit 2, one line, no log directory."""
    env = fresh_env(tmp_path, PYTHON=PY, TEST_NUM=1)
    out = run(os.path.join(REPO, "run_single_node.sh"), tmp_path, "4",
              "--python", str(tmp_path / "bare" / "python3"), env=env)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(
        f"error: run_single_node.sh: the trainer's Python {tmp_path}/bare/"
        "python3 (--python) (Python "), out.stderr
    assert "lacks tensorflow, tf_keras (pip tf-keras), absl (pip absl-py), " \
        "yaml (pip pyyaml); fix: point --python at a Python" in out.stderr
    assert not (tmp_path / "logs").exists()
    # Not a Python at all.
    out = run(os.path.join(REPO, "run_single_node.sh"), tmp_path, "4",
              "--python", "/bin/false", env=env)
    assert out.returncode == 2
    assert "the trainer's Python /bin/false (--python) is not a Python " \
        "that answers `-c` (exit 1, no output)" in out.stderr
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("active, venv, unset", [
    (True, True, ": the run scripts then use {tmp}/active/bin/python (the "
     "activated venv, VIRTUAL_ENV)"),
    (False, True, ": the run scripts then use {root}/.venv/bin/python (the "
     "repository's .venv)"),
    (False, False, " (`make bench` in {root} creates {root}/.venv, which the "
     "run scripts use when PYTHON is unset)"),
])
def test_a_wrong_python_is_told_what_unsetting_it_gives(tmp_path, active,
                                                        venv, unset):
    """PYTHON names a Python without the packages: the fix says what the
    run scripts use once PYTHON is unset (an activated venv wins over the
    repository's .venv), not always the .venv `make bench` makes."""
    root = clone(tmp_path, with_venv=venv)
    knobs = {"PYTHON": str(tmp_path / "bare" / "python3")}
    if active:
        knobs["VIRTUAL_ENV"] = str(tmp_path / "active")
        wrapper(tmp_path / "active" / "bin" / "python", PY)
    out = run(root / "run_single_node.sh", tmp_path, "4",
              env=fresh_env(tmp_path, **knobs))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.rstrip().endswith(
        "fix: point PYTHON at a Python that has them, or unset it" +
        unset.format(tmp=tmp_path, root=root)), out.stderr


@pytest.mark.parametrize("setup, chosen", [
    ({}, "{root}/.venv/bin/python (the repository's .venv)"),
    ({"VIRTUAL_ENV": "{tmp}/active"},
     "{tmp}/active/bin/python (the activated venv, VIRTUAL_ENV)"),
    ({"VIRTUAL_ENV": "{tmp}/active", "PYTHON": "{tmp}/explicit"},
     "{tmp}/explicit (PYTHON)"),
])
def test_interpreter_precedence(tmp_path, setup, chosen):
    """PYTHON > activated venv > the repository's .venv > python3."""
    root = clone(tmp_path, with_venv=True)
    wrapper(tmp_path / "active" / "bin" / "python", PY)
    wrapper(tmp_path / "explicit", PY)
    knobs = {k: v.format(tmp=tmp_path) for k, v in setup.items()}
    out = run(root / "run_single_node.sh", tmp_path, "4", "--dry-run",
              env=fresh_env(tmp_path, **knobs))
    assert out.returncode == 0, out.stderr
    want = chosen.format(root=root, tmp=tmp_path)
    assert f"trainer python: {want}" in out.stdout
    python = want.split(" (")[0]
    assert f" {python} -m official_bench.classifier_trainer " in out.stdout


def test_help_says_which_python(tmp_path):
    """The interpreter order lives in docs/run_scripts.md (the long form of
    --help); --help itself names the knob."""
    out = run(os.path.join(REPO, "run_single_node.sh"), tmp_path, "--help",
              env=fresh_env(tmp_path, PYTHON=PY))
    text = " ".join(out.stdout.split())
    assert "--python-check-timeout PYTHON_CHECK_TIMEOUT" in text
    assert "[300.0]" in text
    with open(os.path.join(REPO, "docs", "run_scripts.md")) as f:
        docs = " ".join(f.read().split())
    assert "`PYTHON` > the activated venv (`$VIRTUAL_ENV/bin/python`) > the " \
        "repository's `.venv/bin/python` (`make bench` creates it) > " \
        "`python3` from `PATH`" in docs


@pytest.mark.multiworker
@pytest.mark.parametrize("broken", ["trainer", "launcher"])
def test_node_that_cannot_run_is_named_by_node_0(tmp_path, broken):
    """Node 1 cannot start the trainer: its --python lacks the packages
    ("trainer"), or it is a fresh clone without .venv whose bare python3
    cannot even plan ("launcher"). It tells node 0 through the barrier; node
    0 names it and what it lacks; both exit 2 and nothing is written."""
    w0, w1, b = free_ports(3)
    common = dict(NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}", BARRIER_PORT=b,
                  BARRIER_TIMEOUT=60, TEST_NUM=1)
    root = clone(tmp_path, with_venv=False)
    cmds, envs = [], []
    for index in (0, 1):
        env = fresh_env(tmp_path, TASK_INDEX=index, **common)
        env.update(LOG_DIR=str(tmp_path / f"logs{index}"),
                   MODEL_DIR=str(tmp_path / f"model_dir{index}"))
        script = os.path.join(REPO, "run_two_node.sh")
        args = ["4"]
        if index == 0:
            env["PYTHON"] = PY
        elif broken == "trainer":
            env["PYTHON"] = PY
            args += ["--python", str(tmp_path / "bare" / "python3")]
        else:
            script = str(root / "run_two_node.sh")
        cmds.append(["timeout", "-k", "5", "120", "bash", script, *args])
        envs.append(env)
    procs = [subprocess.Popen(c, cwd=tmp_path, env=e, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for c, e in zip(cmds, envs)]
    (out0, _), (out1, _) = [p.communicate(timeout=130) for p in procs]
    assert [p.returncode for p in procs] == [2, 2], (out0, out1)
    role = "trainer" if broken == "trainer" else "launcher"
    assert (f"[launch node 0/2] error: node 1 (127.0.0.1:{w1}) cannot start "
            f"the trainer: the {role}'s Python {tmp_path}/bare/python3 (") \
        in out0, out0
    named = [l for l in out0.splitlines() if "node 1 (127.0.0.1" in l and
             "cannot start" in l][0]
    assert "lacks tensorflow, tf_keras (pip tf-keras), absl (pip absl-py)" \
        in named and "; fix: " in named
    assert "no run started (on any node): 1 node(s) cannot start the " \
        "trainer" in out0
    assert "[launch node 1/2] error: this node: " in out1
    assert "run 1: starting" not in out0 + out1
    for index in (0, 1):
        assert not (tmp_path / f"logs{index}").exists()
        assert not (tmp_path / f"model_dir{index}").exists()
