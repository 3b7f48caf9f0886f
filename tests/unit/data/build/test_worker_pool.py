"""The builder's worker pool: its stop() is quiet about the one CPython 3.11
race it provokes, and only about that."""

import concurrent.futures
import os
import signal
import struct
import subprocess
import sys
import threading
import time

import pytest

from official_bench.data.build import worker_pool
from support.helpers import REPO, child_env, importable_name


def _raising_thread(exc):
    def body():
        raise exc
    return threading.Thread(target=body)


def _reported(manager, thread):
    """Runs `thread` (which raises) under the guard for `manager`; returns
    the exception types that reached the previous excepthook."""
    seen = []
    previous = threading.excepthook
    threading.excepthook = lambda args: seen.append(args.exc_type)
    try:
        with worker_pool._quiet_broken_pool_race(manager):
            thread.start()
            thread.join()
    finally:
        threading.excepthook = previous
    return seen


def test_invalid_state_from_the_manager_thread_is_silenced():
    manager = _raising_thread(
        concurrent.futures.InvalidStateError("CANCELLED"))
    assert _reported(manager, manager) == []


def test_other_errors_and_other_threads_are_still_reported():
    manager = _raising_thread(ValueError("real bug"))
    assert _reported(manager, manager) == [ValueError]
    other = _raising_thread(concurrent.futures.InvalidStateError("x"))
    idle_manager = threading.Thread(target=lambda: None)
    assert _reported(idle_manager, other) == [
        concurrent.futures.InvalidStateError]


def test_guard_restores_the_previous_hook():
    before = threading.excepthook
    with worker_pool._quiet_broken_pool_race(None):
        assert threading.excepthook is not before
    assert threading.excepthook is before


def test_stop_ends_workers_with_queued_work_and_reports_nothing():
    """Tasks queued behind busy workers: stop() returns within its grace
    period, every worker is gone, and no thread traceback is printed."""
    seen = []
    previous = threading.excepthook
    threading.excepthook = lambda args: seen.append(args.exc_type)
    try:
        pool = worker_pool.WorkerPool(2)
        futures = [pool.submit(time.sleep, 30) for _ in range(6)]
        deadline = time.monotonic() + 60
        while len(pool.worker_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        processes = list(pool.executor._processes.values())
        started = time.monotonic()
        pool.stop(grace_seconds=1.0)
        assert time.monotonic() - started < 10
        assert [p for p in processes if p.is_alive()] == []
        assert all(f.done() for f in futures)
    finally:
        threading.excepthook = previous
    assert seen == []


def _die_sending_a_result():
    """In a worker: write the start of a result message, then die, as a
    worker killed while sending a shard's records does."""
    frame = sys._getframe()
    while frame is not None and "result_queue" not in frame.f_locals:
        frame = frame.f_back
    writer = frame.f_locals["result_queue"]._writer
    os.write(writer.fileno(), struct.pack("!i", 1 << 20) + b"half a message")
    os.kill(os.getpid(), signal.SIGKILL)


def _stop_after_a_worker_died_mid_result():
    """Run in a child process (a hang there must not hang pytest)."""
    pool = worker_pool.WorkerPool(1)
    pool.submit(_die_sending_a_result)
    deadline = time.monotonic() + 60
    while not pool.exited_workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    (_, code), = pool.exited_workers()
    assert code == -signal.SIGKILL, code
    manager = pool.executor._executor_manager_thread
    pool.stop(grace_seconds=1.0)
    assert not manager.is_alive(), "manager thread still waiting"
    print("stopped")


def test_stop_ends_a_pool_whose_worker_died_mid_result():
    """The manager thread, stuck on half a message, ends on stop(), so the
    process can exit (it used to hang in interpreter exit after Ctrl-C)."""
    code = (f"import {importable_name(__file__)} as t; "
            "t._stop_after_a_worker_died_mid_result()")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, env=child_env(),
            capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the process did not exit after stop(): {e.stderr}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "stopped"
