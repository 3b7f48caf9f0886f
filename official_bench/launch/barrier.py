"""The launchers' meeting point: a small TCP barrier served by node 0.

Node 0's launcher runs the Coordinator for its whole lifetime and meets
through it like every other node (Client). A "meet" returns once all N nodes
have sent the same round, each node then seeing every node's payload, or
fails after the caller's timeout naming the nodes still missing; meeting
again in a completed round answers at once, so a client whose connection
broke simply asks again, and clients retry connecting until their deadline,
so nodes may start in any order. A node whose plan digest differs (another
BATCH, DTYPE, node list, ...) or that claims a taken index is a fatal error
for every node. The runner's rounds: "hello" (plan check, session stamp, or
why a node cannot run), "start {case} run {i}", "end {case} run {i}" (exit
status and reason); while a run goes each node peeks at its "end" round, so
a failure elsewhere stops its trainer instead of a wait for a lost peer. A
launcher stopped by a signal says "leave" (why) on its way out, and every
other node's meet and peek then name it at once instead of a silent wait.

Every exchange is bound to two fresh nonces of its connection and tagged
with the shared secret (auth.py), so a recorded request or reply is
worthless elsewhere; one that does not verify is dropped, logged and
answered auth_failed and changes nothing. A stranger cannot lock the nodes
out: at most MAX_CONNECTIONS at once, the oldest unauthenticated one
replaced when full, IDLE_TIMEOUT to deliver a request, and the server
listens on node 0's own address from the node list, not every interface.
The wire format: Coordinator; what a user sets and sees: docs/security.md.
"""

from __future__ import annotations

import errno
import json
import re
import select
import socket
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from official_bench.launch import auth

MAX_LINE = 1 << 20
# Connections served at once (one thread each): far above what the nodes
# need (each has at most a meet and a peek open), far below what would
# strain a machine. Runs of more than 16 nodes get 4 per node.
MAX_CONNECTIONS = 64
# Seconds a connection may take from connecting to a complete request; a
# node sends its request within a round trip of the challenge.
IDLE_TIMEOUT = 10.0
# Log lines per kind of rejected connection before they are only counted
# (every 100th is logged with the count), so a flood cannot fill the log.
LOG_FIRST = 5
# Seconds the accept loop waits for a connection before it looks at
# `stopping` again (close() also wakes it at once).
ACCEPT_POLL = 0.5
# Seconds node 0's barrier stays up after its launcher left (a signal) for
# the nodes not yet told to ask: a node whose trainer runs peeks every 2 s
# (trainer_process.PEEK_SECONDS, at its 0.2 s ticks, on a busy machine
# later); nodes waiting at a meet are told at once.
TELL_LINGER = 3.0
# Seconds a leaving launcher gives its "leave" message before it exits.
LEAVE_TIMEOUT = 1.0
# Characters of a leaving node's reason that are passed on.
MAX_REASON = 200
_HEX_NONCE = re.compile(r"^[0-9a-f]{%d}$" % (2 * auth.NONCE_BYTES))


class BarrierError(RuntimeError):
    """The nodes did not meet: timeout, unreachable coordinator, mismatch."""

    def __init__(self, message: str, missing: Optional[List[int]] = None,
                 fatal: bool = False):
        super().__init__(message)
        self.missing = missing or []
        self.fatal = fatal


class _Round:
    """One named round on the coordinator: each node's payload, the nodes
    the full set was sent to, and whether every node has arrived."""

    def __init__(self) -> None:
        self.payloads: Dict[int, Any] = {}
        self.delivered: set = set()
        self.completed = False


