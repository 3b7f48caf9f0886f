"""Which nodes take part, and which one is this machine.

Node list, first found wins:
  TF_CONFIG (left untouched and passed on to the trainer, which uses it) >
  NODES > HOSTFILE > Slurm (SLURM_STEP_NODELIST / SLURM_JOB_NODELIST) >
  runtime.worker_hosts of PARAMS_OVERRIDE or of the config file.
Task index, first found wins:
  TF_CONFIG's task > TASK_INDEX > runtime.task_index given in PARAMS_OVERRIDE >
  Slurm (the task's node, SLURMD_NODENAME or SLURM_NODEID, and its
  SLURM_LOCALID there; one entry per task, see slurm_nodes) >
  the one node whose host is this machine's hostname or resolves to one of
  the addresses on its interfaces > an error listing everything tried.
The config file's own task_index is never used: it is the same file on every
node.

This module combines the pieces into a NodeSet and places node 0's
barrier; the pieces are node_list.py (parsing), slurm.py (SLURM_*) and
identity.py (this machine's names and addresses, DNS).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Callable, List, Optional

from official_bench.contracts import exit_status as es
from official_bench.contracts.tf_config import tf_config_json
from official_bench.launch.errors import dry_run_note
from official_bench.launch.identity import (
    Identity,
    NotInList,
    local_identity,
    match_index,
    memoized,
    reject_aliases,
    resolve_host,
    same_machines,
    unresolvable,
)
from official_bench.launch.node_list import (
    Node,
    NodeError,
    parse_node_list,
    read_hostfile,
    split_nodes,
    tf_config_nodes,
)
from official_bench.launch.settings import Settings
from official_bench.launch.slurm import slurm_nodes


@dataclasses.dataclass
class NodeSet:
    """The machines the launcher coordinates: one entry per node (host and
    launcher port), this node's index and where both came from.

    Not runtime.cluster.Cluster, which is the trainer's view of the same job:
    one address per TensorFlow task (WORKERS_PER_NODE of them per node) and
    this process's role. The launcher builds the trainer's worker_hosts or
    TF_CONFIG from a NodeSet; the trainer resolves its Cluster from those.
    """
    nodes: List[Node]
    index: int
    nodes_from: str  # where the list came from, for messages
    index_from: str  # how the index was found
    tf_config: Optional[str] = None  # the environment's, passed on unchanged
    notes: List[str] = dataclasses.field(default_factory=list)
    # Node k runs on machine machines[k]: nodes whose hosts resolve to a
    # common address share a number (same_machines); None: by name only.
    machines: Optional[List[int]] = None
    # Hosts this machine cannot resolve (see unresolvable): a run refuses
    # to start; a dry run notes them.
    unresolved: List[str] = dataclasses.field(default_factory=list)

    def same_machine(self, a: int, b: int) -> bool:
        if self.machines is None:
            return self.nodes[a].host.lower() == self.nodes[b].host.lower()
        return self.machines[a] == self.machines[b]

    @property
    def me(self) -> Node:
        return self.nodes[self.index]

    @property
    def worker_hosts(self) -> str:
        return ",".join(n.address for n in self.nodes)

    def tf_config_json(self) -> str:
        """What the trainer will see: TF_CONFIG, or its equivalent."""
        if self.tf_config:
            return self.tf_config
        return tf_config_json({"worker": [n.address for n in self.nodes]},
                              "worker", self.index)


def resolve(settings: Settings, config_hosts: Optional[str],
            config_hosts_from: str, override_index: Optional[int],
            identity_fn: Callable[[], Identity] = local_identity,
            resolver: Callable[[str], List[str]] = resolve_host) -> NodeSet:
    """The node list and this machine's index for a two/multi-node run."""
    resolver = memoized(resolver)
    if settings.tf_config:
        nodes, index = tf_config_nodes(settings.tf_config)
        ns = NodeSet(nodes, index, "TF_CONFIG", "TF_CONFIG task",
                     tf_config=settings.tf_config)
        ns.notes.append(f"TF_CONFIG is set and wins (passed to the trainer "
                        f"unchanged): {settings.tf_config}")
        if settings.task_index is not None and settings.task_index != index:
            ns.notes.append(f"TASK_INDEX={settings.task_index} ignored: "
                            f"TF_CONFIG says index {index}")
        ns.unresolved = unresolvable(nodes, "TF_CONFIG", resolver)
        ns.machines = same_machines(nodes, resolver)
        reject_aliases(nodes, ns.machines, "TF_CONFIG", resolver)
        return _check_count(ns, settings)

    port = settings.worker_port
    slurm_index = None
    slurm_how = ""
    in_slurm = bool(settings.slurm.get("SLURM_JOB_ID"))
    if settings.use_slurm == "yes" and not in_slurm:
        raise NodeError("USE_SLURM=yes but SLURM_JOB_ID is not set: not in a "
                        "Slurm job")
    if settings.nodes:
        where = f"NODES ({settings.source('nodes')})"
        nodes = parse_node_list(split_nodes(settings.nodes, where), port,
                                where)
    elif settings.hostfile:
        where = f"HOSTFILE {settings.hostfile}"
        nodes = parse_node_list(read_hostfile(settings.hostfile), port, where)
    elif in_slurm and settings.use_slurm != "no":
        nodes, slurm_index, where, slurm_how = slurm_nodes(
            settings.slurm, port, settings.workers_per_node)
    elif config_hosts:
        where = config_hosts_from
        nodes = parse_node_list(split_nodes(config_hosts, where), port,
                                where)
    else:
        raise NodeError(
            f"{settings.script} needs a node list: set NODES=host:port,"
            "host:port (or HOSTFILE, or run it with srun inside a Slurm "
            "job, or set runtime.worker_hosts in the config)")

    notes = _unused_lists(settings, where, in_slurm)
    # Names resolved before any comparison, whatever gives the index.
    machines = same_machines(nodes, resolver)
    reject_aliases(nodes, machines, where, resolver)
    if settings.task_index is not None:
        index, how = settings.task_index, \
            f"TASK_INDEX ({settings.source('task_index')})"
    elif override_index is not None:
        index, how = override_index, "runtime.task_index in PARAMS_OVERRIDE"
    elif slurm_index is not None:
        index, how = slurm_index, slurm_how
    else:
        index, how = _match(settings, nodes, identity_fn(), resolver, where,
                            notes)
    if not 0 <= index < len(nodes):
        raise NodeError(f"task index {index} ({how}) is outside {where}, "
                        f"which has {len(nodes)} nodes (0..{len(nodes) - 1})")
    ns = NodeSet(nodes, index, where, how, notes=notes, machines=machines,
                 unresolved=unresolvable(nodes, where, resolver))
    if slurm_index is not None and not settings.slurm.get("SLURM_STEP_ID"):
        ns.notes.append("in a Slurm job but not in a job step: start the "
                        "script on every node with srun --ntasks-per-node=1, "
                        "or the other nodes never arrive")
    return _check_count(ns, settings)


