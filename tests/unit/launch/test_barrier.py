"""The launchers' TCP barrier on 127.0.0.1 (threads, no TensorFlow), and
its authentication against the three attacks of issue 11 §4."""

import json
import re
import socket
import threading
import time

import pytest

from official_bench.launch import auth, barrier as barrier_lib
from official_bench.launch.barrier import BarrierError, Client, Coordinator
from support.helpers import free_ports

PLAN = "two bz4 fp32 x2"


def free_port():
    """Below the kernel's ephemeral range (contracts/hostport.py): a port
    bound to 0 comes from that range, and a client's connect before the
    coordinator binds it can meet itself or another process's socket."""
    return free_ports(1)[0]


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


def test_close_stops_the_accept_loop_without_waiting_out_its_poll(
        monkeypatch):
    # every test's coordinator used to wait up to 0.5 s here on close()
    monkeypatch.setattr(barrier_lib, "ACCEPT_POLL", 30.0)
    c = Coordinator(free_port(), 2, PLAN, host="127.0.0.1")
    time.sleep(0.1)  # the loop is in its select
    start = time.monotonic()
    c.close(linger=0)
    assert not c.thread.is_alive()
    assert time.monotonic() - start < 3
    c.close(linger=0)  # a second close is harmless


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


def test_a_coordinator_gone_is_said_once_and_a_peek_outage_counts():
    """The wait for a vanished coordinator is said once, with how long it
    lasts; a peek that got no answer starts it, so the next meet gives up
    at once when it lasted long enough."""
    port = free_port()
    c = Coordinator(port, 2, PLAN, host="127.0.0.1")
    said = []
    b = Client("127.0.0.1", port, 1, "b", PLAN, log=said.append)
    t, box = in_thread(client(port, 0).meet, "hello", {}, 10)
    b.meet("hello", {}, 10)
    t.join(10)
    c.close(linger=2)
    assert b.peek("end run 1", lost_after=1.0) is None
    assert b.peek("end run 1", lost_after=1.0) is None
    assert len(said) == 1 and said[0].startswith(
        f"barrier: node 0 at 127.0.0.1:{port} does not answer at "
        "'end run 1' (") and said[0].endswith(
            "giving up on its launcher after 1 s without an answer"), said
    assert b.lost(30.0) is None  # silent for less than that (a stall
    time.sleep(1.2)              # of 1 s here failed a 1.0 threshold)
    assert re.search(r"stopped answering \d+ s ago", b.lost(1.0))
    start = time.monotonic()
    with pytest.raises(BarrierError, match="at 'end run 1': the barrier on "
                       "node 0 at .* stopped answering"):
        b.meet("end run 1", {}, 60, lost_after=1.0)
    assert time.monotonic() - start < 1.0
    assert len(said) == 1


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


# -- authentication and resource limits (issue 11 §4) -------------------------

KEY = auth.BarrierKey(b"the shared secret", "test", True)


@pytest.fixture
def secured():
    """A 2-node coordinator with KEY; yields (coordinator, port, log lines)."""
    made = []

    def make(**kwargs):
        lines = []
        port = free_port()
        c = Coordinator(port, 2, PLAN, host="127.0.0.1", key=KEY,
                        log=lines.append, **kwargs)
        made.append(c)
        return c, port, lines
    yield make
    for c in made:
        c.close(linger=0.5)


def real(port, node):
    return Client("127.0.0.1", port, node, f"real{node}", PLAN, key=KEY)


def meet_both(port, timeout=10):
    """The real nodes 0 and 1 meet at 'hello'; both get both payloads."""
    t, box = in_thread(real(port, 0).meet, "hello", {"n": 0}, timeout)
    got = real(port, 1).meet("hello", {"n": 1}, timeout)
    t.join(timeout + 5)
    assert got == {0: {"n": 0}, 1: {"n": 1}}
    assert box["value"] == got


