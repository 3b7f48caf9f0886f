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
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import socket
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set

from official_bench.contracts.hostport import (HostPortError,
                                               format_hostport, parse_hostport)
from official_bench.contracts.tf_config import (TFConfig, TFConfigError,
                                                parse_tf_config,
                                                tf_config_json)
from official_bench.launch.settings import Settings


class NodeError(ValueError):
    """A bad node list, or this machine's place in it cannot be found."""


@dataclasses.dataclass(frozen=True)
class Node:
    host: str
    port: int

    @property
    def address(self) -> str:
        return format_hostport(self.host, self.port)


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


# --------------------------------------------------------------------------
# Parsing node lists
# --------------------------------------------------------------------------

def parse_node(text: str, default_port: Optional[int], where: str) -> Node:
    """'host:port', '[v6addr]:port' or 'host' (gets default_port); the
    syntax is official_bench.contracts.hostport's, shared with the trainer."""
    try:
        host, port = parse_hostport(text, default_port)
    except HostPortError as e:
        raise NodeError(f"{where}: node {e}")
    return Node(host, port)


def parse_node_list(items: Iterable[str], default_port: Optional[int],
                    where: str) -> List[Node]:
    """Parses and checks a node list; duplicates are an error."""
    nodes: List[Node] = []
    seen: Dict[tuple, int] = {}
    for item in items:
        node = parse_node(item, default_port, where)
        key = (node.host.lower(), node.port)
        if key in seen:
            raise NodeError(f"{where}: node {node.address} is listed twice "
                            f"(positions {seen[key]} and {len(nodes)}); each "
                            "node must appear once")
        seen[key] = len(nodes)
        nodes.append(node)
    if not nodes:
        raise NodeError(f"{where}: the node list is empty")
    return nodes


def split_list(text: str) -> List[str]:
    """'a:1,b:2' or 'a:1 b:2' (also newlines) -> items."""
    return [s for s in re.split(r"[,\s]+", text.strip()) if s]


