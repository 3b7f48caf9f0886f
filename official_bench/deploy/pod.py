"""The pod's entry, `python3 -m official_bench.deploy.pod`: what Kubernetes
gives a pod -> the run script it starts, with which node index.

`plan(environ)` is pure (tests give it the environment a pod would have):
- NODES (written into the manifest by kubernetes.py) with
  JOB_COMPLETION_INDEX (set by Kubernetes in an Indexed Job's pods, the
  JobSet's too) -> TASK_INDEX for the launcher;
- TF_CONFIG (injected by the TFJob operator) -> passed on untouched: the
  launcher and the trainer read it ("TF_CONFIG wins"); a one-task TF_CONFIG
  is dropped, one node being the single-node sweep;
- 1 node -> run_single_node.sh, 2 -> run_two_node.sh, more ->
  run_multi_node.sh (docs/nodes.md).
`main()` then waits until every node's host name resolves (a headless
Service publishes a pod's record only once the pod exists; OB_DNS_TIMEOUT,
default 600 s), runs the script and, with OB_HOLD_SECONDS > 0, keeps the
pod that long after the sweep (SIGTERM ends it) so that `kubectl cp` can
copy logs from an emptyDir; it exits with the script's status.
SIGTERM and SIGINT are handled from main()'s first line (EntrySignals: the
pod's command is PID 1, which ignores them otherwise): before the sweep
they end the entry with 128 + N, during it they are passed on, during the
hold they end it.
`read_environment` is this folder's only reader of the environment.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Mapping, Optional

from official_bench.contracts.exit_status import CLUSTER, CONFIG, by_signal
from official_bench.contracts.hostport import (
    HostListError,
    HostPortError,
    parse_hostport,
    split_list,
)
from official_bench.contracts.tf_config import TFConfigError, parse_tf_config

PROG = "official_bench.deploy.pod"
SCRIPTS = {1: "run_single_node.sh", 2: "run_two_node.sh"}
MULTI = "run_multi_node.sh"
DNS_TIMEOUT = 600.0
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class PodError(ValueError):
    """The pod's environment cannot start a sweep; `status` is the exit
    status (contracts/exit_status: CONFIG or CLUSTER)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True)
class PodPlan:
    """What this pod runs: the script, its environment, the hosts that
    must resolve first and one line saying where the index came from."""
    script: str
    env: Dict[str, str]
    nodes: int
    index: int
    hosts: List[str]
    how: str
    hold: int
    dns_timeout: float


def read_environment() -> Dict[str, str]:
    return dict(os.environ)


def _number(environ: Mapping[str, str], key: str, default, kind=int):
    text = environ.get(key, "").strip()
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        value = -1
    if value < 0:
        raise PodError(f"{key}={text!r} is not a number >= 0", CONFIG)
    return value


def _from_tf_config(text: str, env: Dict[str, str]) -> tuple:
    try:
        parsed = parse_tf_config(text)
    except TFConfigError as e:
        raise PodError(str(e), CLUSTER)
    addresses, index = parsed.node_order()
    if index is None:
        raise PodError(f"TF_CONFIG task {parsed.task_type} "
                       f"{parsed.task_index}: the run scripts run chief and "
                       "worker tasks only (a TFJob with Worker replicas)",
                       CLUSTER)
    if len(addresses) == 1:
        env.pop("TF_CONFIG")
    how = (f"TF_CONFIG task {parsed.task_type} {parsed.task_index}"
           + (" (one task: dropped, a single-node sweep)"
              if len(addresses) == 1 else ""))
    return addresses, index, how