class _Connection:
    """One accepted connection: its socket, peer and whether it has sent an
    authenticated request (only those that have not can be replaced)."""

    def __init__(self, sock: socket.socket, peer: str):
        self.sock, self.peer = sock, peer
        self.started = time.monotonic()
        self.authenticated = False

    def drop(self) -> None:
        """Wakes its thread (blocked in recv) by shutting the socket down."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _peer_text(peer) -> str:
    host, port = peer[0], peer[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen_sockets(hosts: Union[str, Sequence[str]], port: int
                   ) -> List[socket.socket]:
    """Listening sockets on every address `hosts` resolve to ('' or '0.0.0.0'
    or '::': every interface). BarrierError when none can be bound, or when
    the port is taken."""
    if isinstance(hosts, str):
        hosts = [hosts]
    addresses = []
    for host in hosts:
        try:
            infos = socket.getaddrinfo(host or None, port, 0,
                                       socket.SOCK_STREAM, 0,
                                       socket.AI_PASSIVE)
        except OSError as e:
            raise BarrierError(f"cannot listen on barrier port {port}: "
                               f"{host!r} does not resolve ({e})", fatal=True)
        for family, _, _, _, sockaddr in infos:
            if (family, sockaddr[:2]) not in [(f, a[:2]) for f, a in
                                              addresses]:
                addresses.append((family, sockaddr))
    sockets: List[socket.socket] = []
    problems = []
    for family, sockaddr in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
            sock.listen(128)
        except OSError as e:
            sock.close()
            where = _peer_text(sockaddr)
            if e.errno == errno.EADDRINUSE:
                for other in sockets:
                    other.close()
                raise BarrierError(
                    f"cannot listen on barrier port {port} at {where}: "
                    f"{e.strerror}; is another launcher running here? (set "
                    "BARRIER_PORT)", fatal=True)
            problems.append(f"{where}: {e.strerror}")
            continue
        sockets.append(sock)
    if not sockets:
        raise BarrierError(
            f"cannot listen on barrier port {port} at "
            f"{', '.join(problems) or 'no address'}; node 0's address in the "
            "node list must be this machine's (or set BARRIER_BIND)",
            fatal=True)
    return sockets


class Coordinator:
    """Serves rounds for `num_nodes` launchers on `port` at `host` (an
    address or name, or a list of them; see listen_sockets).

    Exchange on each connection (one JSON object per line, one request per
    connection)::

      server   {"barrier": "official_bench barrier v1", "challenge": Ns,
                "secret": bool}
      client   {"nonce": Nc, "body": "<request JSON text>",
                "mac": HMAC(key, "request", Ns, Nc, body)}
      server   {"nonce": Nc, "body": "<reply JSON text>",
                "mac": HMAC(key, "reply", Ns, Nc, body)}
          or   {"ok": false, "auth_failed": true, "error": "...",
                "key": "<where node 0's key came from: auth.BarrierKey.brief>"}

    Ns and Nc are fresh random nonces of this connection (auth.new_nonce):
    the server issues a new Ns each time, so a recorded request's tag
    covers an old one, and the reply is bound to Nc, so a recorded reply
    cannot answer a later request. The key is the shared secret (auth.py:
    BARRIER_SECRET[_FILE], else derived from the Slurm job, else empty: an
    open barrier). A client whose reply does not verify under its own key
    stops as a refused one does.

    Requests (the body)::

      {"op": "meet", "round": "start 2n8g run 3", "node": k,
       "instance": "<random id of this launcher>", "plan": {<field>: ..},
       "payload": {...}, "timeout": seconds}
      reply {"ok": true, "round": ..., "payloads": {"0": {...}, "1": {...}}}
         or {"ok": false, "error": "...", "missing": [..], "fatal": bool}

      {"op": "peek", "round": ..., "node": k}
      reply {"ok": true, "payloads": {...}}   (who has arrived so far; no wait)

      {"op": "leave", "node": k, "instance": ..., "reason": "interrupted by
       SIGTERM"}
      reply {"ok": true}   (only from the launcher that joined as node k)

    A node that left (node 0's own launcher too: leave()) is named in the
    reply to every meet of a round it has not arrived at, {"ok": false,
    "error": "at 'end 2n1g run 2': node 1 (host:port) left the sweep:
    interrupted by SIGTERM", "missing": [1], "left": {"1": "<that text>"}},
    and in the "left" of every peek at such a round; node 0's barrier, when
    its launcher leaves, stays up TELL_LINGER s for the nodes not yet told.
    A barrier older than "leave" answers it "unknown op" and changes
    nothing; a client older than it ignores "left".

    A refused request changes nothing: no node slot, no round, no fatal
    error. Fatal errors (plan mismatch, two launchers claiming one index)
    need the key, so a stranger cannot cause them. A node that cannot start
    the trainer sends "hello" with "cannot_run" saying why, and may come
    without a plan digest when its Python cannot even make the plan.
    """

    def __init__(self, port: int, num_nodes: int, plan: Any,
                 host: Union[str, Sequence[str]] = "127.0.0.1",
                 describe=None, key: auth.BarrierKey = auth.OPEN,
                 log=None, max_connections: Optional[int] = None,
                 idle_timeout: float = IDLE_TIMEOUT):
        self.num_nodes = num_nodes
        self.plan = plan
        self.key = key
        self.describe = describe or (lambda i: f"node {i}")
        self.log = log or (lambda m: print(m, file=sys.stderr, flush=True))
        self.max_connections = max_connections or max(MAX_CONNECTIONS,
                                                      4 * num_nodes)
        self.idle_timeout = idle_timeout
        self.cond = threading.Condition()
        self.rounds: Dict[str, _Round] = {}
        self.members: Dict[int, str] = {}
        self.last_seen: Dict[int, float] = {}
        self.waiting: Dict[int, int] = {}  # node -> open meet requests
        self.fatal: Optional[str] = None
        # node -> "node k (host:port) left the sweep: <why>"; the nodes told
        # since the latest departure (a reply carrying "left" sent), when.
        self.left: Dict[int, str] = {}
        self.told: set = set()
        self.left_at = 0.0
        self.tell_linger = TELL_LINGER
        self.connections: List[_Connection] = []
        self.conn_lock = threading.Lock()
        self.rejected: Dict[str, int] = {}  # kind -> count (for the log)
        self.stopping = threading.Event()
        # close() writes to the pair, so the accept loop stops at once.
        self._wake_read, self._wake_write = socket.socketpair()
        self.listeners = listen_sockets(host, port)
        self.addresses = [_peer_text(s.getsockname()) for s in self.listeners]
        self.thread = threading.Thread(target=self._accept_loop,
                                       name="barrier", daemon=True)
        self.thread.start()

    # -- connections -------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                ready, _, _ = select.select(
                    self.listeners + [self._wake_read], [], [], ACCEPT_POLL)
            except (OSError, ValueError):
                return  # closed
            if self._wake_read in ready:
                return
            for listener in ready:
                try:
                    sock, peer = listener.accept()
                except OSError:
                    continue
                self._admit(sock, _peer_text(peer))

    def _admit(self, sock: socket.socket, peer: str) -> None:
        """Serves a new connection in a thread of its own, within the cap:
        when full, the oldest unauthenticated connection makes room (or, if
        every slot holds an authenticated node, the new one is closed)."""
        with self.conn_lock:
            if len(self.connections) >= self.max_connections:
                idle = [c for c in self.connections if not c.authenticated]
                if not idle:
                    sock.close()
                    self._reject("full", f"closed a connection from {peer}: "
                                 f"all {self.max_connections} connections "
                                 "are held by authenticated nodes")
                    return
                victim = min(idle, key=lambda c: c.started)
                self.connections.remove(victim)
                victim.drop()
                self._reject("evicted", f"at {self.max_connections} "
                             f"connections: closed the oldest "
                             f"unauthenticated one, from {victim.peer}")
            conn = _Connection(sock, peer)
            self.connections.append(conn)
        threading.Thread(target=self._serve, args=(conn,), daemon=True,
                         name=f"barrier {peer}").start()

    def _reject(self, kind: str, text: str) -> None:
        """Logs a dropped connection or message: the first LOG_FIRST of a
        kind, then every 100th with the count."""
        n = self.rejected[kind] = self.rejected.get(kind, 0) + 1
        if n <= LOG_FIRST or n % 100 == 0:
            more = f" ({n} so far)" if n > LOG_FIRST else ""
            self.log(f"barrier: {text}{more}")

    def _read_line(self, conn: _Connection) -> bytes:
        """One line, complete within the idle timeout of connecting."""
        data = b""
        while not data.endswith(b"\n"):
            left = conn.started + self.idle_timeout - time.monotonic()
            if left <= 0:
                raise TimeoutError("idle")
            conn.sock.settimeout(left)
            chunk = conn.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
            if len(data) > MAX_LINE:
                raise ValueError("line too long")
        return data

    def _send(self, conn: _Connection, message: dict) -> None:
        conn.sock.settimeout(self.idle_timeout)
        conn.sock.sendall((json.dumps(message) + "\n").encode("utf-8"))

    def _serve(self, conn: _Connection) -> None:
        try:
            self._exchange(conn)
        except (OSError, ValueError, TimeoutError):
            pass  # idle, closed, evicted or garbled: nothing changed
        finally:
            with self.conn_lock:
                if conn in self.connections:
                    self.connections.remove(conn)
            try:
                conn.sock.close()
            except OSError:
                pass

    def _exchange(self, conn: _Connection) -> None:
        """Challenge, authenticated request, authenticated reply."""
        server_nonce = auth.new_nonce()
        self._send(conn, {"barrier": auth.PROTOCOL,
                          "challenge": server_nonce,
                          "secret": not self.key.open})
        try:
            line = self._read_line(conn)
        except TimeoutError:
            self._reject("idle", f"closed a connection from {conn.peer}: no "
                         f"request within {self.idle_timeout:g} s")
            raise
        try:
            envelope = json.loads(line.decode("utf-8"))
            body, client_nonce = envelope["body"], envelope["nonce"]
            mac = envelope.get("mac")
            if not isinstance(client_nonce, str) or \
                    not _HEX_NONCE.match(client_nonce):
                raise ValueError("bad nonce")
        except (ValueError, UnicodeDecodeError, KeyError, TypeError,
                AttributeError):
            self._reject("garbled", f"dropped an unreadable message from "
                         f"{conn.peer}")
            return
        if not auth.verify(self.key.key, "request", server_nonce,
                           client_nonce, body, mac):
            claim = re.search(r'"node":\s*(-?\d+)', body or "")
            self._reject("auth", "dropped a message from " + conn.peer
                         + (f" (claiming node {claim.group(1)})" if claim
                            else "")
                         + ": authentication failed (a stranger, or a node "
                         "with another key; this node's key: "
                         f"{self.key.brief})")
            self._send(conn, {"ok": False, "auth_failed": True,
                              "error": "authentication failed: node 0's "
                              "barrier " + ("uses a secret"
                                            if not self.key.open else
                                            "is open (no secret there)"),
                              "key": self.key.brief})
            return
        conn.authenticated = True
        asker = None
        try:
            request = json.loads(body)
            op = request.get("op")
            asker = request.get("node")
            if op == "meet":
                reply, rnd, node = self._meet(request)
            elif op == "peek":
                reply, rnd, node = self._peek(request), None, None
            elif op == "leave":
                reply, rnd, node = self._leave(request), None, None
            else:
                reply, rnd, node = {"ok": False, "error": f"unknown op {op!r}",
                                    "fatal": True}, None, None
        except (ValueError, AttributeError) as e:
            reply, rnd, node = {"ok": False, "fatal": True,
                                "error": f"bad barrier request: {e}"}, \
                None, None
        text = json.dumps(reply)
        self._send(conn, {"nonce": client_nonce, "body": text,
                          "mac": auth.tag(self.key.key, "reply", server_nonce,
                                          client_nonce, text)})
        if rnd is not None and reply.get("ok"):
            with self.cond:
                rnd.delivered.add(node)
                self.cond.notify_all()
        if reply.get("left") and isinstance(asker, int):
            with self.cond:
                self.told.add(asker)
                self.cond.notify_all()

    # -- request handling --------------------------------------------------

    def _check_node(self, request) -> int:
        node = request.get("node")
        if not isinstance(node, int) or not 0 <= node < self.num_nodes:
            raise _Refused(f"node index {node!r} is outside 0.."
                           f"{self.num_nodes - 1}")
        self.last_seen[node] = time.monotonic()
        instance = request.get("instance")
        known = self.members.setdefault(node, instance)
        if known != instance:
            raise _Refused(
                f"a second launcher joined as {self.describe(node)} (index "
                f"{node}): two machines claim that index, or that node's "
                "script was restarted; check TASK_INDEX / the node list on "
                "each machine and start all nodes afresh",
                fatal_all=True)
        payload = request.get("payload")
        if request.get("plan") is None and request.get("round") == "hello" \
                and isinstance(payload, dict) and payload.get("cannot_run"):
            return node  # it cannot plan; it comes to say why (see Client)
        if request.get("plan") != self.plan:
            who = self.describe(node)
            raise _Refused(
                f"{who} runs a different plan than node 0: "
                f"{plan_difference(self.plan, request.get('plan'), who)}; "
                "start every node with the same settings (DATA_DIR, PYTHON, "
                "GPU_IDS and the timeouts may differ)", fatal_all=True)
        return node

    def _seen(self, node: int) -> float:
        """Seconds since a node was last heard from (0 while it waits here)."""
        if self.waiting.get(node):
            return 0.0
        last = self.last_seen.get(node)
        return float("inf") if last is None else time.monotonic() - last

    def _meet(self, request):
        name = str(request.get("round"))
        timeout = float(request.get("timeout") or 0)
        stale_after = request.get("stale_after")
        with self.cond:
            try:
                node = self._check_node(request)
            except _Refused as e:
                if e.fatal_all and self.fatal is None:
                    self.fatal = str(e)
                    self.cond.notify_all()
                return {"ok": False, "error": str(e), "fatal": True}, \
                    None, None
            rnd = self.rounds.setdefault(name, _Round())
            rnd.payloads[node] = request.get("payload")
            if len(rnd.payloads) == self.num_nodes:
                rnd.completed = True
            self.cond.notify_all()
            deadline = time.monotonic() + timeout
            self.waiting[node] = self.waiting.get(node, 0) + 1
            gone: List[int] = []
            leavers: Dict[int, str] = {}
            try:
                while not rnd.completed and self.fatal is None:
                    leavers = self._departed(rnd, node)
                    if leavers:
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    if stale_after is not None:
                        # A node seen before but silent since: its launcher
                        # stopped (only nodes seen before: late starters wait).
                        gone = [i for i in range(self.num_nodes)
                                if i not in rnd.payloads and i in
                                self.last_seen and self._seen(i) > stale_after]
                        if gone:
                            break
                    self.cond.wait(min(left, 1.0))
            finally:
                self.waiting[node] -= 1
                self.last_seen[node] = time.monotonic()
            if leavers and not rnd.completed:
                return {"ok": False, "round": name, "missing": sorted(leavers),
                        "error": f"at '{name}': " + "; ".join(
                            leavers.values()),
                        "left": {str(k): v for k, v in leavers.items()}}, \
                    None, None
            if gone:
                missing = [i for i in range(self.num_nodes)
                           if i not in rnd.payloads]
                return {"ok": False, "round": name, "missing": missing,
                        "error": f"at '{name}': " + ", ".join(
                            f"{self.describe(i)} has not been heard from for "
                            f"{self._seen(i):.0f} s" for i in gone)
                        + "; its launcher seems to have stopped"}, None, None
            if self.fatal is not None:
                return {"ok": False, "error": self.fatal, "fatal": True}, \
                    None, None
            if not rnd.completed:
                missing = [i for i in range(self.num_nodes)
                           if i not in rnd.payloads]
                return {"ok": False, "round": name, "missing": missing,
                        "error": f"waited {timeout:.0f} s at '{name}'; "
                                 "not arrived: " + ", ".join(
                                     self.describe(i) for i in missing)}, \
                    None, None
            return {"ok": True, "round": name,
                    "payloads": {str(k): v
                                 for k, v in rnd.payloads.items()}}, \
                rnd, node

    def silent(self, round_name: str, after: float,
               exclude: int) -> List[tuple]:
        """(node, seconds) of each node heard from before, not arrived at
        `round_name` and silent for longer than `after` seconds (its
        launcher stopped), but `exclude` (the asking node)."""
        with self.cond:
            rnd = self.rounds.get(round_name)
            arrived = rnd.payloads if rnd is not None else {}
            return [(i, self._seen(i)) for i in range(self.num_nodes)
                    if i != exclude and i not in arrived and
                    i not in self.left and
                    i in self.last_seen and self._seen(i) > after]

    def _peek(self, request):
        with self.cond:
            node = request.get("node")
            if isinstance(node, int):
                self.last_seen[node] = time.monotonic()
            rnd = self.rounds.get(str(request.get("round")))
            payloads = {} if rnd is None else dict(rnd.payloads)
            reply = {"ok": True, "fatal_error": self.fatal,
                     "payloads": {str(k): v for k, v in payloads.items()}}
            leavers = self._departed(rnd, node)
            if leavers:
                reply["left"] = {str(k): v for k, v in leavers.items()}
            return reply

    # -- leaving -------------------------------------------------------------

    def _departed(self, rnd: Optional[_Round], asker: Any) -> Dict[int, str]:
        """The nodes that left and had not arrived at `rnd` (None: a round
        no node has reached), but the asker: {node: the line naming it}
        (the asker's own request, still waiting after it left, too)."""
        arrived = rnd.payloads if rnd is not None else {}
        return {i: text for i, text in self.left.items()
                if i == asker or i not in arrived}

    def departed(self, round_name: str, exclude: int) -> List[str]:
        """The lines naming each node that left the sweep and had not
        arrived at `round_name`, but `exclude` (the asking node)."""
        with self.cond:
            rnd = self.rounds.get(round_name)
            return [text for i, text in self._departed(rnd, None).items()
                    if i != exclude]

    def _leave(self, request):
        """A launcher leaves (a signal stopped it): from the launcher that
        joined as that node only; anything else changes nothing."""
        node = request.get("node")
        with self.cond:
            if not isinstance(node, int) or \
                    self.members.get(node) is None or \
                    self.members[node] != request.get("instance"):
                return {"ok": False, "error": f"node {node!r} did not join "
                        "this sweep as that launcher; nothing changed"}
            self._depart(node, request.get("reason"))
        return {"ok": True}

    def leave(self, node: int, reason: str) -> None:
        """`node` (node 0's own launcher) leaves the sweep because of
        `reason`: every meet waiting for it answers at once, naming it."""
        with self.cond:
            self._depart(node, reason)

    def _depart(self, node: int, reason: Any) -> None:
        why = " ".join(str(reason or "no reason given").split())
        if len(why) > MAX_REASON:
            why = why[:MAX_REASON - 3] + "..."
        self.left[node] = f"{self.describe(node)} left the sweep: {why}"
        self.told = set()
        self.left_at = time.monotonic()
        self.cond.notify_all()

    def untold(self) -> List[int]:
        """The nodes heard from before, still in the sweep, that no reply
        has told of the latest departure yet (none when no node left)."""
        with self.cond:
            return self._untold()

    def heard_from(self, exclude: int) -> List[int]:
        """The nodes that have reached the barrier, but `exclude`."""
        with self.cond:
            return sorted(i for i in self.last_seen if i != exclude)

    def _untold(self) -> List[int]:
        if not self.left:
            return []
        return sorted(i for i in self.last_seen
                      if i not in self.left and i not in self.told)

    # -- shutdown ------------------------------------------------------------

    def close(self, linger: float = 10.0) -> None:
        """Stops serving once every completed round reached every node
        still in the sweep and, after a node left, every node heard from
        was told (for at most tell_linger s after it left)."""
        deadline = time.monotonic() + linger
        with self.cond:
            while time.monotonic() < deadline:
                staying = set(range(self.num_nodes)) - set(self.left)
                pending = [n for n, r in self.rounds.items() if r.completed
                           and not staying <= r.delivered]
                untold = self._untold() and time.monotonic() < \
                    self.left_at + self.tell_linger
                if not pending and not untold:
                    break
                self.cond.wait(0.2)
        self.stopping.set()
        try:
            self._wake_write.send(b"x")
        except OSError:
            pass  # closed twice: the loop has stopped already
        self.thread.join(5)
        for sock in (*self.listeners, self._wake_read, self._wake_write):
            sock.close()
        with self.conn_lock:
            for conn in self.connections:
                if not conn.authenticated:
                    conn.drop()


# The plan field naming the suite's version (plan.py's Plan.digest): a plan
# without it comes from a launcher older than that field.
VERSION_FIELD = "official_bench"


def plan_difference(ours: Any, theirs: Any, who: str) -> str:
    """What differs between node 0's plan and another node's: the fields
    whose values differ, when both are field mappings (plan.py's
    Plan.digest). A plan that names no version, where ours does (an older
    launcher's: a summary string, or a mapping without the field), is an
    older official_bench: said so, with ours, and only the fields both
    name that differ (the others are the versions' own). Two plans of
    neither kind are given whole."""
    name = who.split(" (")[0]
    mine = ours.get(VERSION_FIELD) if isinstance(ours, dict) else None
    if mine is not None and not (isinstance(theirs, dict) and
                                 VERSION_FIELD in theirs):
        older = (f"{name} runs an older official_bench (its plan names no "
                 f"version) and node 0 runs {mine}: update the checkout "
                 f"on {name}")
        if not isinstance(theirs, dict):
            return older
        both = [f"{k}: node 0 {ours[k]}, {name} {theirs[k]}"
                for k in ours if k in theirs and ours[k] != theirs[k]]
        return "; ".join([older] + both)
    if not (isinstance(ours, dict) and isinstance(theirs, dict)):
        return f"node 0: {ours}; {who}: {theirs}"
    keys = list(ours) + [k for k in theirs if k not in ours]
    return "; ".join(
        f"{k}: node 0 {ours.get(k, '(unset)')}, {name} "
        f"{theirs.get(k, '(unset)')}"
        for k in keys if ours.get(k) != theirs.get(k))


class _Refused(Exception):
    """The coordinator refuses a request (a bad node index, a second
    launcher on one index, another plan); `fatal_all`: every node stops."""

    def __init__(self, message: str, fatal_all: bool = False):
        super().__init__(message)
        self.fatal_all = fatal_all


class _AuthFailed(Exception):
    """The coordinator refused this node's key, or its reply did not carry
    this node's key; owns what to do about it (`fix`)."""

    def __init__(self, message: str, fix: str = ""):
        super().__init__(message)
        self.fix = fix or auth.SECRET_FIX


class Client:
    """One launcher's side: meet and peek at node 0's coordinator."""

    def __init__(self, host: str, port: int, node: int, instance: str,
                 plan: Any, coordinator_name: str = "node 0",
                 key: auth.BarrierKey = auth.OPEN,
                 log: Optional[Callable[[str], None]] = None,
                 port_from: str = ""):
        self.host, self.port = host, port
        # How the port was chosen, for the "did not answer" line.
        self.port_from = port_from
        self.node, self.instance, self.plan = node, instance, plan
        self.coordinator_name = coordinator_name
        self.key = key
        # Told once per outage that the coordinator stopped answering.
        self.log = log
        # Since when the coordinator, answering before, has not answered
        # (meet and peek alike; None while it answers), and why.
        self.unreachable_since: Optional[float] = None
        self.last_error = "no answer"
        # Nodes the coordinator said left the sweep: {node: its line}.
        self.departed: Dict[int, str] = {}

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @staticmethod
    def _read_line(f, what: str) -> dict:
        line = f.readline(MAX_LINE + 1)
        if not line.endswith(b"\n"):
            raise ConnectionError(f"connection closed by the coordinator "
                                  f"before its {what}" if not line else
                                  f"{what} too long or cut short")
        return json.loads(line.decode("utf-8"))

    def _request(self, request: dict, timeout: float) -> dict:
        """One authenticated exchange (the wire format: Coordinator)."""
        with socket.create_connection((self.host, self.port),
                                      timeout=min(timeout, 5.0)) as s:
            s.settimeout(min(timeout, IDLE_TIMEOUT + 5.0))
            with s.makefile("rb") as f:
                return self._exchange(s, f, request, timeout)

    def _exchange(self, s: socket.socket, f, request: dict,
                  timeout: float) -> dict:
        """Challenge in, tagged request out, tagged reply in (verified)."""
        hello = self._read_line(f, "challenge")
        server_nonce = hello.get("challenge")
        if hello.get("barrier") != auth.PROTOCOL or \
                not isinstance(server_nonce, str):
            raise ConnectionError(f"not an official_bench barrier: "
                                  f"{str(hello)[:80]}")
        client_nonce = auth.new_nonce()
        body = json.dumps(request)
        s.sendall((json.dumps({
            "nonce": client_nonce, "body": body,
            "mac": auth.tag(self.key.key, "request", server_nonce,
                            client_nonce, body)}) + "\n").encode("utf-8"))
        s.settimeout(timeout)
        envelope = self._read_line(f, "reply")
        if envelope.get("auth_failed"):
            theirs = envelope.get("key")
            if not isinstance(theirs, str):
                raise _AuthFailed(
                    f"{envelope.get('error', 'authentication failed')}"
                    f", this node's key: {self._key_text()}")
            raise _AuthFailed(
                f"authentication failed: node 0's key: {theirs[:200]}; this "
                f"node's key: {self.key.brief}", self.key.mismatch_fix(
                    theirs))
        if not auth.verify(self.key.key, "reply", server_nonce, client_nonce,
                           envelope.get("body"), envelope.get("mac")):
            raise _AuthFailed(
                "authentication failed: the reply does not carry this "
                f"node's key ({self._key_text()}); node 0's barrier "
                + ("uses a secret" if hello.get("secret") else
                   "is open (no secret there)")
                + ", or something else answers on that port")
        return json.loads(envelope["body"])

    def _key_text(self) -> str:
        return "none (open)" if self.key.open else self.key.source

    def _auth_error(self, round_name: str, e: "_AuthFailed"
                    ) -> BarrierError:
        return BarrierError(
            f"at '{round_name}': barrier {e} (barrier of "
            f"{self.coordinator_name} at {self.address}). {e.fix}",
            fatal=True)

    def meet(self, round_name: str, payload: Any, timeout: float,
             stale_after: Optional[float] = None,
             lost_after: Optional[float] = None) -> Dict[int, Any]:
        """Blocks until all nodes sent `round_name`; returns their payloads.

        `stale_after`: give up early when a node that was heard from before
        has been silent that long (its launcher stopped). `lost_after`: give
        up early when the coordinator, reachable before, has not answered for
        that long.
        """
        start = time.monotonic()
        deadline = start + timeout
        delay = 0.2
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            lost = self.lost(lost_after)
            if lost:
                raise BarrierError(f"at '{round_name}': {lost}",
                                   missing=sorted(self.departed) or [0])
            request = {"op": "meet", "round": round_name, "node": self.node,
                       "instance": self.instance, "plan": self.plan,
                       "payload": payload, "timeout": left,
                       "stale_after": stale_after}
            try:
                reply = self._request(request, left + 15.0)
            except _AuthFailed as e:
                raise self._auth_error(round_name, e)
            except (OSError, ValueError) as e:
                self._failed(e, round_name, lost_after)
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, 2.0)
                continue
            self._answered()
            self._note_left(reply)
            if reply.get("ok"):
                return {int(k): v for k, v in reply["payloads"].items()}
            raise BarrierError(reply.get("error", "refused"),
                               missing=reply.get("missing"),
                               fatal=bool(reply.get("fatal")))
        raise BarrierError(
            f"waited {timeout:.0f} s at '{round_name}' but the barrier of "
            f"{self.coordinator_name} at {self.address} did not answer (last "
            f"error: {self.last_error}); is the script running there?"
            + (f" {self.port_from}" if self.port_from else ""),
            missing=[0])

    contacted = False

    def _failed(self, error: Exception, round_name: str,
                lost_after: Optional[float]) -> None:
        """A request got no answer: when the coordinator answered before,
        the outage starts (said once, with how long it is waited for)."""
        self.last_error = getattr(error, "strerror", None) or str(error) \
            or type(error).__name__
        if not self.contacted:
            return
        if self.unreachable_since is not None:
            return  # the outage was said when it started
        self.unreachable_since = time.monotonic()
        if self.log is not None:
            wait = "" if lost_after is None else (
                f"; giving up on its launcher after {lost_after:.0f} s "
                "without an answer")
            self.log(f"barrier: {self.coordinator_name} at {self.address} "
                     f"does not answer at '{round_name}' "
                     f"({self.last_error}){wait}")

    def _answered(self) -> None:
        self.contacted = True
        if self.unreachable_since is not None and self.log is not None:
            self.log(f"barrier: {self.coordinator_name} at {self.address} "
                     "answers again")
        self.unreachable_since = None

    def _note_left(self, reply: dict) -> None:
        """Keeps the nodes a reply says left the sweep."""
        left = reply.get("left")
        if not isinstance(left, dict):
            return
        for k, text in left.items():
            try:
                self.departed[int(k)] = str(text)[:2 * MAX_REASON]
            except ValueError:
                continue

    def lost(self, lost_after: Optional[float]) -> Optional[str]:
        """Why another launcher is gone: the nodes the coordinator said
        left the sweep, or the coordinator's launcher that answered before
        and has not for longer than `lost_after` seconds; else None."""
        if self.departed:
            return "; ".join(text for _, text in
                             sorted(self.departed.items()))
        if lost_after is None or self.unreachable_since is None:
            return None
        silent = time.monotonic() - self.unreachable_since
        if silent <= lost_after:
            return None
        return (f"the barrier on {self.coordinator_name} at {self.address} "
                f"stopped answering {silent:.0f} s ago (last error: "
                f"{self.last_error}); its launcher seems to have stopped")

    def peek(self, round_name: str, timeout: float = 5.0,
             lost_after: Optional[float] = None
             ) -> Optional[Dict[int, Any]]:
        """Who has arrived at a round so far; None when unreachable
        (`lost_after`: the wait the outage line names, as meet's)."""
        try:
            reply = self._request({"op": "peek", "round": round_name,
                                   "node": self.node}, timeout)
        except (OSError, ValueError, _AuthFailed) as e:
            self._failed(e, round_name, lost_after)
            return None
        self._answered()
        if not reply.get("ok"):
            return None
        self._note_left(reply)
        return {int(k): v for k, v in reply.get("payloads", {}).items()}

    def leave(self, reason: str, timeout: float = LEAVE_TIMEOUT
              ) -> Optional[str]:
        """Tells the coordinator this launcher leaves the sweep and why
        (best effort, at most `timeout` s: a thread, so a connect or read
        that hangs is left behind). None when told, else why not."""
        box: Dict[str, Any] = {}

        def send() -> None:
            try:
                box["reply"] = self._request(
                    {"op": "leave", "node": self.node,
                     "instance": self.instance, "reason": reason}, timeout)
            except Exception as e:  # best effort: any failure is a reason
                box["error"] = getattr(e, "strerror", None) or str(e) or \
                    type(e).__name__

        thread = threading.Thread(target=send, daemon=True,
                                  name="barrier leave")
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            return f"no answer within {timeout:g} s"
        if "error" in box:
            return box["error"]
        reply = box.get("reply") or {}
        return None if reply.get("ok") else str(reply.get("error"))
