"""multi_worker_mirrored on the IPv6 loopback: '[::1]:port' end to end."""

import json
import socket

import pytest

pytestmark = pytest.mark.multiworker


def _free_ipv6_ports(n):
    """n free ports on ::1, or None when this machine has no IPv6 loopback."""
    if not socket.has_ipv6:
        return None
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            socks.append(s)
            s.bind(("::1", 0))
        return [s.getsockname()[1] for s in socks]
    except OSError:
        return None
    finally:
        for s in socks:
            s.close()


@pytest.mark.slow
def test_launcher_to_trainer_on_ipv6_loopback(tmp_path):
    """run_two_node.sh twice (issue 11 §6), node 0 given
    NODES=[::1]:p0,[::1]:p1 and node 1 the same cluster as TF_CONFIG: the
    launcher's node list from either, its barrier (bound to ::1, with the
    same BARRIER_SECRET on both nodes), the trainer's worker_hosts check
    (node 0's, from NODES) and its TF_CONFIG (node 1's, passed on) all
    take the bracketed form; both nodes finish with result files."""
    import os
    import sys

    from official_bench.launch import settings as settings_lib
    from support.launch_cli import run_together
    ports = _free_ipv6_ports(3)
    if ports is None:
        pytest.skip("no IPv6 loopback here (socket.has_ipv6 is false or "
                    "binding ::1 fails)")
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    drop = {k.env for k in settings_lib.KNOBS} | {"TF_CONFIG",
                                                  settings_lib.SECRET_ENV}
    base = {k: v for k, v in os.environ.items()
            if k not in drop and not k.startswith("SLURM")}
    base.update(
        PYTHON=os.environ.get("OB_TEST_PYTHON", sys.executable),
        LOG_DIR=str(tmp_path / "logs"), MODEL_DIR=str(tmp_path / "model_dir"),
        SLEEP_SECONDS="0", DEVICE="cpu", STEPS="4", LOG_STEPS="2",
        PARAMS_OVERRIDE=",".join([
            "model.name=resnet_cifar", "model.model_params.depth=8",
            "train_dataset.image_size=16", "train_dataset.num_classes=10",
            "validation_dataset.image_size=16",
            "validation_dataset.num_classes=10", "evaluation.skip_eval=true"]),
        RUN_TIMEOUT="240", KILL_AFTER="10", BARRIER_TIMEOUT="60",
        PEER_TIMEOUT="120", BARRIER_SECRET="v6-secret",
        BARRIER_PORT=str(ports[2]))
    hosts = [f"[::1]:{ports[0]}", f"[::1]:{ports[1]}"]
    node_env = [dict(base, NODES=",".join(hosts), TASK_INDEX="0"),
                dict(base, TF_CONFIG=json.dumps({
                    "cluster": {"worker": hosts},
                    "task": {"type": "worker", "index": 1}}))]
    returncodes, outs = run_together(
        [(["timeout", "-k", "10", "400", "bash",
           os.path.join(repo, "run_two_node.sh"), "4", "fp32", "1"], env)
         for env in node_env], tmp_path, timeout=420)
    assert returncodes == [0, 0], "\n".join(outs)
    assert f"barrier: serving on [::1]:{ports[2]} for 2 nodes" in outs[0]
    for out in outs:
        assert "authenticated (key: BARRIER_SECRET (env))" in out
        assert "done: 1 of 1 run(s) ok on every node" in out
    root = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4" / "2n1g"
    chief = json.loads((root / "rn50_b4_fp32_1.json").read_text())
    worker = json.loads((root / "node1" / "rn50_b4_fp32_1.json").read_text())
    assert chief["environment"]["num_workers"] == 2
    assert chief["task"]["index"] == 0 and worker["task"]["index"] == 1
    assert chief["history"]["loss"] == worker["history"]["loss"]
    assert f"nodes: {','.join(hosts)} (from TF_CONFIG)" in outs[1], outs[1]
    assert "TF_CONFIG is set and wins (passed to the trainer unchanged)" \
        in outs[1]
    assert "Using TF_CONFIG from the environment" in \
        (root / "node1" / "rn50_b4_fp32_1.log").read_text()
    assert "Using TF_CONFIG" not in (root / "rn50_b4_fp32_1.log").read_text()