def raw_exchange(port, body, mac="0" * 64, nonce="1" * 32):
    """A stranger's request: reads the challenge, sends one envelope;
    returns (challenge, reply)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        f = s.makefile("rb")
        hello = json.loads(f.readline())
        s.sendall((json.dumps({"nonce": nonce, "body": body, "mac": mac})
                   + "\n").encode())
        return hello, json.loads(f.readline())


def test_forged_message_with_wrong_plan_is_dropped(secured):
    """Attack 1: one forged line claiming node 1 with another plan used to
    abort the run (exit 3 everywhere). Now it is dropped and logged, and
    the real node 1 is admitted."""
    c, port, lines = secured()
    forged = json.dumps({"op": "meet", "round": "hello", "node": 1,
                         "instance": "evil", "plan": "two bz999 fp16 x1",
                         "payload": {}, "timeout": 5})
    # Without a key, and with a key that is not the barrier's.
    hello, reply = raw_exchange(port, forged)
    assert hello["secret"] is True and len(hello["challenge"]) == 32
    assert reply["auth_failed"] is True and "payloads" not in reply
    wrong = auth.tag(b"guess", "request", hello["challenge"], "1" * 32, forged)
    assert raw_exchange(port, forged, mac=wrong)[1]["auth_failed"] is True
    # The pre-protocol form: a bare JSON line.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.makefile("rb").readline()
        s.sendall((forged + "\n").encode())
        assert s.recv(100) == b""  # dropped
    assert c.fatal is None and c.members == {} and c.rounds == {}
    meet_both(port)
    assert c.members == {0: "real0", 1: "real1"}
    dropped = [l for l in lines if "authentication failed" in l]
    assert len(dropped) == 2
    assert all(re.search(r"dropped a message from 127\.0\.0\.1:\d+ "
                         r"\(claiming node 1\)", l) for l in dropped)


def test_replayed_request_is_refused(secured):
    """A request signed for one connection's challenge fails on another:
    the tag covers the server's per-connection nonce."""
    c, port, lines = secured()
    body = json.dumps({"op": "peek", "round": "hello", "node": 1})
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        first = json.loads(s.makefile("rb").readline())["challenge"]
        mac = auth.tag(KEY.key, "request", first, "2" * 32, body)
    hello, reply = raw_exchange(port, body, mac=mac, nonce="2" * 32)
    assert hello["challenge"] != first
    assert reply.get("auth_failed") is True
    assert c.last_seen == {}  # the replay changed nothing
    # The same request signed for its own challenge is answered.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        f = s.makefile("rb")
        ns = json.loads(f.readline())["challenge"]
        s.sendall((json.dumps({"nonce": "2" * 32, "body": body, "mac":
                               auth.tag(KEY.key, "request", ns, "2" * 32,
                                        body)}) + "\n").encode())
        answer = json.loads(f.readline())
    assert json.loads(answer["body"])["ok"] is True
    assert auth.verify(KEY.key, "reply", ns, "2" * 32, answer["body"],
                       answer["mac"])


def test_stranger_claiming_node_1_first_is_rejected(secured):
    """Attack 2: a stranger who knows the plan digest (it is computable
    from the command line) claims node 1 before the real node 1. It gets
    an authentication error; the slot stays free for the real node."""
    c, port, lines = secured()
    t, box = in_thread(real(port, 0).meet, "hello", {"n": 0}, 10)
    time.sleep(0.3)
    for key in (auth.OPEN, auth.BarrierKey(b"wrong", "guess", True)):
        stranger = Client("127.0.0.1", port, 1, "stranger", PLAN, key=key)
        start = time.monotonic()
        with pytest.raises(BarrierError) as e:
            stranger.meet("hello", {"n": "evil"}, 10)
        assert e.value.fatal and "authentication failed" in str(e.value)
        assert time.monotonic() - start < 3  # no waiting out the timeout
    assert 1 not in c.members
    assert real(port, 1).meet("hello", {"n": 1}, 10) == {0: {"n": 0},
                                                         1: {"n": 1}}
    t.join(10)
    assert box["value"][1] == {"n": 1}
    assert c.members[1] == "real1" and c.fatal is None
    assert sum("authentication failed" in l for l in lines) == 2


def test_open_coordinator_refuses_a_client_with_a_secret():
    """A node with a secret never trusts an open barrier's replies (and
    the open barrier cannot verify it): a configuration mistake is a clear
    error, not a silently open run."""
    port = free_port()
    c = Coordinator(port, 2, PLAN, host="127.0.0.1", log=lambda m: None)
    try:
        with pytest.raises(BarrierError, match="authentication failed: node "
                           r"0's key: none \(not inside a Slurm job, no "
                           "BARRIER_SECRET\\); this node's key: "):
            real(port, 1).meet("hello", {}, 5)
    finally:
        c.close(linger=0.5)