def read_hostfile(path: str) -> List[str]:
    """One host[:port] per line; '#' starts a comment; later words ignored."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise NodeError(f"HOSTFILE {path!r} cannot be read: {e.strerror}")
    items = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            items.append(line.split()[0])
    return items


def expand_hostlist(expr: str) -> List[str]:
    """Slurm hostlist syntax: 'gpu[01-03,07],login1' -> gpu01 gpu02 ..."""
    items, depth, current = [], 0, ""
    for ch in expr.strip():
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth < 0 or depth > 1:
            raise NodeError(f"Slurm node list {expr!r} has unbalanced "
                            "brackets")
        current += ch
    if depth:
        raise NodeError(f"Slurm node list {expr!r} has unbalanced brackets")
    items.append(current)
    hosts: List[str] = []
    for item in (i.strip() for i in items):
        if item:
            hosts.extend(_expand_one(item, expr))
    return hosts


def _expand_one(item: str, expr: str) -> List[str]:
    m = re.search(r"\[([^\]]*)\]", item)
    if not m:
        return [item]
    prefix, suffix = item[:m.start()], item[m.end():]
    out = []
    for part in m.group(1).split(","):
        lo, sep, hi = part.strip().partition("-")
        if not re.fullmatch("[0-9]+", lo) or \
                (sep and not re.fullmatch("[0-9]+", hi)):
            raise NodeError(f"Slurm node list {expr!r}: bad range {part!r}")
        width = len(lo)
        rests = _expand_one(suffix, expr)
        numbers = range(int(lo), int(hi if sep else lo) + 1)
        if len(out) + len(numbers) * len(rests) > 65536:  # task_index's max
            raise NodeError(f"Slurm node list {expr!r} names more than "
                            "65536 nodes")
        for n in numbers:
            for rest in rests:
                out.append(f"{prefix}{n:0{width}d}{rest}")
    return out


# --------------------------------------------------------------------------
# This machine
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Identity:
    """What this machine is called and which addresses it has."""
    hostname: str
    addresses: Set[str]
    address_source: str

    def is_local_address(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.split("%")[0])
        except ValueError:
            return False
        if ip.is_loopback:
            return True
        return str(ip) in self.addresses

    def names_match(self, host: str) -> bool:
        mine = self.hostname.lower().rstrip(".")
        theirs = host.lower().rstrip(".")
        if not mine:
            return False
        return (theirs == mine or theirs == mine.split(".")[0] and "." not in
                theirs or mine == theirs.split(".")[0] and "." not in mine)


def _fib_trie_addresses(path: str = "/proc/net/fib_trie") -> Set[str]:
    """IPv4 addresses of this network namespace ('/32 host LOCAL')."""
    found: Set[str] = set()
    last = None
    with open(path, encoding="ascii", errors="replace") as f:
        for line in f:
            text = line.strip()
            if text.startswith("|--"):
                last = text[3:].strip()
            elif "host LOCAL" in text and last:
                found.add(last)
    return found


def _inet6_addresses(path: str = "/proc/net/if_inet6") -> Set[str]:
    found: Set[str] = set()
    with open(path, encoding="ascii", errors="replace") as f:
        for line in f:
            parts = line.split()
            if parts and len(parts[0]) == 32:
                found.add(str(ipaddress.IPv6Address(int(parts[0], 16))))
    return found


def _ioctl_addresses() -> Set[str]:
    import fcntl
    import struct
    found: Set[str] = set()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), 0x8915,  # SIOCGIFADDR
                                     struct.pack("256s", name[:15].encode()))
                found.add(socket.inet_ntoa(packed[20:24]))
            except OSError:
                continue
    return found


def local_identity() -> Identity:
    """Hostname and the addresses on all interfaces (this network namespace)."""
    addresses: Set[str] = set()
    sources = []
    for name, fn in (("/proc/net/fib_trie", _fib_trie_addresses),
                     ("/proc/net/if_inet6", _inet6_addresses),
                     ("SIOCGIFADDR on each interface", _ioctl_addresses)):
        try:
            got = fn()
        except (OSError, ImportError, ValueError):
            continue
        if got:
            addresses |= got
            sources.append(name)
    return Identity(socket.gethostname(), addresses,
                    " + ".join(sources) or "none found")


def resolve_host(host: str) -> List[str]:
    """Addresses of a host; IP literals are not looked up."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return []
    return sorted({info[4][0] for info in infos})


def memoized(resolver: Callable[[str], List[str]]
             ) -> Callable[[str], List[str]]:
    """`resolver` looking each host up once: the node list is checked by
    several steps (unresolvable, same_machines, reject_aliases, the index
    match, the barrier's bind), and a slow DNS would pay every lookup again."""
    cache: Dict[str, List[str]] = {}

    def lookup(host: str) -> List[str]:
        if host not in cache:
            cache[host] = resolver(host)
        return list(cache[host])
    return lookup


def same_machines(nodes: Sequence[Node],
                  resolver: Callable[[str], List[str]] = resolve_host
                  ) -> List[int]:
    """A machine number per node: two nodes share one when their hosts are
    the same name or resolve to a common address ('localhost' and
    '127.0.0.1'), so every comparison of nodes is by machine, not by text.
    A name that does not resolve is compared by name only."""
    keys: List[Set[str]] = []
    cache: Dict[str, List[str]] = {}
    for node in nodes:
        host = node.host.lower().rstrip(".")
        if host not in cache:
            cache[host] = resolver(node.host)
        keys.append({f"name:{host}"} | {f"addr:{a}" for a in cache[host]})
    machines: List[int] = []
    for i, key in enumerate(keys):
        same = next((machines[j] for j in range(i) if keys[j] & key), None)
        machines.append(len(set(machines)) if same is None else same)
    return machines


