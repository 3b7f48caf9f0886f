"""runtime/watchdog.StartupWatchdog and signals, without a cluster: a
SIGINT or SIGTERM while the trainer waits for its peers (inside C++ that
runs no Python handler) ends it at once with the stop line, by its own
thread (128+N) or, where its main thread holds the GIL as TensorFlow's
wait does, by the watchdog child (the line, then SIGKILL); and at the
block's end Python's handlers are back at the OS level, where a
preemption notifier (XLA's, TensorFlow's) had replaced them in C."""

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from official_bench.contracts import exit_status
from official_bench.runtime import stop_signals
from official_bench.runtime.watchdog import HAND_OVER_SECONDS, StartupWatchdog
from support.helpers import REPO, child_env

# A trainer waiting for a peer that never comes, its handlers the CLI's
# (sigterm_raises; Python's SIGINT), blocked for good in C that signals do
# not interrupt (a mutex locked twice): through ctypes.CDLL the GIL is let
# go, as in jax.distributed's connect; through PyDLL it is kept, as in
# TensorFlow's strategy constructor.
_WAITER = textwrap.dedent("""
    import ctypes, sys
    from official_bench.runtime import stop_signals
    from official_bench.runtime.watchdog import StartupWatchdog
    lib = (ctypes.CDLL if sys.argv[1] == "release" else ctypes.PyDLL)(None)
    mutex = ctypes.create_string_buffer(64)  # PTHREAD_MUTEX_INITIALIZER
    with stop_signals.sigterm_raises(), \\
            StartupWatchdog("worker 1", {"worker 0": "127.0.0.1:1"}, 120,
                            " for jax.distributed at 127.0.0.1:1"):
        print("waiting", flush=True)
        lib.pthread_mutex_lock(mutex)
        lib.pthread_mutex_lock(mutex)
    print("joined", flush=True)
""")


def _stop_while_waiting(how, sig):
    proc = subprocess.Popen(
        [sys.executable, "-c", _WAITER, how], cwd=REPO, env=child_env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout.readline() == "waiting\n"
        time.sleep(0.3)  # the watchdog child started
        proc.send_signal(sig)
        sent = time.monotonic()
        out = proc.communicate(timeout=20)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, time.monotonic() - sent


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_in_a_wait_without_the_gil_ends_it_with_128_plus_n(sig):
    rc, out, took = _stop_while_waiting("release", sig)
    assert rc == exit_status.by_signal(sig), out
    assert took < HAND_OVER_SECONDS, out
    name = signal.Signals(sig).name
    assert out.splitlines()[-1] == (
        f"error: official_bench: stopped by {name} while waiting for "
        "jax.distributed at 127.0.0.1:1; no result written"), out


def test_a_signal_in_a_wait_holding_the_gil_ends_it_by_the_watchdog():
    rc, out, took = _stop_while_waiting("keep", signal.SIGINT)
    assert rc == -signal.SIGKILL, out  # nothing of the trainer's ran
    assert HAND_OVER_SECONDS <= took < HAND_OVER_SECONDS + 8, out
    assert out.splitlines()[-1] == (
        "error: official_bench: stopped by SIGINT while waiting for "
        "jax.distributed at 127.0.0.1:1; no result written"), out


def test_python_handlers_are_back_after_the_wait():
    """A handler replaced in C inside the block (as the preemption
    notifier does; signal.getsignal still shows Python's) is Python's
    again after it."""
    seen = []
    old = signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    libc = ctypes.CDLL(None)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
    try:
        with StartupWatchdog("worker 0", {}, 10):
            libc.signal(signal.SIGTERM, 1)  # SIG_IGN, in C
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # bytecodes for the handler to run between
            pass
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, old)


def test_reclaim_leaves_a_handler_python_did_not_install():
    assert signal.getsignal(signal.SIGINT) is not None
    stop_signals.reclaim_handlers()  # no error, nothing to show