def _task_index(environ: Mapping[str, str], nodes: int) -> tuple:
    given = _number(environ, "JOB_COMPLETION_INDEX", None)
    explicit = _number(environ, "TASK_INDEX", None)
    if given is None and explicit is None:
        raise PodError(f"NODES lists {nodes} nodes but JOB_COMPLETION_INDEX "
                       "(set by Kubernetes in an Indexed Job's pods) and "
                       "TASK_INDEX are unset: use completionMode: Indexed",
                       CLUSTER)
    if given is not None and explicit is not None and given != explicit:
        raise PodError(f"JOB_COMPLETION_INDEX={given} and TASK_INDEX="
                       f"{explicit} disagree; unset TASK_INDEX", CLUSTER)
    index = given if given is not None else explicit
    if index >= nodes:
        raise PodError(f"index {index} is outside NODES, which lists {nodes} "
                       f"nodes (0..{nodes - 1}): completions must equal the "
                       "number of nodes", CLUSTER)
    how = (f"JOB_COMPLETION_INDEX={index}" if given is not None
           else f"TASK_INDEX={index}")
    return index, how


def plan(environ: Mapping[str, str]) -> PodPlan:
    """The pod's environment -> its PodPlan, or PodError."""
    env = dict(environ)
    tf_config = env.get("TF_CONFIG", "").strip()
    if tf_config:
        addresses, index, how = _from_tf_config(tf_config, env)
    elif env.get("NODES", "").strip():
        try:
            addresses = split_list(env["NODES"])
        except HostListError as e:
            raise PodError(f"NODES: {e}", CLUSTER)
        index, how = (0, "one node") if len(addresses) == 1 else \
            _task_index(env, len(addresses))
        if len(addresses) > 1:
            env["TASK_INDEX"] = str(index)
    else:
        addresses, index, how = [], 0, "no NODES or TF_CONFIG: one node"
    hosts = []
    for address in addresses:
        try:
            hosts.append(parse_hostport(address, 0)[0])
        except HostPortError as e:
            raise PodError(f"node list entry {e}", CLUSTER)
    nodes = max(1, len(addresses))
    return PodPlan(script=SCRIPTS.get(nodes, MULTI), env=env, nodes=nodes,
                   index=index, hosts=hosts, how=how,
                   hold=_number(environ, "OB_HOLD_SECONDS", 0),
                   dns_timeout=_number(environ, "OB_DNS_TIMEOUT",
                                       DNS_TIMEOUT, float))


def _lookup(host: str) -> bool:
    try:
        return bool(socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP))
    except OSError:
        return False


def resolves(host: str) -> bool:
    """Whether `host` resolves now. The lookup runs in a daemon thread that
    this one waits for, so that a signal's handler (main thread only) runs
    at once, not after a getaddrinfo that waits out its resolver's
    timeouts; a process stopped meanwhile leaves that thread behind."""
    found: List[bool] = []
    lookup = threading.Thread(target=lambda: found.append(_lookup(host)),
                              name=f"resolve {host}", daemon=True)
    lookup.start()
    lookup.join()
    return bool(found and found[0])