def unresolvable(nodes: Sequence[Node], where: str,
                 resolver: Callable[[str], List[str]] = resolve_host
                 ) -> List[str]:
    """One problem per node whose host this machine cannot resolve: its
    trainers could never connect to it. A real run refuses to start on
    them (exit 3, not 75 when the barrier times out); a dry run, perhaps on
    a login node that does not know the compute nodes, only notes them."""
    return [f"node {i} of {where}, {node.address}: host {node.host!r} does "
            "not resolve on this machine (check the name, /etc/hosts or DNS)"
            for i, node in enumerate(nodes) if not resolver(node.host)]


def reject_aliases(nodes: Sequence[Node], machines: Sequence[int],
                   where: str,
                   resolver: Callable[[str], List[str]] = resolve_host
                   ) -> None:
    """NodeError when two nodes are one machine and port under two names
    (NODES=localhost:5000,127.0.0.1:5000): the second could never start."""
    seen: Dict[tuple, int] = {}
    for i, node in enumerate(nodes):
        key = (machines[i], node.port)
        if key in seen:
            first = seen[key]
            common = sorted(set(resolver(nodes[first].host)) &
                            set(resolver(node.host)))
            raise NodeError(
                f"{where}: nodes {first} ({nodes[first].address}) and {i} "
                f"({node.address}) are the same machine and port"
                + (f" ({common[0]}:{node.port})" if common else "")
                + "; each node must appear once (give nodes on one machine "
                "different ports)")
        seen[key] = i


def match_index(nodes: Sequence[Node], identity: Identity,
                resolver: Callable[[str], List[str]] = resolve_host,
                where: str = "the node list") -> tuple:
    """(index, how) of the one node that is this machine, or NodeError."""
    matches: List[tuple] = []
    tried: List[str] = []
    resolved: Dict[str, List[str]] = {}
    for i, node in enumerate(nodes):
        if identity.names_match(node.host):
            matches.append((i, f"host name {node.host!r} is this machine's "
                               f"hostname {identity.hostname!r}"))
            continue
        if node.host not in resolved:
            resolved[node.host] = resolver(node.host)
        addrs = resolved[node.host]
        local = [a for a in addrs if identity.is_local_address(a)]
        if local:
            matches.append((i, f"{node.host} is local address {local[0]}"))
        tried.append(f"{node.address} -> "
                     f"{', '.join(addrs) if addrs else 'does not resolve'}")
    # Same address twice under different names is a duplicate too.
    by_addr: Dict[tuple, int] = {}
    for i, node in enumerate(nodes):
        for a in resolved.get(node.host, []):
            key = (a, node.port)
            if key in by_addr and by_addr[key] != i:
                first = by_addr[key]
                raise NodeError(
                    f"{where}: nodes {first} ({nodes[first].address}) and {i} "
                    f"({node.address}) are the same address {a}:{node.port}")
            by_addr[key] = i
    if len(matches) == 1:
        return matches[0]
    if matches:
        listed = "; ".join(f"node {i} ({nodes[i].address}): {why}"
                           for i, why in matches)
        raise NodeError(
            f"this machine matches {len(matches)} nodes of {where}: "
            f"{listed}. Set TASK_INDEX (0..{len(nodes) - 1}) to say which "
            "one this is (several workers on one machine need distinct "
            "ports and an explicit TASK_INDEX each)")
    addresses = ", ".join(sorted(identity.addresses)) or "none"
    raise NodeError(
        f"this machine is not in {where} "
        f"[{', '.join(n.address for n in nodes)}]. Tried: TASK_INDEX (not "
        f"set); Slurm (not used); hostname {identity.hostname!r} against "
        "each node's host; this machine's interface addresses [" + addresses
        + f"] (from {identity.address_source}) against each node's "
        f"addresses [{'; '.join(tried)}]. Set TASK_INDEX, or NODES/HOSTFILE "
        "with this machine's address")


# --------------------------------------------------------------------------
# Putting it together
# --------------------------------------------------------------------------


