"""Inputs under two multi_worker_mirrored trainer processes on 127.0.0.1:
a Python source per worker with its own pipeline id. (Batches resident on
each replica's device: system/test_multiworker.py's 100-step run.)"""

import os
import subprocess
import sys

import pytest

from support.helpers import (
    REPO,
    TINY_OVERRIDE,
    cli_env,
    free_ports,
)

CLI_ENV = {"PYTHONPATH": os.pathsep.join([REPO, os.path.join(REPO, "tests")])}


@pytest.mark.slow
@pytest.mark.multiworker
def test_two_workers_each_get_their_pipeline_id(tmp_path):
    """Each worker's source writes the input pipeline id and count it was
    given to a file in data_dir; both workers must train and differ."""
    hosts = ",".join(f"127.0.0.1:{p}" for p in free_ports(2))
    procs = []
    for i in range(2):
        override = ",".join([
            TINY_OVERRIDE, "runtime.distribution_strategy="
            "multi_worker_mirrored", f"runtime.worker_hosts='{hosts}'",
            f"runtime.task_index={i}", "runtime.all_reduce_alg=ring",
            "runtime.peer_timeout_seconds=120", "train.steps=4",
            "train_dataset.builder=python", "train_dataset.python_source="
            "support.python_sources:recording_source",
            f"train_dataset.data_dir={tmp_path}"])
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "official_bench.classifier_trainer",
             "--mode=train", f"--model_dir={tmp_path / str(i)}",
             f"--params_override={override}"], cwd=REPO,
            env=cli_env(CLI_ENV), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=400)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    seen = sorted(open(tmp_path / f).read() for f in os.listdir(tmp_path)
                  if f.startswith("pipeline-"))
    assert seen == ["0 of 2", "1 of 2"]
