"""Two multi_worker_mirrored trainer processes on 127.0.0.1 ports."""

import json
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


def train_two_workers(model_dir, hosts, common):
    """Two workers train together and both succeed; returns (chief's
    result, worker 1's result, both outputs). Worker 0 is configured
    by worker_hosts + task_index, worker 1 by TF_CONFIG, which must win
    over the YAML's worker_hosts/task_index."""
    w0 = start_worker(model_dir, f"{common},runtime.worker_hosts='{hosts}',"
                                 "runtime.task_index=0")
    tf_config = json.dumps({"cluster": {"worker": hosts.split(",")},
                            "task": {"type": "worker", "index": 1}})
    w1 = start_worker(model_dir, common, env={"TF_CONFIG": tf_config})
    rc0, out0 = finish(w0, 400)
    rc1, out1 = finish(w1, 400)
    assert rc0 == 0, out0[-3000:]
    assert rc1 == 0, out1[-3000:]
    chief = json.load(open(os.path.join(model_dir, "result.json")))
    other = json.load(open(os.path.join(model_dir, "result_worker1.json")))
    assert chief["environment"]["num_workers"] == 2
    assert chief["history"]["loss"] == pytest.approx(other["history"]["loss"])
    return chief, other, (out0, out1)
