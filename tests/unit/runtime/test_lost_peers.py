"""runtime/cluster.lost_peers_error after a failed collective: a peer
stopped by a signal fails the collective a moment before its process (and
its port) goes, so the survivor asks the ports again until one closes and
names it (exit 4's line), instead of passing on TensorFlow's raw "shape
mismatch" error (walk_signals2 F5)."""

import socket
import threading
import time

from official_bench.runtime.cluster import Cluster, PeerLost, lost_peers_error


def _listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock, f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_peer_whose_port_closes_a_moment_later_is_named():
    peer, address = _listener()
    cluster = Cluster(workers=["127.0.0.1:1", address], task_index=0)
    closer = threading.Timer(1.0, peer.close)
    closer.start()
    start = time.monotonic()
    try:
        lost = lost_peers_error(cluster, 21, 60, wait=10.0)
    finally:
        closer.cancel()
        peer.close()
    assert isinstance(lost, PeerLost)
    assert str(lost).startswith(
        f"official_bench: lost worker 1 at {address} at step 21 of 60 ")
    assert time.monotonic() - start < 8.0  # asked again, not waited out


def test_peers_still_answering_after_the_wait_are_not_lost():
    peer, address = _listener()
    cluster = Cluster(workers=["127.0.0.1:1", address], task_index=0)
    try:
        start = time.monotonic()
        assert lost_peers_error(cluster, 3, 60, wait=1.0) is None
        assert time.monotonic() - start >= 1.0
    finally:
        peer.close()
