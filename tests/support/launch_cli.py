"""The run scripts run as a user would, with no knob of the test process's
environment leaking in."""

import os
import signal
import subprocess
import sys

from official_bench.launch import settings as settings_lib
from support.helpers import REPO

PY = os.environ.get("OB_TEST_PYTHON", sys.executable)


SCRIPTS = {m: os.path.join(REPO, f"run_{n}_node.sh")
           for m, n in (("single", "single"), ("two", "two"),
                        ("multi", "multi"))}


# What nvidia-smi -L says on a machine whose driver finds no GPU.
NO_GPU_SMI = "#!/bin/sh\necho 'No devices were found'\nexit 6\n"


def hide_gpus(folder, monkeypatch):
    """The run scripts see a machine without GPUs, whatever this one has:
    an nvidia-smi first on PATH that finds none (GPU_IDS is then taken
    unchecked; a test that wants GPUs puts its own nvidia-smi first)."""
    smi = folder / "nvidia-smi"
    smi.write_text(NO_GPU_SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def fake_smi(tmp_path, gpus):
    """PATH with an nvidia-smi that lists `gpus` GPUs (UUIDs GPU-fake{i})
    first, for the run scripts' device checks."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir(exist_ok=True)
    smi.write_text("#!/bin/sh\n" + "".join(
        f"echo 'GPU {i}: Fake (UUID: GPU-fake{i})'\n" for i in range(gpus)))
    smi.chmod(0o755)
    return f"{smi.parent}{os.pathsep}{os.environ['PATH']}"


def clean_env(tmp_path, **knobs):
    """The test process's environment without any launcher knob, TF_CONFIG
    or Slurm variable, plus `knobs` (upper-cased)."""
    drop = {k.env for k in settings_lib.KNOBS} | {"TF_CONFIG"} | \
        set(settings_lib.SLURM_VARS)
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith("SLURM")}
    # PYTHON_CHECK_TIMEOUT=0: the interpreter check imports TensorFlow in a
    # subprocess (6-15 s per launcher start here); it has its own tests
    # (unit/launch/test_preflight.py), and the run scripts' end-to-end test
    # (system/test_run_scripts.py) keeps it on.
    env.update(PYTHON=PY, LOG_DIR=str(tmp_path / "logs"),
               MODEL_DIR=str(tmp_path / "model_dir"), SLEEP_SECONDS="0",
               PYTHON_CHECK_TIMEOUT="0")
    env.update({k.upper(): str(v) for k, v in knobs.items()})
    return env


def script(mode, tmp_path, *args, timeout=60, **knobs):
    return subprocess.run(["bash", SCRIPTS[mode], *args], cwd=tmp_path,
                          env=clean_env(tmp_path, **knobs),
                          capture_output=True, text=True, timeout=timeout)


def run_together(commands, cwd, timeout):
    """Starts every (argv, env) of `commands` at once, each in a session of
    its own, stdout and stderr as one text; returns ([returncode],
    [output]), waiting up to `timeout` s on each in turn. Whatever still
    runs when this returns or raises (a timeout) is killed with its process
    group."""
    procs = []
    try:
        for argv, env in commands:
            procs.append(subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, start_new_session=True))
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return [p.returncode for p in procs], outs
