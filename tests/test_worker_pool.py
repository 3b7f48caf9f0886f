"""The builder's worker pool: its stop() is quiet about the one CPython 3.11
race it provokes, and only about that."""

import concurrent.futures
import threading
import time

from official_bench.data import worker_pool


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
    manager = _raising_thread(concurrent.futures.InvalidStateError("CANCELLED"))
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
