"""Each kind's pod command (`python3 -m official_bench.deploy.pod`, from
official-bench-k8s's manifests) on 2 pods that train together, given the
environment Kubernetes would give them: the manifest's own variables plus
JOB_COMPLETION_INDEX (Indexed Job, JobSet) or the TFJob operator's
TF_CONFIG (`<name>-worker-<i>.<namespace>.svc:2222`, "environment":
"cloud"), and the barrier secret as a mode-0400 file.

- In containers: two containers of the project's image on one podman
  network, each named as its pod's DNS name (`b-0.b`,
  `b-worker-0.ns.svc`), which the network resolves as a headless Service
  does; logs on a mounted volume; for the job and tfjob kinds (jobset's
  pod path is the job's, as below). Skips with support/containers.py's
  reason where containers cannot run.
- On CPU, where containers cannot run (where they can, the containers
  cover the same path and these would add ~45 s to `make test`): the same
  command as two processes on 127.0.0.1, the host names replaced through
  the entry's own inputs (NODES, TF_CONFIG), for the job and tfjob kinds
  (jobset's pod path is the job's: NODES with JOB_COMPLETION_INDEX; its
  names are unit-tested).
Tiny CIFAR ResNet, 6 steps, TEST_NUM=1: 20-50 s a pair on 2 busy cores.
"""

import json
import os
import sys

import pytest

from official_bench.deploy import kubernetes as k8s
from support import containers
from support.helpers import free_ports
from support.launch_cli import clean_env, run_together
from support.run_scripts import PY, RUN_DEFAULTS, failures

pytestmark = [pytest.mark.slow, pytest.mark.multiworker]
TAG = f"ob{os.getpid() % 100000}"
CASE = os.path.join("tensorflow", "resnet50", "bz4", "2n1g")
LOG = "rn50_b4_fp32_1"
FLOW = dict(SLEEP_SECONDS="0", PYTHON_CHECK_TIMEOUT="0",
            BARRIER_TIMEOUT="120", PEER_TIMEOUT="120", OB_DNS_TIMEOUT="120")


def options(kind, name=None, namespace=None):
    return k8s.Options(nodes=2, gpus=0, image=containers.IMAGE, kind=kind,
                       name=name or f"{TAG}{kind[0]}", namespace=namespace,
                       batch=4, test_num=1, hold=0)


def manifest_env(opts):
    """The container's plain variables, read from the manifest itself."""
    (container,) = k8s.pod_spec_of(k8s.manifests(opts)[-1])["containers"]
    assert container["command"] == k8s.ENTRY
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def given_by_kubernetes(kind, index, addresses):
    """What Kubernetes or the operator adds to pod `index`'s environment."""
    if kind == "tfjob":
        return {"TF_CONFIG": json.dumps({
            "cluster": {"worker": addresses},
            "task": {"type": "worker", "index": index},
            "environment": "cloud"})}
    return {"JOB_COMPLETION_INDEX": str(index)}


def secret_dir(tmp_path):
    folder = tmp_path / "secret"
    folder.mkdir()
    path = folder / k8s.SECRET_KEY
    path.write_text(f"{TAG}-barrier-key\n")
    path.chmod(0o400)  # the Secret volume's defaultMode
    return folder


def check_trained_together(kind, log_dir, results):
    (rc0, out0), (rc1, out1) = results
    assert (rc0, rc1) == (0, 0), out0[-4000:] + "\n----\n" + out1[-4000:]
    how = "TF_CONFIG task worker" if kind == "tfjob" else \
        "JOB_COMPLETION_INDEX="
    for i, out in enumerate((out0, out1)):
        assert f"node {i} of 2 ({how}" in out and "run_two_node.sh" in out
        assert "done: 1 of 1 run(s) ok on every node" in out
        assert "barrier (port" not in out  # not open: the secret was read
    if kind == "tfjob":
        assert "(from TF_CONFIG)" in out0
    root = log_dir / CASE
    chief = json.loads((root / f"{LOG}.json").read_text())
    worker = json.loads((root / "node1" / f"{LOG}.json").read_text())
    assert chief["environment"]["num_workers"] == 2
    assert chief["stats"]["global_batch_size"] == 8
    assert (chief["task"]["index"], worker["task"]["index"]) == (0, 1)
    assert chief["history"]["loss"] == worker["history"]["loss"]


@pytest.mark.parametrize("kind", ["job", "tfjob"])
def test_two_pods_as_processes_train_together(tmp_path, kind):
    if containers.skip_reason() is None:
        pytest.skip("containers run here: test_two_pods_in_containers_"
                    "train_together runs this pod command")
    opts = options(kind)
    ports = free_ports(3)
    addresses = [f"127.0.0.1:{p}" for p in ports[:2]]
    log_dir = tmp_path / "logs"
    secret = secret_dir(tmp_path) / k8s.SECRET_KEY
    commands = []
    for index in (0, 1):
        env = dict(manifest_env(opts), **RUN_DEFAULTS, **FLOW,
                   **given_by_kubernetes(kind, index, addresses),
                   LOG_DIR=str(log_dir), MODEL_DIR=str(tmp_path / "md"),
                   BARRIER_SECRET_FILE=str(secret),
                   BARRIER_PORT=str(ports[2]))
        if kind != "tfjob":
            env["NODES"] = ",".join(addresses)  # the entry's input
        commands.append(([sys.executable, "-m", "official_bench.deploy.pod"],
                         clean_env(tmp_path, PYTHON=PY, **env)))
    codes, outs = run_together(commands, tmp_path, timeout=420)
    try:
        check_trained_together(kind, log_dir, list(zip(codes, outs)))
    except AssertionError:
        print(failures(tmp_path, "\n".join(outs)))
        raise


# jobset's pod path is the job's (NODES with JOB_COMPLETION_INDEX; its
# names and plan are unit-tested in tests/unit/deploy): a third pair of
# containers would add ~36 s to `make test` and no other code.
@pytest.mark.parametrize("kind", ["job", "tfjob"])
def test_two_pods_in_containers_train_together(tmp_path, kind):
    image = containers.test_image()
    opts = options(kind, namespace=f"ns{TAG}" if kind == "tfjob" else None)
    hosts = k8s.pod_hosts(opts)
    addresses = [f"{h}:{opts.port}" for h in hosts]
    logs, scratch = tmp_path / "logs", tmp_path / "scratch"
    logs.mkdir()
    scratch.mkdir()
    volumes = {str(logs): k8s.LOGS_MOUNT, str(scratch): k8s.SCRATCH_MOUNT,
               str(secret_dir(tmp_path)): k8s.SECRET_MOUNT}
    with containers.network(f"{TAG}-{kind}", hosts) as net:
        procs = [containers.start(
            image, k8s.ENTRY, name=host, network=net, volumes=volumes,
            env=dict(manifest_env(opts), **RUN_DEFAULTS, **FLOW,
                     **given_by_kubernetes(kind, i, addresses)))
            for i, host in enumerate(hosts)]
        outs = [p.communicate(timeout=420)[0] for p in procs]
    log_dir = logs / os.path.relpath(opts.log_dir, k8s.LOGS_MOUNT)
    check_trained_together(kind, log_dir,
                           [(p.returncode, o) for p, o in zip(procs, outs)])