def wait_for_hosts(hosts: List[str], timeout: float,
                   resolver: Callable[[str], bool] = resolves,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> List[str]:
    """Polls until every host resolves; the ones that never did."""
    deadline = clock() + timeout
    missing = [h for h in dict.fromkeys(hosts) if not resolver(h)]
    if missing:
        print(f"{PROG}: waiting up to {timeout:g} s for DNS names: "
              f"{', '.join(missing)}", flush=True)
    while missing and clock() < deadline:
        sleep(min(2.0, max(0.0, deadline - clock())))
        missing = [h for h in missing if not resolver(h)]
    return missing


def find_script(name: str) -> Optional[str]:
    """The run script in this checkout's root, else the working directory."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    for folder in (root, os.getcwd()):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def copy_hint(env: Mapping[str, str], hold: int) -> str:
    """The line printed before the hold: how to copy this pod's logs."""
    pod = env.get("OB_POD_NAME") or "POD"
    ns = env.get("OB_POD_NAMESPACE")
    log_dir = env.get("LOG_DIR") or "logs"
    target = os.path.basename(log_dir.rstrip("/")) or "logs"
    return (f"{PROG}: the sweep has ended; this pod waits {hold} s (or until "
            f"deleted) so that its logs can be copied: kubectl cp "
            f"{ns + '/' if ns else ''}{pod}:{log_dir} ./{target}")


class Stopped(BaseException):
    """SIGTERM or SIGINT outside the sweep (a BaseException, as
    KeyboardInterrupt is, so that no `except Exception` swallows it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stopped_line(signum: int) -> str:
    return (f"{PROG}: stopped by {signal.Signals(signum).name}; no sweep "
            "started")


class EntrySignals:
    """SIGTERM and SIGINT for the pod's command, the container's PID 1: the
    kernel spares PID 1 every signal it has no handler for, so main()
    installs these first. While the sweep runs they are passed on to it;
    before it starts (the DNS wait) and after it ends (the hold) the first
    one raises Stopped in the main thread."""

    def __init__(self):
        self.signum: Optional[int] = None
        self._sweep: Optional[subprocess.Popen] = None
        self._forwarding = False
        self._forwarded = False

    def install(self) -> "EntrySignals":
        for sig in SIGNALS:
            signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, _frame) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        if self._forwarding:
            sweep = self._sweep
            if sweep is not None and sweep.poll() is None:
                sweep.send_signal(signum)
                self._forwarded = True
        elif first:
            raise Stopped(signum)

    def pass_on(self) -> None:
        """From here a signal is kept for the sweep instead of raised."""
        self._forwarding = True

    def run(self, argv: List[str], env: Dict[str, str]) -> int:
        """The sweep as a child, signals passed on to it; its status."""
        self.pass_on()
        if self.signum is not None:  # stopped before it started
            print(stopped_line(self.signum), file=sys.stderr)
            return by_signal(self.signum)
        self._sweep = subprocess.Popen(argv, env=env)
        if self.signum is not None and not self._forwarded:
            self._sweep.send_signal(self.signum)  # came before the child
        status = self._sweep.wait()
        return status if status >= 0 else by_signal(-status)

    def hold(self, seconds: float) -> None:
        """Waits `seconds` unless a signal came; one during it ends it."""
        try:
            self._forwarding = False  # the sweep has ended: raise again
            if self.signum is None:
                time.sleep(seconds)
        except Stopped:
            pass


def run_and_hold(argv: List[str], env: Dict[str, str], hold: int,
                 signals: Optional[EntrySignals] = None) -> int:
    """The script as a child (signals forwarded), then the hold."""
    signals = signals or EntrySignals().install()
    status = signals.run(argv, env)
    if signals.signum is None and hold > 0:
        print(copy_hint(env, hold), flush=True)
        signals.hold(hold)
    return status


def start_up() -> tuple:
    """The plan and its script, once every host resolves; PodError."""
    p = plan(read_environment())
    print(f"{PROG}: node {p.index} of {p.nodes} ({p.how}); running "
          f"{p.script}", flush=True)
    missing = wait_for_hosts(p.hosts, p.dns_timeout)
    if missing:
        raise PodError(f"{', '.join(missing)} did not resolve within "
                       f"{p.dns_timeout:g} s (OB_DNS_TIMEOUT): is the "
                       "headless Service there, and did every pod start?",
                       CLUSTER)
    script = find_script(p.script)
    if script is None:
        raise PodError(f"{p.script} not found in the project's root or "
                       f"{os.getcwd()}: run the image's project directory",
                       CONFIG)
    return p, script


def main() -> int:
    signals = EntrySignals().install()  # first: nothing may block before
    try:
        p, script = start_up()
        signals.pass_on()
    except PodError as e:
        signals.pass_on()  # exiting now: a signal is kept, not raised
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return e.status
    except Stopped as stop:
        print(stopped_line(stop.signum), file=sys.stderr)
        return by_signal(stop.signum)
    # Never exec: this process is the container's PID 1, which the kernel
    # spares signals it has no handler for; `signals` passes them on.
    return run_and_hold(["bash", script], p.env, p.hold, signals)


if __name__ == "__main__":
    sys.exit(main())
