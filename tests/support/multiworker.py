"""Two multi_worker_mirrored trainer processes on 127.0.0.1 ports."""

import os
import subprocess
import sys

import pytest

from official_bench.contracts.trainer_command import trainer_argv
from support.helpers import DLPERF_CONFIGS, REPO, cli_env

TWO_NODE = os.path.join(DLPERF_CONFIGS, "two_node_gpu.yaml")


def start_worker(model_dir, override, env=None):
    cmd = trainer_argv(sys.executable, mode="train", config_file=TWO_NODE,
                       model_dir=model_dir, params_override=override,
                       extra=["--num_gpus=0"])
    return subprocess.Popen(cmd, cwd=REPO, env=cli_env(env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def finish(proc, timeout):
    """Waits; a worker still running at the deadline is SIGKILLed."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"worker did not finish in {timeout} s:\n{out[-3000:]}")
    return proc.returncode, out