def _open_idle(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        socks.append(s)
    return socks


def _closed_by_server(sock, within):
    """Whether the server closes this socket within `within` seconds (the
    challenge line may come first)."""
    sock.settimeout(within)
    try:
        while True:
            if not sock.recv(4096):
                return True
    except ConnectionResetError:
        return True
    except OSError:
        return False


def test_idle_connections_are_capped_and_timed_out(secured):
    """Attack 3: 200 idle connections used to make 200 threads that never
    ended. Now at most MAX_CONNECTIONS are served at once (a new one
    replaces the oldest unauthenticated one), each is closed after the idle
    timeout, and the real nodes get through during the flood."""
    assert barrier_lib.MAX_CONNECTIONS == 64
    base = threading.active_count()
    c, port, lines = secured(idle_timeout=4.0)
    socks = _open_idle(port, 200)
    try:
        time.sleep(0.5)
        assert threading.active_count() <= base + 1 + 64 + 2
        assert len(c.connections) <= 64
        meet_both(port)  # while the idle connections are held:
        with c.conn_lock:
            assert sum(not x.authenticated for x in c.connections) >= 60
        closed = [_closed_by_server(s, 10.0) for s in socks]
        assert all(closed), closed.count(False)
        deadline = time.monotonic() + 5
        while threading.active_count() > base + 1 and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert threading.active_count() <= base + 1  # the accept loop
        assert c.connections == []
    finally:
        for s in socks:
            s.close()
    assert any("no request within 4 s" in l for l in lines)
    assert any("closed the oldest unauthenticated one" in l for l in lines)
    assert len(lines) < 20  # a flood does not flood the log


def test_forged_reply_is_not_believed():
    """Something else answering on node 0's barrier port (a stranger that
    bound it first) cannot hand a node forged payloads: the reply's tag
    must carry the node's key and its own nonce."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]

    def fake():
        conn, _ = server.accept()
        with conn:
            f = conn.makefile("rb")
            conn.sendall((json.dumps({"barrier": auth.PROTOCOL,
                                      "challenge": "3" * 32, "secret": True})
                          + "\n").encode())
            nonce = json.loads(f.readline())["nonce"]
            body = json.dumps({"ok": True, "payloads": {"0": {"evil": 1}}})
            conn.sendall((json.dumps({"nonce": nonce, "body": body, "mac":
                                      auth.tag(b"guess", "reply", "3" * 32,
                                               nonce, body)})
                          + "\n").encode())
    t = threading.Thread(target=fake, daemon=True)
    t.start()
    try:
        with pytest.raises(BarrierError, match="the reply does not carry "
                           "this node's key") as e:
            real(port, 1).meet("hello", {}, 5)
        assert e.value.fatal
    finally:
        t.join(5)
        server.close()


@pytest.mark.parametrize("head, node, words, fix", [
    (auth.slurm_key({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "vm"}),
     auth.OPEN,
     "node 0's key: derived from Slurm job 7; this node's key: none (not "
     "inside a Slurm job, no BARRIER_SECRET)",
     "Run every node's launcher inside the same Slurm job (srun), or set "
     "the same BARRIER_SECRET or BARRIER_SECRET_FILE on every node"),
    (auth.OPEN,
     auth.slurm_key({"SLURM_JOB_ID": "8", "SLURM_JOB_NODELIST": "vm"}),
     "node 0's key: none (not inside a Slurm job, no BARRIER_SECRET); this "
     "node's key: derived from Slurm job 8",
     "Run every node's launcher inside the same Slurm job (srun)"),
    (auth.choose_key("a", "BARRIER_SECRET_FILE /secret/path", {}),
     auth.choose_key("b", "BARRIER_SECRET (env)", {}),
     "node 0's key: BARRIER_SECRET_FILE; this node's key: BARRIER_SECRET",
     "Set the same BARRIER_SECRET or BARRIER_SECRET_FILE on every node (or "
     "none on any)"),
])
def test_a_key_mismatch_names_both_sides_sources(head, node, words, fix):
    """Slurm on one node only (cluster walk 5): the line says where each
    side's key came from and the fix; never a key or a file's path."""
    port = free_port()
    c = Coordinator(port, 2, PLAN, host="127.0.0.1", key=head,
                    log=lambda m: None)
    try:
        with pytest.raises(BarrierError) as e:
            Client("127.0.0.1", port, 1, "i1", PLAN, key=node).meet(
                "hello", {}, 5)
    finally:
        c.close(linger=0)
    text = str(e.value)
    assert e.value.fatal
    assert f"barrier authentication failed: {words} (barrier of node 0 " \
        f"at 127.0.0.1:{port}). {fix}" in text, text
    assert "/secret/path" not in text
