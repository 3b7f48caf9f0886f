"""A launcher that leaves the sweep (a signal stopped it) says so to the
barrier, and the other nodes' meet and peek name it at once: a coordinator
and clients in one process on 127.0.0.1 (threads, no TensorFlow). Before,
the others found out only by silence (30 s + KILL_AFTER)."""

import json
import threading
import time

import pytest

from official_bench.launch import auth, barrier as barrier_lib
from official_bench.launch.barrier import BarrierError, Client, Coordinator
from support.helpers import free_ports

PLAN = "two bz4 fp32 x2"
KEY = auth.BarrierKey(b"k" * 32, "BARRIER_SECRET (env)", True)


def _name(i):
    return f"node {i} (127.0.0.1:{11111 + i})"


@pytest.fixture
def barrier():
    """(coordinator, port) of a keyed two-node barrier, closed after."""
    made = []

    def make(num_nodes=2):
        port = free_ports(1)[0]
        c = Coordinator(port, num_nodes, PLAN, host="127.0.0.1", key=KEY,
                        describe=_name, log=lambda m: None)
        made.append(c)
        return c, port
    yield make
    for c in made:
        c.close(linger=0)


def client(port, node, key=KEY, instance=None):
    return Client("127.0.0.1", port, node, instance or f"inst{node}", PLAN,
                  key=key)


def meet_in_thread(c, round_name, timeout=60.0, **kwargs):
    """Starts c.meet in a thread; (thread, box with "error" or "value",
    "took": seconds)."""
    box = {}

    def target():
        start = time.monotonic()
        try:
            box["value"] = c.meet(round_name, {}, timeout, **kwargs)
        except BarrierError as e:
            box["error"] = e
        box["took"] = time.monotonic() - start
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def _joined(port):
    """Both nodes met at hello; their clients."""
    a, b = client(port, 0), client(port, 1)
    t, box = meet_in_thread(a, "hello", 10)
    b.meet("hello", {}, 10)
    t.join(10)
    assert "value" in box
    return a, b


