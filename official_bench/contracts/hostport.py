"""The one 'host:port' parser: config checks, the trainer and the launcher
(and `split_list`, NODES-style text into its items: the launcher, the pod;
`free_ports`, ports for local multi-process runs: the doctor, the tests).

Accepted: 'host:port' (a host name or IPv4 address) and '[v6addr]:port'.
Rejected: a port outside 1..65535 or missing (unless a default is given),
an empty or malformed host, and an IPv6 address without brackets (its
colons make the port ambiguous). TensorFlow's gRPC takes the bracketed
form as is, so addresses are passed on in the text they were written in.
"""

from __future__ import annotations

import ipaddress
import random
import re
import socket
from typing import List, Optional, Tuple

_HOST_RE = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$")
PORT_RANGE = "1..65535"


class HostPortError(ValueError):
    """A 'host:port' that is not one; carries the text and the reason."""

    def __init__(self, text: str, reason: str):
        super().__init__(f"{text!r} {reason}")
        self.text = text
        self.reason = reason


def is_ipv6(host: str) -> bool:
    """Whether host (without brackets) is an IPv6 address."""
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True


def _split(item: str) -> Tuple[str, Optional[str]]:
    """(host, port text or None) of 'host[:port]' or '[v6][:port]'."""
    if item.startswith("["):
        host, sep, rest = item[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise HostPortError(item, "is not [address]:port")
        if not is_ipv6(host):
            raise HostPortError(item, f"has {host!r} in brackets, which is "
                                      "not an IPv6 address ([address]:port)")
        return host, rest[1:] if rest else None
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", item)
    if scheme:
        raise HostPortError(item, f"has a scheme ({scheme.group(1)}://): "
                                  f"write host:port alone, e.g. "
                                  f"{item[scheme.end():]!r}")
    if item.count(":") > 1:
        raise HostPortError(item, "looks like a bare IPv6 address: write "
                                  "IPv6 addresses as [address]:port")
    host, sep, port_text = item.partition(":")
    if not host or not _HOST_RE.match(host):
        raise HostPortError(item, "has no valid host name or address before "
                                  "the port")
    return host, port_text if sep else None


def parse_hostport(text: str, default_port: Optional[int] = None
                   ) -> Tuple[str, int]:
    """'host:port' or '[v6addr]:port' -> (host without brackets, port).

    default_port is used for a bare host (the launcher's node lists allow
    one); without it a missing port is an error.
    """
    if not isinstance(text, str):
        raise HostPortError(str(text), "is not a string 'host:port'")
    item = text.strip()
    host, port_text = _split(item)
    if port_text is None:
        if default_port is None:
            raise HostPortError(item, "has no port (host:port)")
        return host, default_port
    # ASCII digits only: str.isdigit() also takes '²', which int() refuses.
    if not re.fullmatch(r"[0-9]+", port_text) or \
            not 0 < int(port_text) < 65536:
        raise HostPortError(item, f"has a bad port {port_text!r}: need a "
                                  f"number in {PORT_RANGE}")
    return host, int(port_text)


def format_hostport(host: str, port: int) -> str:
    """(host, port) -> 'host:port', bracketing IPv6 addresses."""
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}"


# The kernel hands out ports from this range (port-0 binds, outgoing
# connections); a port picked below it cannot be taken by one of those
# between the pick and its worker's bind (a race that loaded machines lose).
EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
_PICK_FLOOR = 20000


def _below_ephemeral() -> Optional[range]:
    """Ports from _PICK_FLOOR up to the ephemeral range, None when the range
    is unknown or leaves fewer than 1000 there."""
    try:
        with open(EPHEMERAL_RANGE_FILE) as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return range(_PICK_FLOOR, low) if low - _PICK_FLOOR >= 1000 else None


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _bind_all(host: str, ports: List[int]) -> bool:
    """Whether every port binds on `host` now (all held together)."""
    socks = []
    try:
        for port in ports:
            s = socket.socket(_family(host))
            socks.append(s)
            s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def _kernel_ports(n: int, host: str) -> List[int]:
    """n distinct ports the kernel picks (port-0 binds held together)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(_family(host))
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _candidates(n: int, host: str, span: Optional[range],
                consecutive: bool) -> List[int]:
    """n ports to try: at random from `span`, else from the kernel."""
    rng = random.SystemRandom()
    if not consecutive:
        return _kernel_ports(n, host) if span is None else rng.sample(span, n)
    base = _kernel_ports(1, host)[0] if span is None \
        else rng.randrange(span.start, span.stop - n)
    return list(range(base, base + n))


def free_ports(n: int, host: str = "127.0.0.1",
               consecutive: bool = False) -> List[int]:
    """n distinct TCP ports on `host` that were free a moment ago, for local
    multi-process runs; consecutive=True gives p, p+1, ... (worker i binds
    p + i). Picked at random below the kernel's ephemeral range where it
    has room, else from the kernel's own picks."""
    below = _below_ephemeral()
    for span in ([below] if below else []) + [None]:
        for _ in range(200):
            ports = _candidates(n, host, span, consecutive)
            if ports[-1] <= 65535 and _bind_all(host, ports):
                return ports
    raise OSError(f"no {n} {'consecutive ' if consecutive else ''}free "
                  f"TCP ports on {host}")


class HostListError(ValueError):
    """A host list with an empty entry (`a,,b`, a comma at an end)."""


def split_list(text: str) -> List[str]:
    """'a:1,b:2' or 'a:1 b:2' (also newlines) -> items. An empty entry
    between commas would drop a host from the cluster unnoticed, so it is
    a HostListError naming its position; blank text is no items."""
    items: List[str] = []
    if not text.strip():
        return items
    for piece in text.strip().split(","):
        words = piece.split()
        if not words:
            raise HostListError(
                f"position {len(items)} of {text!r} is empty (two commas in "
                "a row, or one at an end); separate the host[:port] entries "
                "with one comma")
        items += words
    return items
