"""LAUNCHER=horovod: the one horovodrun on node 0 that starts every rank.

Where its venv is (HOROVOD_VENV, else what scripts/install_horovod.sh
--print-venv says), its host list (one host per node, ports unused) and its
options (controller, network interfaces, HOROVODRUN_ARGS).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
from typing import List, Optional, Tuple

from official_bench.contracts import exit_status as es
from official_bench.launch import preflight
from official_bench.launch.errors import PlanError, dry_run_note
from official_bench.launch.node_list import NodeError
from official_bench.launch.nodes import NodeSet
from official_bench.launch.settings import Settings

INSTALL_HOROVOD = os.path.join(preflight.REPO_ROOT, "scripts",
                               "install_horovod.sh")


@dataclasses.dataclass
class Horovod:
    """LAUNCHER=horovod: one horovodrun on node 0 starts every rank."""
    venv: str
    venv_from: str  # how HOROVOD_VENV was chosen, for messages
    horovodrun: str
    python: str  # the ranks' interpreter (HOROVOD_VENV/bin/python)
    hosts: List[str]  # horovodrun -H order: node 0 (rank 0) first
    options: List[str]  # --gloo, --network-interface ..., HOROVODRUN_ARGS
    idle: bool = False  # this is node k>0: node 0's horovodrun starts ours

    def command(self, per_node: int) -> List[str]:
        """horovodrun -np N*G -H h1:G,...,hN:G [options]."""
        return [self.horovodrun, "-np", str(per_node * len(self.hosts)),
                "-H", ",".join(f"{h}:{per_node}" for h in self.hosts)] + \
            list(self.options)


def make_horovod(settings: Settings, nodeset: Optional[NodeSet],
                 notes: List[str]) -> Optional[Horovod]:
    """LAUNCHER=horovod: the venv, horovodrun and its host list; None for
    LAUNCHER=tf."""
    if settings.launcher != "horovod":
        return None
    try:
        venv, venv_from, horovodrun, hvd_python = find_horovod(settings)
    except MissingVenv as e:
        if not settings.dry_run:
            raise
        # The commands are worth seeing before a 6-minute build.
        venv, venv_from, horovodrun, hvd_python = e.found
        notes.append(dry_run_note(str(e), es.CONFIG))
    horovod = Horovod(venv, venv_from, horovodrun, hvd_python,
                      horovod_hosts(nodeset), horovodrun_options(settings),
                      idle=nodeset is not None and nodeset.index > 0)
    if settings.source("python") == "command line":
        notes.append(f"--python {settings.python} is not used: the ranks "
                     f"run {hvd_python} (HOROVOD_VENV)")
    return horovod


def default_horovod_venv(settings: Settings) -> str:
    """What `scripts/install_horovod.sh --print-venv` says (it honours
    OB_HOROVOD_VENV and HOME); builds nothing."""
    try:
        out = subprocess.run(["bash", INSTALL_HOROVOD, "--print-venv"],
                             capture_output=True, text=True, timeout=30,
                             env=settings.environ, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        raise PlanError(f"LAUNCHER=horovod: cannot ask {INSTALL_HOROVOD} "
                        f"--print-venv for the Horovod venv ({e}); set "
                        "HOROVOD_VENV")
    venv = out.stdout.strip()
    if out.returncode != 0 or not venv:
        raise PlanError(f"LAUNCHER=horovod: {INSTALL_HOROVOD} --print-venv "
                        f"failed (exit {out.returncode}: "
                        f"{out.stderr.strip()[-300:]}); set HOROVOD_VENV")
    return venv


class MissingVenv(PlanError):
    """The Horovod venv lacks horovodrun or python; owns what find_horovod
    found (venv, how, horovodrun, python), which a dry run still shows."""

    def __init__(self, message: str, found: Tuple[str, str, str, str]):
        super().__init__(message)
        self.found = found


def find_horovod(settings: Settings) -> Tuple[str, str, str, str]:
    """(venv, how it was chosen, horovodrun, python); MissingVenv with the
    way to build it when horovodrun or python is missing."""
    if settings.horovod_venv:
        venv = settings.horovod_venv
        how = f"HOROVOD_VENV ({settings.source('horovod_venv')})"
    else:
        venv = default_horovod_venv(settings)
        how = "default: scripts/install_horovod.sh --print-venv"
    venv = os.path.abspath(os.path.expanduser(venv))
    horovodrun = os.path.join(venv, "bin", "horovodrun")
    python = os.path.join(venv, "bin", "python")
    missing = [p for p in (horovodrun, python)
               if not (os.path.isfile(p) and os.access(p, os.X_OK))]
    if missing:
        raise MissingVenv(
            f"LAUNCHER=horovod needs horovodrun and python in the Horovod "
            f"venv {venv} ({how}), but {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not there: run `make "
            "horovod` (scripts/install_horovod.sh builds Horovod 0.28.1 "
            "with TensorFlow 2.18 into that venv), or set HOROVOD_VENV to an "
            "environment whose bin/ holds horovodrun and python",
            (venv, how, horovodrun, python))
    return venv, how, horovodrun, python


def horovodrun_options(settings: Settings) -> List[str]:
    options: List[str] = []
    if settings.horovodrun_controller in ("gloo", "mpi"):
        options.append(f"--{settings.horovodrun_controller}")
    for iface in (settings.horovodrun_network_interface or "").split(","):
        if iface.strip():
            options += ["--network-interface", iface.strip()]
    if settings.horovodrun_args:
        try:
            options += shlex.split(settings.horovodrun_args)
        except ValueError as e:
            raise PlanError(f"HOROVODRUN_ARGS={settings.horovodrun_args!r}: "
                            f"{e}")
    return options


def horovod_hosts(nodeset: Optional[NodeSet]) -> List[str]:
    """horovodrun's host list: localhost alone, or one host per node (the
    ports of the node list are not used)."""
    if nodeset is None:
        return ["localhost"]
    hosts: List[str] = []
    for k, node in enumerate(nodeset.nodes):
        if ":" in node.host:
            raise NodeError(
                f"LAUNCHER=horovod: horovodrun -H cannot take the IPv6 "
                f"address {node.host} ({nodeset.nodes_from}); use host names")
        if any(nodeset.same_machine(j, k) for j in range(k)):
            raise NodeError(
                f"LAUNCHER=horovod: host {node.host} appears twice (by "
                f"name or address) in "
                f"{nodeset.nodes_from} ({nodeset.worker_hosts}); horovodrun "
                "runs one entry per host (ports are not used), so each node "
                "must be a different host")
        hosts.append(node.host)
    return hosts