def read_tf_config(text: str) -> TFConfig:
    """The shared TF_CONFIG reader (the trainer's too); NodeError if bad."""
    try:
        return parse_tf_config(text)
    except TFConfigError as e:
        raise NodeError(f"TF_CONFIG is not valid: {e}")


def _tf_config_nodes(text: str) -> tuple:
    """(nodes, this node's position): chief first, then the workers."""
    parsed = read_tf_config(text)
    jobs = parsed.jobs
    unknown = sorted(set(jobs) - {"chief", "worker"})
    if unknown:
        raise NodeError(f"TF_CONFIG has job(s) {unknown}; the launcher runs "
                        "chief/worker clusters only")
    order = [("chief", a) for a in jobs.get("chief", [])] + \
            [("worker", a) for a in jobs.get("worker", [])]
    position = [i for i, (t, _) in enumerate(order) if t == parsed.task_type]
    nodes = parse_node_list([a for _, a in order], None, "TF_CONFIG")
    return nodes, position[parsed.task_index]


def _ascii_digits(text: str) -> bool:
    """str.isdigit() also accepts '²', which int() refuses."""
    return re.fullmatch("[0-9]+", text) is not None


def slurm_task_counts(text: str, n_hosts: int, where: str) -> List[int]:
    """Slurm's tasks-per-node syntax, '2(x3),1' -> [2, 2, 2, 1]."""
    counts: List[int] = []
    for part in split_list(text):
        m = re.fullmatch(r"([0-9]+)(?:\(x([0-9]+)\))?", part)
        if not m:
            raise NodeError(f"{where}: tasks per node {text!r} is not "
                            "Slurm's 'N' or 'N(xM)' list")
        repeat = int(m.group(2) or 1)
        if repeat + len(counts) > n_hosts:
            raise NodeError(f"{where}: tasks per node {text!r} lists more "
                            f"counts than nodes, not one positive count per "
                            f"node ({n_hosts} nodes)")
        counts.extend([int(m.group(1))] * repeat)
    if len(counts) != n_hosts or min(counts, default=0) < 1:
        raise NodeError(f"{where}: tasks per node {text!r} gives {counts}, "
                        f"not one positive count per node ({n_hosts} nodes)")
    return counts


def slurm_nodes(slurm: Dict[str, str], default_port: int,
                ports_per_task: int = 1) -> tuple:
    """(nodes, index or None, description, how) from SLURM_* variables.

    One entry per Slurm task: a host with t tasks gives host:port,
    host:port+P, ... (P = ports_per_task, the trainer ports one task uses),
    so several tasks on one machine (srun --ntasks=2 on one node) get their
    own ports. The index is the task's place in that list, from its node
    (SLURMD_NODENAME, else SLURM_NODEID) and SLURM_LOCALID, which holds for
    any task distribution (not SLURM_PROCID, which does not).
    """
    var = next((v for v in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                            "SLURM_NODELIST") if slurm.get(v)), None)
    if var is None:
        raise NodeError("USE_SLURM: no SLURM_JOB_NODELIST/SLURM_NODELIST in "
                        "the environment")
    hosts = expand_hostlist(slurm[var])
    where = f"Slurm {var}={slurm[var]!r}"
    per_node_var = "SLURM_STEP_TASKS_PER_NODE" \
        if var == "SLURM_STEP_NODELIST" else "SLURM_TASKS_PER_NODE"
    tasks = slurm.get("SLURM_STEP_NUM_TASKS") or slurm.get("SLURM_NTASKS")
    # Outside a step, SLURM_TASKS_PER_NODE counts tasks only when the job
    # asked for some (--ntasks); `sbatch --exclusive` alone sets it to the
    # node's CPUs.
    if slurm.get(per_node_var) and (per_node_var.startswith("SLURM_STEP")
                                    or slurm.get("SLURM_NTASKS")):
        counts = slurm_task_counts(slurm[per_node_var], len(hosts),
                                   f"{where}, {per_node_var}")
        if tasks and _ascii_digits(tasks) and int(tasks) != sum(counts):
            raise NodeError(f"{where}: {per_node_var}="
                            f"{slurm[per_node_var]!r} places {sum(counts)} "
                            f"tasks, but Slurm says {tasks}")
    else:
        counts = [1] * len(hosts)
        if tasks and _ascii_digits(tasks) and int(tasks) > len(hosts):
            raise NodeError(
                f"{where}: {tasks} Slurm tasks on {len(hosts)} nodes and no "
                f"{per_node_var} to place them; run one task per node "
                "(srun --ntasks-per-node=1)")
    items = [format_hostport(h, default_port + j * ports_per_task)
             for h, count in zip(hosts, counts) for j in range(count)]
    nodes = parse_node_list(items, None, where)
    index = None
    how = ""
    position = None
    name = slurm.get("SLURMD_NODENAME")
    if name and name in hosts:
        position, how = hosts.index(name), f"SLURMD_NODENAME={name!r}"
    elif _ascii_digits(slurm.get("SLURM_NODEID", "")):
        position, how = int(slurm["SLURM_NODEID"]), \
            f"SLURM_NODEID={slurm['SLURM_NODEID']}"
        if position >= len(hosts):
            raise NodeError(f"{how} is outside {where}")
    if position is not None:
        local = slurm.get("SLURM_LOCALID", "0")
        if not _ascii_digits(local) or int(local) >= counts[position]:
            raise NodeError(f"SLURM_LOCALID={local!r} is not a task of node "
                            f"{hosts[position]} ({counts[position]} tasks "
                            f"there, {per_node_var})")
        index = sum(counts[:position]) + int(local)
        if counts[position] > 1:
            how += f", SLURM_LOCALID={local}"
    return nodes, index, where, how