def _unused_lists(settings: Settings, where: str,
                  in_slurm: bool) -> List[str]:
    """A note naming the node lists that the one used (`where`) wins over:
    HOSTFILE, and the Slurm job's (whose key the barrier still uses)."""
    unused = []
    if settings.nodes and settings.hostfile:
        unused.append(f"HOSTFILE {settings.hostfile}")
    if in_slurm and settings.use_slurm != "no" and \
            (settings.nodes or settings.hostfile):
        unused.append(f"Slurm job {settings.slurm.get('SLURM_JOB_ID')}'s "
                      "node list (its key still signs the barrier unless "
                      "BARRIER_SECRET is set: start every node inside the "
                      "job)")
    if not unused:
        return []
    return [f"node list from {where}; not used: {'; '.join(unused)}"]


def _match(settings: Settings, nodes: List[Node], identity: Identity,
           resolver: Callable[[str], List[str]], where: str,
           notes: List[str]) -> tuple:
    """(index, how) of the node that is this machine. A dry run on a
    machine that is none of them (a login node, a laptop) shows node 0's
    plan, with a note; a real run stops (NotInList)."""
    try:
        index, why = match_index(nodes, identity, resolver, where)
    except NotInList:
        if not settings.dry_run:
            raise
        notes.append(dry_run_note(
            f"this machine ({identity.hostname}) is not in {where} and no "
            "TASK_INDEX says which node it is, so this dry run shows node "
            f"0's plan ({nodes[0].address}; TASK_INDEX=k, 0..{len(nodes) - 1}"
            ", shows node k's)", es.CLUSTER))
        return 0, "node 0, shown by this dry run: this machine is not in " \
            "the list"
    return index, f"matched this machine: {why}"


