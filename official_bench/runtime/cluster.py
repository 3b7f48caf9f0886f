"""Who are the workers and which one are we.

The only module that reads cluster environment variables (TF_CONFIG). An
existing TF_CONFIG wins over `runtime.worker_hosts` + `runtime.task_index`
and is logged, as in Model Garden. Also owns the start-up deadline for
multi-worker runs' port check; the start-up deadline itself lives in
runtime/watchdog.py.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from typing import Dict, List, Mapping, Optional

from absl import logging

from official_bench.config import ConfigError, RuntimeConfig
from official_bench.contracts.hostport import (
    HostListError,
    HostPortError,
    is_ipv6,
    parse_hostport,
    split_list,
)
from official_bench.contracts.tf_config import (
    TFConfigError,
    is_chief,
    parse_tf_config,
)


class ClusterError(RuntimeError):
    """The cluster description is inconsistent or a peer is unreachable."""


class PeerLost(ClusterError):
    """A task of the cluster went away while this one was training."""


# How long a failed collective waits for a peer's port to close: a peer
# stopped by a signal fails this worker's collective while it still ends.
LOST_PEER_WAIT_SECONDS = 10.0


def lost_peers_error(cluster: "Cluster", step, total: int,
                     wait: float = LOST_PEER_WAIT_SECONDS
                     ) -> Optional[PeerLost]:
    """After a failed collective: which peers no longer answer on their
    port, as one line naming them, the step and where to look; None when
    every peer still answers after `wait` seconds (the failure was
    something else). A peer stopped by SIGTERM leaves in the middle of a
    collective (TensorFlow then reports a shape mismatch) a moment before
    its process ends, so the ports are asked again every half second."""
    deadline = time.monotonic() + wait
    while True:
        lost = {name: addr for name, addr in cluster.peers().items()
                if not can_connect(addr, timeout=2.0)}
        if lost or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    if not lost:
        return None
    names = "; ".join(f"{n} at {a}" for n, a in lost.items())
    where = f"at step {step} of {total}" if step is not None else \
        "before the first step"
    return PeerLost(
        f"official_bench: lost {names} {where} ({cluster.describe()} saw "
        "its collective fail and the port no longer answers); see that "
        "task's log for why it ended (the run scripts print its path)")


@dataclasses.dataclass
class Cluster:
    """The trainer's cluster: every TensorFlow task's address and this
    process's role (launch/nodes.py NodeSet is the launcher's per-node
    view it was made from)."""
    workers: List[str]
    task_type: str = "worker"
    task_index: int = 0
    source: str = "local"  # local | TF_CONFIG | runtime.worker_hosts
    extra_jobs: Dict[str, List[str]] = dataclasses.field(default_factory=dict)

    @property
    def num_workers(self) -> int:
        return max(1, len(self.workers))

    @property
    def is_chief(self) -> bool:
        """TensorFlow's chief rule, shared with the launcher (tf_config)."""
        return is_chief(self.jobs(), self.task_type, self.task_index)

    @property
    def address(self) -> Optional[str]:
        jobs = self.jobs()
        if self.task_type in jobs:
            return jobs[self.task_type][self.task_index]
        return None

    def jobs(self) -> Dict[str, List[str]]:
        jobs = dict(self.extra_jobs)
        if self.workers:
            jobs["worker"] = list(self.workers)
        return jobs

    def tf_config(self) -> Dict:
        return {"cluster": self.jobs(),
                "task": {"type": self.task_type, "index": self.task_index}}

    def peers(self) -> Dict[str, str]:
        """Every other task, named ('worker 1') -> its address."""
        mine = self.address
        return {f"{job} {i}": a for job, addrs in self.jobs().items()
                for i, a in enumerate(addrs) if a != mine}

    def describe(self) -> str:
        return f"{self.task_type} {self.task_index}"


def accelerators(num_gpus: int) -> Dict[str, int]:
    """The `num_accelerators` mapping a resolver reports for num_gpus."""
    return {"GPU": num_gpus} if num_gpus > 0 else {}


def _parse_tf_config(text: str) -> Cluster:
    """TF_CONFIG -> Cluster via the shared reader (the launcher's too), so
    a malformed one is a ConfigError naming the field: exit 2, one line."""
    try:
        parsed = parse_tf_config(text)
    except TFConfigError as e:
        raise ConfigError(str(e))
    extra = {k: v for k, v in parsed.jobs.items() if k != "worker"}
    return Cluster(workers=list(parsed.jobs.get("worker", [])),
                   task_type=parsed.task_type, task_index=parsed.task_index,
                   source="TF_CONFIG", extra_jobs=extra)


