"""runtime.enable_xla with a cluster only TF_CONFIG names: refused by the
real trainer in one line before the workers join (runtime/distribute.py,
config/rules.xla_refusal). It was a wait for the peers, then a traceback
at the first step ('Collectives are not yet implemented for CPU devices
when compiling with XLA') and an abort."""

import json
import time

from official_bench.contracts import exit_status
from support.helpers import TINY_OVERRIDE, cli, loopback_hosts


def test_xla_on_cpu_workers_from_tf_config_is_one_error_line(tmp_path):
    ports, _ = loopback_hosts(2)
    tf_config = json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
        "task": {"type": "worker", "index": 0}})
    start = time.monotonic()
    out = cli(["--mode=train", f"--model_dir={tmp_path / 'm'}",
               "--params_override=" + TINY_OVERRIDE +
               ",runtime.distribution_strategy=multi_worker_mirrored,"
               "runtime.enable_xla=true,runtime.peer_timeout_seconds=120"],
              timeout=120, env={"TF_CONFIG": tf_config})
    lines = out.stdout.strip().splitlines()
    assert out.returncode == exit_status.CONFIG, out.stdout[-3000:]
    assert lines[-1] == (
        "error: runtime.enable_xla is true, but multi_worker_mirrored over 2 "
        "CPU workers cannot run an XLA-compiled step (TensorFlow has no XLA "
        "collectives on CPU); set runtime.enable_xla=false, or train on GPUs "
        "(runtime.num_gpus > 0)"), out.stdout[-3000:]
    assert "Traceback" not in out.stdout
    assert "waiting for peers" not in out.stdout  # refused before joining
    assert time.monotonic() - start < 90