def barrier_address(nodeset: NodeSet, barrier_port: Optional[int],
                    ports_per_node: int = 1) -> tuple:
    """(host, port) of node 0's barrier; ValueError when it cannot be.

    Default port: one above every trainer port on node 0's host, so
    consecutive ports on one machine (127.0.0.1:5001,5002) do not clash.
    Node k's trainers use ports_per_node consecutive ports from its port.
    """
    head = nodeset.nodes[0]
    mine = [n for i, n in enumerate(nodeset.nodes)
            if nodeset.same_machine(0, i)]
    port = barrier_port or ports_per_node + max(n.port for n in mine)
    if port > 65535:
        raise ValueError(f"the default BARRIER_PORT {port} is not a port; "
                         "set BARRIER_PORT")
    clash = [n for n in mine if n.port <= port < n.port + ports_per_node]
    if clash:
        raise ValueError(f"BARRIER_PORT {port} on {head.host} is also a "
                         f"trainer port of {clash[0].address}; set "
                         "BARRIER_PORT to a free port")
    return head.host, port


def barrier_bind(nodeset: NodeSet, override: Optional[str] = None,
                 resolver: Callable[[str], List[str]] = resolve_host
                 ) -> List[str]:
    """The addresses node 0's barrier listens on: BARRIER_BIND, else what
    node 0's host resolves to here (not every interface: only the nodes
    need to reach it). NodeError when node 0's host does not resolve, or
    resolves here to loopback only while other nodes are on other machines
    (Debian's '127.0.1.1 hostname' line in /etc/hosts does that): they could
    not reach the barrier."""
    if override:
        return [override]
    head = nodeset.nodes[0]
    addrs = resolver(head.host)
    if not addrs:
        raise NodeError(f"node 0's host {head.host!r} ({nodeset.nodes_from}) "
                        "does not resolve on this machine, so the barrier "
                        "cannot listen there; use its IP address in the node "
                        "list or set BARRIER_BIND")
    if all(_is_loopback(a) for a in addrs):
        remote = [n for n in nodeset.nodes[1:]
                  if any(not _is_loopback(a) for a in resolver(n.host))]
        if remote:
            raise NodeError(
                f"node 0's host {head.host!r} resolves here to "
                f"{', '.join(addrs)} (loopback), but {remote[0].address} "
                "has a network address: a node on another machine could "
                "not reach a barrier on loopback. Use node 0's network "
                "address in the node list, fix /etc/hosts, or set "
                "BARRIER_BIND (e.g. node 0's address, or 0.0.0.0 for every "
                "interface)")
    return addrs


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def _check_count(ns: NodeSet, settings: Settings) -> NodeSet:
    n = len(ns.nodes)
    want = 2 if settings.mode == "two" else settings.num_nodes
    if settings.mode == "two" and settings.num_nodes not in (None, 2):
        raise NodeError(f"{settings.script} runs 2 nodes, but NUM_NODES="
                        f"{settings.num_nodes}; use run_multi_node.sh")
    if want is not None and n != want:
        raise NodeError(f"{settings.script} needs {want} nodes, but "
                        f"{ns.nodes_from} lists {n}: "
                        f"{', '.join(x.address for x in ns.nodes)}")
    if n < 2:
        raise NodeError(f"{settings.script} needs at least 2 nodes, but "
                        f"{ns.nodes_from} lists {n}; use run_single_node.sh "
                        "for one node")
    return ns
