"""jax.distributed under a Slurm step: JAX's own cluster detection reads
SLURM_LOCALID and opens only that GPU (jax_cuda_visible_devices), so a
one-task-per-node srun of the JAX backend saw 1 of its 8 GPUs and stopped
("needs 8 GPU(s) ... JAX sees 1"). _join gives JAX the whole cluster and
turns that detection off. One real jax.distributed on the CPU, in a child
process (it starts once per process)."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")

CHILD = r"""
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
s.close()
import jax
from official_bench.jax_backend import devices
from official_bench.runtime.cluster import Cluster
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_cuda_visible_devices", "0,1,2,3")
devices._join(jax, Cluster(workers=[f"127.0.0.1:{port}"]), 30, "cpu")
print("VISIBLE", jax.config.read("jax_cuda_visible_devices"))
jax.distributed.shutdown()
"""


def test_slurm_step_variables_leave_the_gpus_alone():
    env = dict(os.environ, SLURM_JOB_ID="42", SLURM_STEP_NODELIST="n[01-02]",
               SLURM_NTASKS="2", SLURM_PROCID="0", SLURM_LOCALID="1",
               JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", CHILD], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "VISIBLE 0,1,2,3" in out.stdout.splitlines(), out.stdout
