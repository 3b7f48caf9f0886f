"""Node lists as the user writes them: host:port items, NODES-style text,
HOSTFILE and TF_CONFIG, parsed into Nodes (host:port syntax and NODES-style
splitting are contracts/hostport.py's, shared with the trainer and the pod).
Pure parsing: no DNS, no environment; Slurm's lists are slurm.py, this machine
is identity.py.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, List, Optional, Tuple

from official_bench.contracts.hostport import (
    HostListError,
    HostPortError,
    format_hostport,
    parse_hostport,
    split_list,
)
from official_bench.contracts.tf_config import (
    TFConfig,
    TFConfigError,
    parse_tf_config,
)


class NodeError(ValueError):
    """A bad node list, or this machine's place in it cannot be found."""


@dataclasses.dataclass(frozen=True)
class Node:
    """One node of the list: the host and port its launcher is known by."""
    host: str
    port: int

    @property
    def address(self) -> str:
        return format_hostport(self.host, self.port)


def parse_node(text: str, default_port: Optional[int], where: str) -> Node:
    """'host:port', '[v6addr]:port' or 'host' (gets default_port); the
    syntax is official_bench.contracts.hostport's, shared with the trainer."""
    try:
        host, port = parse_hostport(text, default_port)
    except HostPortError as e:
        raise NodeError(f"{where}: node {e}")
    return Node(host, port)


def split_nodes(text: str, where: str) -> List[str]:
    """NODES text as items (contracts/hostport.split_list: commas and
    whitespace); an empty entry is a NodeError naming `where`."""
    try:
        return split_list(text)
    except HostListError as e:
        raise NodeError(f"{where}: {e}")


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


def read_tf_config(text: str) -> TFConfig:
    """The shared TF_CONFIG reader (the trainer's too); NodeError if bad."""
    try:
        return parse_tf_config(text)
    except TFConfigError as e:
        raise NodeError(f"TF_CONFIG is not valid: {e}")


def tf_config_nodes(text: str) -> Tuple[List[Node], int]:
    """(nodes, this node's position): chief first, then the workers."""
    parsed = read_tf_config(text)
    jobs = parsed.jobs
    unknown = sorted(set(jobs) - {"chief", "worker"})
    if unknown:
        raise NodeError(f"TF_CONFIG has job(s) {unknown}; the launcher runs "
                        "chief/worker clusters only")
    addresses, place = parsed.node_order()
    return parse_node_list(addresses, None, "TF_CONFIG"), place