def _waiting(coordinator, node, round_name):
    """Until node's meet waits at round_name on the coordinator."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with coordinator.cond:
            rnd = coordinator.rounds.get(round_name)
            if rnd is not None and node in rnd.payloads and \
                    coordinator.waiting.get(node):
                return
        time.sleep(0.02)
    raise AssertionError(f"node {node} never waited at {round_name!r}")


def test_node1_leaving_ends_node0s_meet_at_once_naming_it(barrier):
    c, port = barrier()
    a, b = _joined(port)
    t, box = meet_in_thread(a, "end 2n1g run 2", stale_after=60)
    _waiting(c, 0, "end 2n1g run 2")
    start = time.monotonic()
    assert b.leave("interrupted by SIGTERM") is None
    assert time.monotonic() - start < 1.5
    t.join(10)
    assert not t.is_alive()
    e = box["error"]
    assert str(e) == ("at 'end 2n1g run 2': node 1 (127.0.0.1:11112) left "
                      "the sweep: interrupted by SIGTERM")
    assert e.missing == [1] and not e.fatal
    assert box["took"] < 5
    # A meet that comes after the leave is answered at once as well.
    start = time.monotonic()
    with pytest.raises(BarrierError, match=r"^at 'start 2n1g run 3': node 1 "
                       r"\(127\.0\.0\.1:11112\) left the sweep: interrupted "
                       r"by SIGTERM$"):
        client(port, 0).meet("start 2n1g run 3", {}, 60)
    assert time.monotonic() - start < 2


def test_node1_leaving_is_seen_by_node0s_peek_while_its_trainer_runs(
        barrier):
    c, port = barrier()
    a, b = _joined(port)
    assert a.peek("end 2n1g run 1") == {}
    assert a.lost(60) is None
    b.leave("interrupted by SIGINT")
    assert a.peek("end 2n1g run 1") == {}
    assert a.lost(60) == ("node 1 (127.0.0.1:11112) left the sweep: "
                          "interrupted by SIGINT")
    assert c.departed("end 2n1g run 1", exclude=0) == [a.lost(60)]
    assert c.silent("end 2n1g run 1", 0, exclude=0) == []


def test_node0_leaving_ends_node1s_meet_at_once_and_tells_a_peeker(
        barrier):
    c, port = barrier()
    a, b = _joined(port)
    t, box = meet_in_thread(b, "end 2n1g run 2", lost_after=60)
    _waiting(c, 1, "end 2n1g run 2")
    start = time.monotonic()
    c.leave(0, "interrupted by SIGTERM")
    t.join(10)
    assert str(box["error"]) == (
        "at 'end 2n1g run 2': node 0 (127.0.0.1:11111) left the sweep: "
        "interrupted by SIGTERM")
    assert box["error"].missing == [0]
    assert time.monotonic() - start < 3
    c.close(linger=c.tell_linger)
    assert c.untold() == []  # node 1 was told by its meet's reply


def test_node0s_barrier_stays_up_until_a_peeking_node_was_told(barrier):
    """Node 1's trainer runs: it is not connected when node 0 leaves, and
    asks within its peek interval; node 0's barrier waits for that ask
    (not longer), and node 1's next meet ends at once without a wait for
    the barrier that has gone."""
    c, port = barrier()
    a, b = _joined(port)
    c.leave(0, "interrupted by SIGHUP")
    closed = threading.Event()

    def close():
        c.close(linger=c.tell_linger)
        closed.set()
    closer = threading.Thread(target=close, daemon=True)
    closer.start()
    time.sleep(0.5)
    assert not closed.is_set()  # waits for node 1 to ask
    assert b.peek("end 2n1g run 1") == {}
    assert closed.wait(2), "closed only after the linger"
    assert b.lost(60) == ("node 0 (127.0.0.1:11111) left the sweep: "
                          "interrupted by SIGHUP")
    start = time.monotonic()
    with pytest.raises(BarrierError) as e:
        b.meet("end 2n1g run 1", {}, 60, lost_after=60)
    assert time.monotonic() - start < 1
    assert str(e.value) == ("at 'end 2n1g run 1': node 0 (127.0.0.1:11111) "
                            "left the sweep: interrupted by SIGHUP")
    assert e.value.missing == [0]


def test_node0s_linger_is_bounded_for_a_node_that_never_asks(barrier):
    c, port = barrier()
    _joined(port)
    c.tell_linger = 0.5
    c.leave(0, "interrupted by SIGTERM")
    start = time.monotonic()
    c.close(linger=10)
    assert time.monotonic() - start < 2
    assert c.untold() == [1]


def test_a_leave_needs_the_key_and_the_launcher_that_joined(barrier):
    c, port = barrier()
    a, b = _joined(port)
    stranger = client(port, 1, key=auth.BarrierKey(b"x" * 32, "other", True))
    assert "authentication failed" in stranger.leave("interrupted by SIGTERM")
    impostor = client(port, 1, instance="another launcher")
    assert "did not join this sweep" in impostor.leave("spoofed")
    assert c.left == {}
    assert a.peek("end 2n1g run 1") == {} and a.lost(60) is None


def test_a_leave_that_cannot_be_delivered_costs_at_most_a_second():
    port = free_ports(1)[0]  # nothing listens there
    start = time.monotonic()
    why = client(port, 1).leave("interrupted by SIGTERM")
    assert why and time.monotonic() - start < 1.5
    # A barrier that accepts but never answers: the thread is left behind.
    import socket
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(1)
        start = time.monotonic()
        why = client(mute.getsockname()[1], 1).leave("interrupted by SIGINT",
                                                     timeout=0.5)
        assert time.monotonic() - start < 1.0
        assert why == "no answer within 0.5 s"


def test_an_older_barrier_ignores_a_leave(barrier, monkeypatch):
    """A barrier from before "leave" answers it as an unknown op and
    changes nothing (no fatal error for the others)."""
    def older(self, request):
        return {"ok": False, "error": f"unknown op {request['op']!r}",
                "fatal": True}
    monkeypatch.setattr(Coordinator, "_leave", older)
    c, port = barrier()
    a, b = _joined(port)
    assert b.leave("interrupted by SIGTERM") == "unknown op 'leave'"
    assert c.fatal is None and c.left == {}
    t, box = meet_in_thread(a, "start 2n1g run 1", 10)
    b.meet("start 2n1g run 1", {}, 10)
    t.join(10)
    assert "value" in box


def test_the_reason_is_one_short_line(barrier):
    c, port = barrier()
    a, b = _joined(port)
    b.leave("interrupted\nby " + "x" * 500)
    [text] = c.departed("start run 1", exclude=0)
    assert "\n" not in text and len(text) < barrier_lib.MAX_REASON + 60
    assert text.endswith("...")
    assert json.dumps(text)
