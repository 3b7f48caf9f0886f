"""Worker processes that never outlive the process that started them.

The builder converts images in a ProcessPoolExecutor. If its main process is
killed (SIGKILL, OOM killer) the executor cannot clean up, and orphaned
workers would keep converting and race with a re-run. So each worker:
- asks Linux to SIGKILL it when its parent dies (prctl PR_SET_PDEATHSIG),
  then checks the parent is still the one that started it (it may have died
  before the prctl call, in which case the worker exits at once);
- ignores SIGINT: a Ctrl-C reaches the whole process group, and the main
  process, not each worker, decides how to stop.
For SIGTERM/SIGINT of the main process, `stop()` cancels what is queued and
terminates the workers (SIGKILL after a grace period) instead of waiting
for them, which the executor's own shutdown would do.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import signal
import threading
import time
from typing import Callable, Optional, Sequence

from official_bench.host.processes import die_with_parent

WORKER_ENV = "OFFICIAL_BENCH_BUILDER_WORKER"
# Spawn, not fork: the main process has TensorFlow's threads running.
SPAWN = multiprocessing.get_context("spawn")


def _init_worker(parent_pid: int, initializer: Optional[Callable],
                 initargs: Sequence) -> None:
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ[WORKER_ENV] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if initializer is not None:
        initializer(*initargs)


class _quiet_broken_pool_race:
    """Silences one known CPython 3.11 race while the pool is stopped.

    When workers die while futures are queued, the executor's manager thread
    marks the pool broken and calls `set_exception` on each queued future; if
    one was cancelled meanwhile, 3.11 raises InvalidStateError there and
    prints a thread traceback (3.12 ignores it). The stop is deliberate, so
    that traceback would only look like a crash. Anything else, or from any
    other thread, is still reported.
    """

    def __init__(self, manager: Optional[threading.Thread]):
        self.manager = manager
        self.previous = None

    def _hook(self, args) -> None:
        if (args.thread is self.manager and args.exc_type is
                concurrent.futures.InvalidStateError):
            return
        self.previous(args)

    def __enter__(self):
        self.previous = threading.excepthook
        threading.excepthook = self._hook
        return self

    def __exit__(self, *exc) -> None:
        threading.excepthook = self.previous


def _unblock_result_reader(results) -> None:
    """Lets the executor's manager thread end after its workers were killed.

    A worker killed while sending a large result (a shard's records) leaves
    half a message in the result pipe. The manager thread then waits for the
    rest forever, and interpreter exit joins that thread: the builder hangs
    after Ctrl-C. With the workers gone this process holds the pipe's last
    write end; closing it turns the wait into end-of-file, which the manager
    treats as a broken pool and exits.
    """
    writer = getattr(results, "_writer", None)
    if writer is not None:
        writer.close()


class WorkerPool:
    """A spawn-context ProcessPoolExecutor whose workers die with us."""

    def __init__(self, num_workers: int,
                 initializer: Optional[Callable] = None,
                 initargs: Sequence = ()):
        self.executor = concurrent.futures.ProcessPoolExecutor(
            max(1, num_workers), mp_context=SPAWN,
            initializer=_init_worker,
            initargs=(os.getpid(), initializer, tuple(initargs)))
        self._started = {}

    def submit(self, fn, *args) -> concurrent.futures.Future:
        future = self.executor.submit(fn, *args)
        # ProcessPoolExecutor keeps its workers in `_processes` (pid ->
        # Process), starts them as work arrives, forgets them once it finds
        # its pool broken, and offers no public way to end them without
        # waiting: keep our own table of every worker it started.
        self._started.update(getattr(self.executor, "_processes", None) or {})
        return future

    def worker_pids(self):
        """The live workers' pids."""
        return [p.pid for p in self._started.values() if p.is_alive()]

    def exited_workers(self):
        """(pid, exit code) of workers that ended while the pool runs.

        Workers end only when the pool is closed, so one that has exited was
        killed (the out-of-memory killer) or crashed. The executor notices
        that too, unless the worker died halfway through sending a result:
        then the executor waits for the rest forever, and so would we.
        """
        return [(p.pid, p.exitcode) for p in self._started.values()
                if p.exitcode is not None]

    def wait_all_exited(self, timeout: float) -> None:
        """After the executor found its pool broken it ends every worker;
        this waits (at most `timeout`) until each exit status is readable,
        which may lag the report (the executor's own thread reaps them)."""
        deadline = time.monotonic() + timeout
        while (any(p.exitcode is None for p in self._started.values())
               and time.monotonic() < deadline):
            time.sleep(0.02)

    def close(self) -> None:
        """Normal end: every task is done, wait for the workers to exit."""
        self.executor.shutdown(wait=True)

    def stop(self, grace_seconds: float = 2.0) -> None:
        """Interrupted: drop queued tasks, SIGTERM the workers, SIGKILL any
        still alive after `grace_seconds`, and reap them."""
        processes = list(self._started.values())
        manager = getattr(self.executor, "_executor_manager_thread", None)
        results = getattr(self.executor, "_result_queue", None)
        with _quiet_broken_pool_race(manager):
            self.executor.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                if process.is_alive():
                    process.terminate()
            deadline = time.monotonic() + grace_seconds
            for process in processes:
                process.join(max(0.0, deadline - time.monotonic()))
                if process.is_alive():
                    process.kill()
                    process.join(5.0)
            _unblock_result_reader(results)
            if manager is not None:
                manager.join(5.0)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.stop()
