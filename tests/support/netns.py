"""Two network namespaces joined by a veth pair, and the launcher environment
for each: the two-host tests (launcher, scaling model) share them."""

import os
import shutil
import subprocess

import pytest

from official_bench.launch import settings as settings_lib
from support.run_scripts import PY, TINY

ADDRS = ("10.200.0.1", "10.200.0.2")
PORT = 22221


def ip(*args, check=True):
    out = subprocess.run(["ip", *args], capture_output=True, text=True,
                         timeout=30)
    if check and out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")
    return out


@pytest.fixture
def two_hosts():
    """Yields the two namespace names; tears everything down afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    if shutil.which("ip") is None:
        pytest.skip("`ip` not found: install iproute2 (apt-get install -y "
                    "iproute2)")
    tag = f"ob{os.getpid() % 100000}"
    names = (f"{tag}a", f"{tag}b")
    created = []
    try:
        for ns in names:
            out = ip("netns", "add", ns, check=False)
            if out.returncode != 0:
                pytest.skip(f"`ip netns add` is not possible here: "
                            f"{out.stderr.strip()}")
            created.append(ns)
        ip("link", "add", f"{tag}va", "type", "veth", "peer", "name",
           f"{tag}vb")
        for ns, dev, addr in zip(names, (f"{tag}va", f"{tag}vb"), ADDRS):
            ip("link", "set", dev, "netns", ns)
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        yield names
    finally:
        for ns in created:
            ip("netns", "del", ns, check=False)
        # Deleting a namespace deletes its end of the veth pair, and with it
        # the pair; remove the root end too in case setup stopped halfway.
        ip("link", "del", f"{tag}va", check=False)


def env_for(tmp_path, name, **knobs):
    drop = {k.env for k in settings_lib.KNOBS} | {"TF_CONFIG"}
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith("SLURM")}
    env.update(PYTHON=PY, DEVICE="cpu", STEPS="6", LOG_STEPS="2",
               PARAMS_OVERRIDE=TINY, SLEEP_SECONDS="0",
               PYTHON_CHECK_TIMEOUT="0",  # as support/launch_cli.clean_env
               NODES=",".join(f"{a}:{PORT}" for a in ADDRS),
               BARRIER_TIMEOUT="60", PEER_TIMEOUT="120", RUN_TIMEOUT="240",
               KILL_AFTER="10",
               LOG_DIR=str(tmp_path / name / "logs"),
               MODEL_DIR=str(tmp_path / name / "model_dir"))
    env.update({k.upper(): str(v) for k, v in knobs.items()})
    return env