def resolve(settings: Settings, config_hosts: Optional[str],
            config_hosts_from: str, override_index: Optional[int],
            identity_fn: Callable[[], Identity] = local_identity,
            resolver: Callable[[str], List[str]] = resolve_host) -> NodeSet:
    """The node list and this machine's index for a two/multi-node run."""
    resolver = memoized(resolver)
    if settings.tf_config:
        nodes, index = _tf_config_nodes(settings.tf_config)
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
        nodes = parse_node_list(split_list(settings.nodes), port, where)
    elif settings.hostfile:
        where = f"HOSTFILE {settings.hostfile}"
        nodes = parse_node_list(read_hostfile(settings.hostfile), port, where)
    elif in_slurm and settings.use_slurm != "no":
        nodes, slurm_index, where, slurm_how = slurm_nodes(
            settings.slurm, port, settings.workers_per_node)
    elif config_hosts:
        where = config_hosts_from
        nodes = parse_node_list(split_list(config_hosts), port, where)
    else:
        raise NodeError(
            f"{settings.script} needs a node list: set NODES=host:port,"
            "host:port (or HOSTFILE, or run it with srun inside a Slurm "
            "job, or set runtime.worker_hosts in the config)")

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
        identity = identity_fn()
        index, why = match_index(nodes, identity, resolver, where)
        how = f"matched this machine: {why}"
    if not 0 <= index < len(nodes):
        raise NodeError(f"task index {index} ({how}) is outside {where}, "
                        f"which has {len(nodes)} nodes (0..{len(nodes) - 1})")
    ns = NodeSet(nodes, index, where, how, machines=machines,
                 unresolved=unresolvable(nodes, where, resolver))
    if slurm_index is not None and not settings.slurm.get("SLURM_STEP_ID"):
        ns.notes.append("in a Slurm job but not in a job step: start the "
                        "script on every node with srun --ntasks-per-node=1, "
                        "or the other nodes never arrive")
    return _check_count(ns, settings)


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
                f"{', '.join(addrs)} (loopback), but {remote[0].address} is "
                "another machine and could not reach a barrier there. Use "
                "node 0's network address in the node list, fix /etc/hosts, "
                "or set BARRIER_BIND (e.g. node 0's address, or 0.0.0.0 for "
                "every interface)")
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