def parse_hosts(text: str) -> List[str]:
    """'h1:p1,[v6]:p2' -> list; bad entries and duplicates are errors.

    The entries are kept as written (gRPC takes '[v6]:port' as is); the
    syntax is official_bench.contracts.hostport's, shared with the launcher.
    """
    try:
        hosts = split_list(text)
    except HostListError as e:
        raise ConfigError(f"host list {e}")
    seen = set()
    for h in hosts:
        try:
            parse_hostport(h)
        except HostPortError as e:
            raise ConfigError(f"worker host {e.text!r} is not host:port or "
                              f"[IPv6]:port: it {e.reason}")
        if h in seen:
            raise ConfigError(f"worker host {h!r} is listed twice in {text!r}")
        seen.add(h)
    return hosts


def _cluster_from_hosts(rt: RuntimeConfig) -> Cluster:
    """worker_hosts (+ ps_hosts, chief_host) and task_type/task_index."""
    workers = parse_hosts(rt.worker_hosts) if rt.worker_hosts else []
    extra = {}
    if rt.ps_hosts:
        extra["ps"] = parse_hosts(rt.ps_hosts)
    if rt.chief_host:
        extra["chief"] = parse_hosts(rt.chief_host)
        if len(extra["chief"]) != 1:
            raise ConfigError(f"runtime.chief_host names one host:port, got "
                              f"{rt.chief_host!r}")
    everyone = workers + [a for addrs in extra.values() for a in addrs]
    dupes = sorted({a for a in everyone if everyone.count(a) > 1})
    if dupes:
        raise ConfigError(f"{', '.join(dupes)} is listed for more than one "
                          "task in runtime.worker_hosts/ps_hosts/chief_host")
    jobs = dict(extra, worker=workers)
    members = jobs.get(rt.task_type, [])
    if rt.task_index < 0 and len(members) > 1:
        # Model Garden r2.3 refused it too; taken as 0, every process was
        # worker 0 and none said so (a port clash, or a stall to the timeout).
        raise ConfigError(
            f"runtime.task_index is unset (-1) but {len(members)} "
            f"{rt.task_type} hosts are listed ({', '.join(members)}): set it "
            f"to this process's index, 0..{len(members) - 1} (the run scripts "
            "set it for you)")
    index = max(rt.task_index, 0)
    if len(everyone) > 1 and not index < len(members):
        raise ConfigError(
            f"runtime.task_index {rt.task_index} is not a valid index into "
            f"the {len(members)} {rt.task_type} host(s) {members}")
    return Cluster(workers=workers, task_type=rt.task_type, task_index=index,
                   source="runtime.worker_hosts", extra_jobs=extra)


def resolve_cluster(rt: RuntimeConfig,
                    environ: Optional[Mapping[str, str]] = None,
                    quiet: bool = False) -> Cluster:
    """TF_CONFIG (if set) > worker_hosts + task_index > a single local worker.
    `quiet`: the entry points' check before TensorFlow loads (a bad
    TF_CONFIG or task index then ends in a fraction of a second); the run
    resolves it again, and says so, once TensorFlow is set up."""
    environ = os.environ if environ is None else environ
    text = environ.get("TF_CONFIG", "").strip()
    if text:
        cluster = _parse_tf_config(text)
        if quiet:
            return cluster
        logging.info("Using TF_CONFIG from the environment (it wins over "
                     "runtime.worker_hosts/task_index): %s", text)
        if rt.worker_hosts and parse_hosts(rt.worker_hosts) != cluster.workers:
            logging.warning("runtime.worker_hosts %s differs from TF_CONFIG's "
                            "workers %s; using TF_CONFIG", rt.worker_hosts,
                            cluster.workers)
        return cluster
    if rt.worker_hosts or rt.ps_hosts or rt.chief_host:
        return _cluster_from_hosts(rt)
    return Cluster(workers=[])


def can_connect(address: str, timeout: float = 1.0) -> bool:
    """Whether something listens at 'host:port' or '[v6]:port'."""
    try:
        host, port = parse_hostport(address)
    except HostPortError:
        return False
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def check_own_port(cluster: Cluster) -> None:
    """Fails fast when our port is taken, instead of a gRPC error later.

    An IPv6 address is checked on an AF_INET6 socket: gRPC listens there.
    """
    address = cluster.address
    if not address:
        return
    try:
        host, port = parse_hostport(address)
    except HostPortError as e:
        raise ClusterError(f"{cluster.describe()} has address {e}")
    family = socket.AF_INET6 if is_ipv6(host) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as e:
            raise ClusterError(
                f"cannot listen on port {port} for {cluster.task_type} "
                f"{cluster.task_index} ({address}): {e.strerror}; is another "
                f"run still using it?")
