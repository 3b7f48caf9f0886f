"""official_bench/deploy/pod.py's signals: the pod's command is its
container's PID 1, which the kernel spares every signal it has no handler
for. Run here as PID 1 of a new PID namespace (`unshare --pid --fork`, as
root; skipped with unshare's reason where it is refused), SIGTERM and
SIGINT end the DNS wait within 2 s with 128 + N (also while the resolver
hangs), reach the sweep, and end the hold with the sweep's status. In the
test's own process: a signal kept for the sweep stops it from starting."""

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from official_bench.contracts.exit_status import INTERRUPTED, TERMINATED
from official_bench.deploy import pod
from support.helpers import REPO, child_env

PROMPT = 2.0  # s from the signal to the exit ("within 2 s", issue 45)
DNS_WAIT = dict(NODES="localhost:2222,ob-never-1.invalid:2222",
                JOB_COMPLETION_INDEX="0", OB_DNS_TIMEOUT="45")
ENTRY = [sys.executable, "-m", "official_bench.deploy.pod"]


def unshare_refusal(*namespaces):
    """Why `unshare --pid --fork` (with `namespaces`) cannot run here, or
    None."""
    if shutil.which("unshare") is None:
        return "no unshare command here"
    argv = ["unshare", "--pid", "--fork", *namespaces, "true"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if p.returncode:
        return f"{' '.join(argv)} refused: {p.stderr.strip()}"
    return None


class PidOne:
    """`argv` as PID 1 of a new PID namespace, its stdout read line by
    line; `pid` is that PID 1 as this namespace sees it."""

    def __init__(self, argv, env, *namespaces):
        reason = unshare_refusal(*namespaces)
        if reason:
            pytest.skip(reason)
        self.proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--kill-child", *namespaces,
             *argv], cwd=REPO, env=child_env(env), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, words, timeout=120):
        deadline = time.monotonic() + timeout
        while not any(words in line for line in self.seen):
            left = deadline - time.monotonic()
            assert left > 0, f"no {words!r} in {self.seen}"
            try:
                self.seen.append(self.lines.get(timeout=left))
            except queue.Empty:
                pass

    @property
    def pid(self):
        path = f"/proc/{self.proc.pid}/task/{self.proc.pid}/children"
        with open(path) as f:
            (child,) = f.read().split()
        return int(child)

    def stop_with(self, signum):
        """Sends `signum` to PID 1: (exit status, seconds to exit)."""
        start = time.monotonic()
        os.kill(self.pid, signum)
        try:
            status = self.proc.wait(timeout=60)
        finally:
            self.proc.kill()
        return status, time.monotonic() - start


@pytest.fixture
def own_handlers():
    """The test process's SIGTERM and SIGINT handlers, put back after."""
    old = {sig: signal.getsignal(sig) for sig in pod.SIGNALS}
    yield
    for sig, handler in old.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, TERMINATED),
                                           (signal.SIGINT, INTERRUPTED)])
def test_a_signal_ends_the_dns_wait_of_pid_one_at_once(signum, status):
    entry = PidOne(ENTRY, DNS_WAIT)
    entry.wait_for("waiting up to 45 s for DNS names: ob-never-1.invalid")
    rc, seconds = entry.stop_with(signum)
    assert rc == status and seconds < PROMPT, (rc, seconds)
    name = signal.Signals(signum).name
    assert entry.proc.stderr.read() == \
        f"{pod.PROG}: stopped by {name}; no sweep started\n"


BLACKHOLE = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
print("blackhole ready", flush=True)
s.recvfrom(512)
print("query held", flush=True)
time.sleep(600)
"""


def test_a_sigterm_ends_pid_one_while_the_resolver_hangs(tmp_path):
    """A name server that never answers (timeout:30): getaddrinfo does not
    return to Python for 30 s, which would hold the signal's handler."""
    if shutil.which("ip") is None:
        pytest.skip("no ip command to bring up the namespace's loopback")
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions timeout:30 "
                      "attempts:1\n")
    (tmp_path / "blackhole.py").write_text(BLACKHOLE)
    script = (f"mount --bind {resolv} /etc/resolv.conf && "
              "ip link set lo up && "
              f"{{ {sys.executable} {tmp_path / 'blackhole.py'} & }} && "
              "sleep 0.5 && exec " + " ".join(ENTRY))
    entry = PidOne(["sh", "-c", script],
                   dict(DNS_WAIT, NODES="ob-never-1.invalid:2222"),
                   "--net", "--mount")
    entry.wait_for("query held")
    time.sleep(0.2)  # the lookup is blocked inside getaddrinfo
    rc, seconds = entry.stop_with(signal.SIGTERM)
    assert rc == TERMINATED and seconds < PROMPT, (rc, seconds)


def run_and_hold_code(script, hold):
    return ("import sys; from official_bench.deploy import pod; "
            f"sys.exit(pod.run_and_hold(['bash', '-c', {script!r}], "
            f"{{'PATH': '/usr/bin:/bin'}}, {hold}))")


def test_pid_one_passes_a_sigterm_on_to_the_sweep():
    sweep = ("trap 'echo got-term; exit 7' TERM; echo ready; "
             "while :; do sleep 0.1; done")
    entry = PidOne([sys.executable, "-c", run_and_hold_code(sweep, 0)], {})
    entry.wait_for("ready")
    rc, seconds = entry.stop_with(signal.SIGTERM)
    entry.wait_for("got-term", timeout=5)
    assert rc == 7 and seconds < PROMPT, (rc, seconds)


def test_a_sigterm_ends_the_hold_of_pid_one_with_the_sweeps_status():
    entry = PidOne([sys.executable, "-c",
                    run_and_hold_code("exit 3", 600)], {})
    entry.wait_for("kubectl cp")
    rc, seconds = entry.stop_with(signal.SIGTERM)
    assert rc == 3 and seconds < PROMPT, (rc, seconds)


def test_before_the_sweep_the_first_signal_raises_stopped(own_handlers):
    signals = pod.EntrySignals().install()
    with pytest.raises(pod.Stopped) as stop:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)  # the handler raises within it
    assert stop.value.signum == signal.SIGINT
    os.kill(os.getpid(), signal.SIGTERM)  # a second: kept, not raised
    time.sleep(0.05)
    assert signals.signum == signal.SIGINT


def test_a_signal_kept_for_the_sweep_stops_it_from_starting(
        tmp_path, own_handlers, capsys):
    signals = pod.EntrySignals().install()
    signals.pass_on()
    os.kill(os.getpid(), signal.SIGTERM)  # between start-up and the sweep
    time.sleep(0.05)
    marker = tmp_path / "started"
    assert signals.run(["touch", str(marker)], {"PATH": "/usr/bin:/bin"}) \
        == TERMINATED
    assert not marker.exists()
    assert capsys.readouterr().err == \
        f"{pod.PROG}: stopped by SIGTERM; no sweep started\n"
