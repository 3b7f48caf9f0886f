"""Waiting for a tf.data service dispatcher (TensorFlow's client and its
worker would both wait silently, forever): the port polled until something
answers, and one line saying why there is none, for the trainer
(service_feed.py) and the service worker (service.py) alike. A host that
does not resolve is named as such: it is waited for like a dispatcher not
yet started (a cluster's DNS may lag), but starting one would not help.
TensorFlow-free.
"""

from __future__ import annotations

import socket
import time
from typing import Callable, Optional

from official_bench.contracts.hostport import parse_hostport
from official_bench.runtime.cluster import can_connect

POLL_SECONDS = 0.5
NOTE_SECONDS = 30  # between the `say` lines of a long wait


def _unresolved(address: str) -> Optional[str]:
    """The host of `address` when it does not resolve, else None."""
    host, port = parse_hostport(address)
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return host
    return None


def start_command(address: str) -> str:
    """How to start the dispatcher `address` names (on its host)."""
    port = address.rsplit(":", 1)[-1]
    return (f"python -m official_bench.data.feeds.service --dispatcher "
            f"--port {port}")


def missing_message(address: str, timeout: float, keys: str,
                    unresolved: Optional[str], also: str = "") -> str:
    """Why no dispatcher answered at `address` in `timeout` s, and the fix
    that fits: the host name, or starting one (`also`: more to start)."""
    head = f"no tf.data service dispatcher at {address} after {timeout:g} s"
    if unresolved is not None:
        return (f"{head} ({keys}): its host {unresolved!r} does not resolve "
                "(no DNS or /etc/hosts entry); check the name")
    return f"{head} ({keys}); start one with: {start_command(address)}{also}"


def wait_for_dispatcher(address: str, timeout: float, keys: str,
                        also: str = "",
                        say: Optional[Callable[[str], None]] = None
                        ) -> Optional[str]:
    """None once something listens at `address` ('host:port', checked
    already); after `timeout` s (0: never) missing_message's line. `say`
    gets a line every NOTE_SECONDS of the wait; `keys` names the settings
    in the message."""
    start = time.monotonic()
    said = None
    while True:
        unresolved = _unresolved(address)
        if unresolved is None and can_connect(address,
                                              min(1.0, timeout or 1.0)):
            return None
        waited = time.monotonic() - start
        if timeout and waited >= timeout:
            return missing_message(address, timeout, keys, unresolved, also)
        if say and (said is None or waited - said >= NOTE_SECONDS):
            why = (f"; its host {unresolved!r} does not resolve"
                   if unresolved is not None else "")
            say(f"official_bench: waiting for the dispatcher at {address} "
                f"({waited:.0f} s so far{why})")
            said = waited
        time.sleep(POLL_SECONDS)
