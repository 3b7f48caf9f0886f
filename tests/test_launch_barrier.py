"""The launchers' TCP barrier on 127.0.0.1 (threads, no TensorFlow)."""

import socket
import threading
import time

import pytest

from official_bench.launch.barrier import BarrierError, Client, Coordinator

PLAN = "two bz4 fp32 x2"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def coordinator():
    made = []

    def make(num_nodes=2, plan=PLAN):
        port = free_port()
        c = Coordinator(port, num_nodes, plan, host="127.0.0.1")
        made.append(c)
        return c, port
    yield make
    for c in made:
        c.close(linger=0.5)


def client(port, node, plan=PLAN, instance=None):
    return Client("127.0.0.1", port, node, instance or f"inst{node}", plan)


def in_thread(fn, *args, **kwargs):
    box = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - handed to the test
            box["error"] = e
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def test_all_nodes_meet_and_see_every_payload(coordinator):
    _, port = coordinator(3)
    threads = [in_thread(client(port, i).meet, "start run 1", {"n": i}, 10)
               for i in range(3)]
    for t, box in threads:
        t.join(15)
        assert box["value"] == {0: {"n": 0}, 1: {"n": 1}, 2: {"n": 2}}


def test_late_node_and_late_coordinator(coordinator):
    port = free_port()
    # Node 1 starts first and retries until node 0's coordinator appears.
    t, box = in_thread(client(port, 1).meet, "hello", {}, 10)
    time.sleep(1.0)
    c = Coordinator(port, 2, PLAN, host="127.0.0.1")
    try:
        assert client(port, 0).meet("hello", {"stamp": "s"}, 10)[0] == \
            {"stamp": "s"}
        t.join(10)
        assert box["value"][0] == {"stamp": "s"}
    finally:
        c.close(linger=0.5)


def test_missing_node_times_out_with_its_name(coordinator):
    _, port = coordinator(2)
    start = time.monotonic()
    with pytest.raises(BarrierError) as e:
        client(port, 0).meet("start 2n1g run 1", {}, 1.5)
    assert time.monotonic() - start < 5
    assert e.value.missing == [1]
    assert "not arrived: node 1" in str(e.value)


def test_unreachable_coordinator(coordinator):
    port = free_port()
    start = time.monotonic()
    with pytest.raises(BarrierError, match="did not answer.*is the script "
                                           "running there"):
        client(port, 1).meet("hello", {}, 1.5)
    assert time.monotonic() - start < 5


def test_plan_mismatch_is_fatal_for_everyone(coordinator):
    _, port = coordinator(2)
    t, box = in_thread(client(port, 0).meet, "hello", {}, 10)
    time.sleep(0.3)
    with pytest.raises(BarrierError) as e:
        client(port, 1, plan="two bz8 fp16 x2").meet("hello", {}, 10)
    assert e.value.fatal and "different plan" in str(e.value)
    t.join(10)
    assert isinstance(box["error"], BarrierError) and box["error"].fatal


def test_two_launchers_claiming_one_index(coordinator):
    _, port = coordinator(2)
    t, box = in_thread(client(port, 1, instance="a").meet, "hello", {}, 10)
    time.sleep(0.3)
    with pytest.raises(BarrierError, match="second launcher joined as node 1"):
        client(port, 1, instance="b").meet("hello", {}, 10)
    t.join(10)
    assert box["error"].fatal


def test_completed_round_answers_again_and_peek(coordinator):
    _, port = coordinator(2)
    a, b = client(port, 0), client(port, 1)
    t, box = in_thread(a.meet, "end run 1", {"status": "ok"}, 10)
    time.sleep(0.3)
    assert b.peek("end run 1") == {0: {"status": "ok"}}
    assert b.peek("never") == {}
    b.meet("end run 1", {"status": "failed"}, 10)
    t.join(10)
    # Asking again (a client whose connection broke) gets the same answer.
    assert b.meet("end run 1", {"status": "failed"}, 1)[1] == \
        {"status": "failed"}
    assert box["value"][1] == {"status": "failed"}


def test_silent_node_is_reported_gone(coordinator):
    _, port = coordinator(2)
    b = client(port, 1)
    b.peek("end run 1")  # node 1 was heard from, then goes silent
    start = time.monotonic()
    with pytest.raises(BarrierError, match="node 1 has not been heard from"):
        client(port, 0).meet("end run 1", {}, 30, stale_after=1.0)
    assert time.monotonic() - start < 6


def test_coordinator_that_stops_is_noticed():
    port = free_port()
    c = Coordinator(port, 2, PLAN, host="127.0.0.1")
    b = client(port, 1)
    t, box = in_thread(client(port, 0).meet, "hello", {}, 10)
    b.meet("hello", {}, 10)
    t.join(10)
    c.close(linger=2)
    start = time.monotonic()
    with pytest.raises(BarrierError, match="stopped answering"):
        b.meet("start run 1", {}, 60, lost_after=1.0)
    assert time.monotonic() - start < 8


def test_port_in_use_is_a_clear_error(coordinator):
    _, port = coordinator(2)
    with pytest.raises(BarrierError, match="cannot listen on barrier port"):
        Coordinator(port, 2, PLAN, host="127.0.0.1")


def test_ipv6_loopback():
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    with socket.socket(socket.AF_INET6) as s:
        try:
            s.bind(("::1", 0))
        except OSError as e:
            pytest.skip(f"no IPv6 loopback: {e}")
        port = s.getsockname()[1]
    c = Coordinator(port, 2, PLAN, host="::")
    try:
        a = Client("::1", port, 0, "a", PLAN)
        b = Client("::1", port, 1, "b", PLAN)
        assert a.address == f"[::1]:{port}"
        t, box = in_thread(a.meet, "hello", 0, 10)
        assert b.meet("hello", 1, 10) == {0: 0, 1: 1}
        t.join(10)
        assert box["value"] == {0: 0, 1: 1}
    finally:
        c.close(linger=0.5)
