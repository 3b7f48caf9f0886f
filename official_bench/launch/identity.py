"""Which node of the list is this machine: its hostname and the addresses
on its interfaces (/proc/net/fib_trie, /proc/net/if_inet6, else an ioctl
per interface), each node's host resolved by DNS, and the comparisons
built on both (same machine, aliases, unresolvable hosts, the index match).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
from typing import Callable, Dict, List, Sequence, Set

from official_bench.launch.node_list import Node, NodeError


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
            elif text.startswith("/32 host LOCAL") and last:
                # /8 host LOCAL is 127.0.0.0/8's route: a network, not an
                # address of an interface.
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
    """Hostname and the addresses on all interfaces (this network
    namespace)."""
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
    them (exit CLUSTER, not BARRIER_TIMEOUT when the barrier times out); a
    dry run, perhaps on a login node that does not know the compute nodes,
    only notes them."""
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


class NotInList(NodeError):
    """No node of the list is this machine (match_index)."""


def match_index(nodes: Sequence[Node], identity: Identity,
                resolver: Callable[[str], List[str]] = resolve_host,
                where: str = "the node list") -> tuple:
    """(index, how) of the one node that is this machine, or NodeError
    (NotInList when none is)."""
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
    raise NotInList(
        f"this machine is not in {where} "
        f"[{', '.join(n.address for n in nodes)}]. Tried: TASK_INDEX (not "
        f"set); Slurm (not used); hostname {identity.hostname!r} against "
        "each node's host; this machine's interface addresses [" + addresses
        + f"] (from {identity.address_source}) against each node's "
        f"addresses [{'; '.join(tried)}]. Set TASK_INDEX, or NODES/HOSTFILE "
        "with this machine's address")
