"""Input workers: examples decoded in worker processes, whole batches handed
back through shared memory.

Each of `num_workers` spawned processes (never forked: the trainer holds
JAX's threads) imports its `Source`, calls it with its worker_index and
num_workers, and writes whole batches (uint8 images [B, H, W, C], int32
labels) into shared-memory slots of its own, `slots` each, so at most
num_workers x slots batches are in flight. Batches are handed out
round-robin (batch k from worker k mod n), so a seeded source gives the
same batches in the same order every run; the consumer releases a slot
once it has copied it. A finite source (an evaluation pass) ends each
worker's share with a partial batch: those are joined in the same fixed
order and what is left under a batch is dropped (drop_remainder).

A failure stops the pool with one line (InputWorkerError) naming the worker
and the file: a source's exception (its message), a worker that died (its
signal), a worker with no batch for `timeout` seconds (a dead mount, a
lock). The file is the one the exception names, else the one the worker
said it was opening or reading (records/file_note.py), else the one it
had open when last seen (/proc/PID/fd). close() ends the workers
and unmaps and unlinks the memory, also while another thread is in next()
(a lock keeps the unmapping and next()'s reads of a slot apart; a batch
handed out must be copied before close(), which the consumer orders);
workers die with their parent (host/processes.die_with_parent).
TensorFlow-free.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import dataclasses
import functools
import importlib
import mmap
import multiprocessing
import os
import secrets
import signal
import sys
import threading
import time
from multiprocessing import resource_tracker, shared_memory
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

import numpy as np

from official_bench.config.errors import ConfigError
from official_bench.data.records import file_note, record_problems
from official_bench.host.probes import usable_cores
from official_bench.host.processes import die_with_parent

SPAWN = multiprocessing.get_context("spawn")
SLOTS_PER_WORKER = 2
DEFAULT_TIMEOUT = 300.0
SHM_DIR = "/dev/shm"
# A pool's segments in SHM_DIR: the process that made them and the worker,
# so one left behind names its owner (and a test finds its own).
SHM_PREFIX = "official_bench_"
OURS = "official_bench: "  # how the project's own error lines begin
# The project's errors whose message is already a sentence naming the key
# and the fix: passed on without their class name, as other config errors
# print (an unexpected KeyError keeps its name: it is the information).
SENTENCE_ERRORS = (ConfigError,)
# One thread per worker for the libraries a decoder may use.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS", "OPENCV_FOR_THREADS_NUM")


class InputWorkerError(RuntimeError):
    """An input worker failed, died or stalled; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Source:
    """What every worker calls: `function` ("module:function") with `kwargs`
    and worker_index=, num_workers=; it returns an iterator of (image uint8
    [H, W, C], label int). `files` are the files it reads (named when a
    worker fails)."""
    function: str
    kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
    files: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class BatchShape:
    """One batch: images [batch_size, height, width, channels] uint8."""
    batch_size: int
    height: int
    width: int
    channels: int

    @property
    def image_shape(self) -> Tuple[int, int, int]:
        return (self.height, self.width, self.channels)

    @property
    def slot_bytes(self) -> int:
        """A slot: the images, then the labels (int32)."""
        return self.batch_size * (self.height * self.width * self.channels
                                  + 4)


@dataclasses.dataclass
class Batch:
    """A batch handed out: `images` may be a view of a worker's slot, valid
    until release() and never after the pool's close(); `labels` is a
    copy."""
    images: np.ndarray
    labels: np.ndarray
    _release: Optional[Callable[[], None]] = None

    def release(self) -> None:
        """Gives the slot back to its worker (once)."""
        if self._release is not None:
            release, self._release = self._release, None
            release()


def auto_workers() -> int:
    """`num_workers: auto`: the CPUs this process may use, less one for
    the process that feeds the devices, at least 1."""
    return max(1, usable_cores() - 1)


def crowded_workers(workers: int, key: str) -> Optional[str]:
    """The warning line for more input workers than the CPUs this process
    may use, else None: decoding is CPU work, so the extra workers decode
    no faster, share the cores with the process feeding the devices and
    each is a Python process of its own (memory, start-up); a mistyped
    count (100 for 10) would otherwise start them in silence."""
    cpus = usable_cores()
    if workers <= cpus:
        return None
    return (f"official_bench: {key}.num_workers is {workers}, more than the "
            f"{cpus} CPU(s) this process may use: the workers share them "
            "with each other and with the process feeding the devices, and "
            "each is a Python process of its own (memory, start-up); "
            f"'auto' starts {auto_workers()}")


def resolve_workers(value) -> int:
    """A dataset's num_workers ("auto" or a positive int) as a count."""
    return auto_workers() if value == "auto" else int(value)


def segment_name(parent: int, worker: int) -> str:
    """The shared memory name of process `parent`'s input worker `worker`
    (a random tail: a pool started again in the process gets new ones)."""
    return f"{SHM_PREFIX}{parent}_{worker}_{secrets.token_hex(4)}"


def _slot_views(buf, shape: BatchShape, slots: int):
    """(images [slots, B, H, W, C], labels [slots, B]) over `buf`."""
    b = shape.batch_size
    images = np.ndarray((slots, b) + shape.image_shape, np.uint8, buf)
    labels = np.ndarray((slots, b), np.int32, buf,
                        offset=slots * b * int(np.prod(shape.image_shape)))
    return images, labels


def _fill(examples, images: np.ndarray, labels: np.ndarray) -> int:
    """Writes up to len(labels) examples into a slot; how many came."""
    n = 0
    for image, label in examples:
        images[n] = image
        labels[n] = label
        n += 1
        if n == len(labels):
            break
    return n


def _attach(name: str, size: int) -> mmap.mmap:
    """A worker's mapping of the pool's segment, by its /dev/shm path
    (SharedMemory would register it with the resource tracker a second
    time, and the tracker would then warn about it at exit)."""
    fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)
    try:
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def _worker_main(index: int, count: int, source: Source, shape: BatchShape,
                 shm_name: str, slots: int, conn, parent_pid: int,
                 noted=None) -> None:
    """A worker: batches into its slots until its source ends; messages
    ("batch", slot, n, last, skipped, file), or ("error", text, file) and
    exit status 1 (file: the one it has open, or None; skipped: the
    records it skipped so far, per split). `noted`: the shared int
    file_note.note sets."""
    die_with_parent(parent_pid)
    if noted is not None:
        file_note.start(noted, source.files)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    try:
        images, labels = _slot_views(
            _attach(shm_name, slots * shape.slot_bytes), shape, slots)
        module, _, attr = source.function.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        examples = iter(fn(**source.kwargs, worker_index=index,
                           num_workers=count))
        free = collections.deque(range(slots))
        while True:
            if not free:
                free.append(conn.recv())
            slot = free.popleft()
            n = _fill(examples, images[slot], labels[slot])
            last = n < shape.batch_size
            conn.send(("batch", slot, n, last,
                       record_problems.PROCESS.counts(), _reading(source)))
            if last:
                return
    except Exception as e:  # noqa: BLE001 - reported by the consumer
        conn.send(("error", _error_text(e), _reading(source)))
        raise SystemExit(1)


def _error_text(e: Exception) -> str:
    """A worker's exception as its failure line's end: the first line of
    its message, after its class name unless it is the project's own line
    (OURS, then without it) or one of SENTENCE_ERRORS."""
    text = (str(e).strip().splitlines() or [""])[0]
    if text.startswith(OURS):
        return text[len(OURS):]
    if isinstance(e, SENTENCE_ERRORS):
        return text
    return f"{type(e).__name__}: {text}"


@contextlib.contextmanager
def sigint_blocked():
    """SIGINT blocked in this thread while a worker is started (or a
    multiprocessing Pool made: its threads, which start its later workers,
    inherit the mask), so the worker has it blocked from its first
    instruction: a Ctrl-C reaches the terminal's whole process group, and
    a worker still importing (before _worker_main ignores it) printed a
    KeyboardInterrupt traceback each. The trainer still gets it: another
    of its threads takes it, or this one once it is unblocked
    (multiprocessing's resource tracker is started the same way, and
    started first here: starting, it unblocks SIGINT in the thread that
    starts it)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    # The tracker unblocks SIGINT in this thread when it starts: first.
    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def main_not_rerun(needed: bool = False):
    """While spawned workers start (not where they need it, `needed`: a
    source function in `__main__`): the parent's `__main__` is not run
    again in them. multiprocessing's spawn runs it in each child (as
    `__mp_main__`) so that what it defines can be unpickled there, and a
    script calling official_bench.run() without an `if __name__ ==
    "__main__":` guard then ran its experiments again in every input
    worker, writing over the parent's results. The workers run only
    importable code, so the main module's name and path are hidden from
    multiprocessing.spawn.get_preparation_data meanwhile."""
    main = sys.modules.get("__main__")
    if needed or main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__")
             if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


@contextlib.contextmanager
def worker_start(source_function: str = ""):
    """Around the start of spawned workers: SIGINT blocked
    (sigint_blocked) and the parent's script not run again in them
    (main_not_rerun)."""
    with sigint_blocked(), main_not_rerun(
            source_function.startswith("__main__:")):
        yield


def _reading(source: Source) -> Optional[str]:
    """The source's file this worker has open now (30 us of /proc)."""
    return open_file_of(os.getpid(), source.files) if source.files \
        else None


def open_file_of(pid: int, files: Sequence[str]) -> Optional[str]:
    """The first of `files` that process `pid` has open, named as in
    `files` (which may be relative or pass through symlinks: /proc names
    the real path), or None."""
    wanted = _by_real_path(tuple(files))
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target in wanted:
            return wanted[target]
    return None


@functools.lru_cache(maxsize=4)
def _by_real_path(files: Tuple[str, ...]) -> Dict[str, str]:
    """Each file's real path (as /proc/PID/fd shows it) -> its name."""
    return {os.path.realpath(f): f for f in files}


def cpu_seconds_of(pid: int) -> float:
    """User + system CPU seconds process `pid` has used (0 if gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _death(exitcode: Optional[int]) -> str:
    if exitcode is None:
        return "closed its pipe"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def check_shm_space(needed: int, what: str) -> None:
    """Refuses a pool /dev/shm cannot hold (containers default to 64 MiB;
    a write past it would kill the worker with SIGBUS)."""
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return
    free = st.f_bavail * st.f_frsize
    if free < needed:
        raise InputWorkerError(
            f"official_bench: {what} needs {needed / 2**20:.0f} MiB of "
            f"shared memory ({SHM_DIR}), {free / 2**20:.0f} MiB is free: "
            "give the container more (docker --shm-size, a Kubernetes "
            "emptyDir with medium Memory on /dev/shm) or set fewer workers "
            "or a smaller batch")


class WorkerPool:
    """`num_workers` worker processes making batches of `shape` from
    `source`; `next()` gives them round-robin (None once all have ended).
    `key` names the dataset in messages; `timeout` is the longest wait for
    one worker's batch."""

    def __init__(self, source: Source, shape: BatchShape, num_workers: int,
                 key: str = "train_dataset", timeout: float = DEFAULT_TIMEOUT,
                 slots: int = SLOTS_PER_WORKER):
        self.source, self.shape, self.key = source, shape, key
        self.num_workers, self.timeout, self.slots = num_workers, timeout, \
            slots
        self.images_made = 0
        self._turn = 0
        self._ended: List[bool] = [False] * num_workers
        self._last_file: List[Optional[str]] = [None] * num_workers
        self._skipped: List[Dict[str, int]] = [{} for _ in range(num_workers)]
        self._noted: List[Any] = []  # each worker's file_note int
        self._cpu: List[float] = [0.0] * num_workers
        self._carry: Optional[Tuple[np.ndarray, np.ndarray]] = None
        self._carried = 0
        self._ready: Deque[Batch] = collections.deque()
        self._shms: List[shared_memory.SharedMemory] = []
        self._views: List[Tuple[np.ndarray, np.ndarray]] = []
        self._procs: List[Any] = []
        self._pids: List[int] = []  # kept: close() closes the Process
        self._conns: List[Any] = []
        self._closed = False
        # Held while next() reads a slot and while close() unmaps them:
        # views over a slot do not keep its mapping alive.
        self._lock = threading.Lock()
        check_shm_space(num_workers * slots * shape.slot_bytes,
                        f"{key}: {num_workers} input worker(s) x {slots} "
                        f"batches of {shape.batch_size}")
        # A run that raises past its feed still ends the workers and
        # unlinks the memory at exit (before multiprocessing's own hook).
        atexit.register(self.close)
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        parent = os.getpid()
        for i in range(self.num_workers):
            shm = shared_memory.SharedMemory(
                name=segment_name(parent, i), create=True,
                size=self.slots * self.shape.slot_bytes)
            self._shms.append(shm)
            self._views.append(_slot_views(shm.buf, self.shape, self.slots))
            ours, theirs = SPAWN.Pipe()
            self._noted.append(SPAWN.RawValue("q", 0))
            proc = SPAWN.Process(
                target=_worker_main, name=f"input-worker-{i}", daemon=True,
                args=(i, self.num_workers, self.source, self.shape, shm.name,
                      self.slots, theirs, parent, self._noted[i]))
            with worker_start(self.source.function):
                proc.start()
            theirs.close()  # so a dead worker reads as end-of-file here
            self._procs.append(proc)
            self._pids.append(proc.pid)
            self._conns.append(ours)

    @property
    def pids(self) -> List[int]:
        return list(self._pids)

    @property
    def shm_names(self) -> List[str]:
        return [shm.name for shm in self._shms]

    def _who(self, i: int) -> str:
        return (f"official_bench: {self.key}: input worker {i} of "
                f"{self.num_workers} (pid {self._pids[i]})")

    def _file(self, i: int) -> str:
        """"opening F" or "reading F": the file worker i said it is on
        (file_note), else the one it has open now or had when last heard
        from."""
        files = self.source.files
        said = file_note.noted(self._noted[i].value, files)
        if said:
            return said
        seen = open_file_of(self._pids[i], files) or self._last_file[i]
        if seen:
            return f"reading {seen}"
        return (f"reading one of its {len(files)} files ({files[0]}, ...)"
                if files else "reading its source")

    def _failed(self, i: int, text: str) -> InputWorkerError:
        named = any(f in text or os.path.basename(f) in text
                    for f in self.source.files)
        where = "" if named else f" {self._file(i)}"
        return InputWorkerError(f"{self._who(i)} failed{where}: {text}")

    def _receive(self, i: int):
        """Worker i's next message, within the timeout."""
        conn, proc = self._conns[i], self._procs[i]
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise InputWorkerError(
                    f"{self._who(i)} made no batch within {self.timeout:g} s "
                    f"({self.key}.worker_timeout_seconds) while "
                    f"{self._file(i)}; is it blocked (a dead mount, a "
                    "lock)?")
            try:
                if conn.poll(min(left, 0.5)):
                    return conn.recv()
            except (EOFError, OSError):
                if self._closed:  # by another thread meanwhile
                    raise self._closed_error() from None
                try:
                    proc.join(2.0)
                    exitcode = proc.exitcode
                except ValueError:  # close() closed it meanwhile
                    raise self._closed_error() from None
                raise InputWorkerError(
                    f"{self._who(i)} died ({_death(exitcode)}) while "
                    f"{self._file(i)}") from None

    def next(self) -> Optional[Batch]:
        """The next whole batch, or None once every worker has ended."""
        if self._closed:
            raise self._closed_error()
        while not self._ready:
            if all(self._ended):
                return None
            i = self._turn
            self._turn = (i + 1) % self.num_workers
            if self._ended[i]:
                continue
            message = self._receive(i)
            with self._lock:  # close() may have unmapped the slots
                if self._closed:
                    raise self._closed_error()
                self._take(i, message)
        return self._ready.popleft()

    def _closed_error(self) -> InputWorkerError:
        return InputWorkerError(f"official_bench: {self.key}: the input "
                                "workers were closed")

    def _take(self, i: int, message) -> None:
        """Worker i's message: its error raised, its batch made ready."""
        self._last_file[i] = message[-1] or self._last_file[i]
        if message[0] == "error":
            raise self._failed(i, message[1])
        _, slot, n, last, skipped, _ = message
        self._count_skipped(i, skipped)
        self._ended[i] = last
        self.images_made += n
        images, labels = self._views[i]
        if n == self.shape.batch_size:
            self._ready.append(Batch(
                images[slot], labels[slot].copy(),
                lambda i=i, slot=slot: self._free(i, slot)))
        else:
            self._join(images[slot][:n], labels[slot][:n])
            self._free(i, slot)

    def _count_skipped(self, i: int, skipped: Dict[str, int]) -> None:
        """Worker i's new skipped records, into this process's count."""
        for split, total in skipped.items():
            new = total - self._skipped[i].get(split, 0)
            if new:
                record_problems.PROCESS.add(split, new)
        self._skipped[i] = skipped

    def _free(self, i: int, slot: int) -> None:
        if not self._closed and not self._ended[i]:
            try:
                self._conns[i].send(slot)
            except (OSError, ValueError):
                pass  # it died: the next receive says so

    def _join(self, images: np.ndarray, labels: np.ndarray) -> None:
        """A worker's last, partial batch into the carried batch; whole
        carried batches go out next."""
        b = self.shape.batch_size
        while len(labels):
            if self._carry is None:
                self._carry = (np.empty((b,) + self.shape.image_shape,
                                        np.uint8), np.empty(b, np.int32))
            take = min(len(labels), b - self._carried)
            self._carry[0][self._carried:self._carried + take] = images[:take]
            self._carry[1][self._carried:self._carried + take] = labels[:take]
            self._carried += take
            images, labels = images[take:], labels[take:]
            if self._carried == b:
                self._ready.append(Batch(*self._carry))
                self._carry, self._carried = None, 0

    def cpu_seconds(self) -> float:
        """CPU seconds the workers have used, as last seen."""
        for i in range(len(self._pids)):
            if not self._closed:
                self._cpu[i] = cpu_seconds_of(self._pids[i]) or self._cpu[i]
        return sum(self._cpu)

    def close(self, grace: float = 2.0) -> None:
        """Ends the workers (SIGTERM, SIGKILL after `grace`), closes each
        ended Process (its two pipe fds would otherwise stay open while a
        failed run's traceback keeps this pool alive) and unlinks the
        shared memory. Idempotent."""
        if self._closed:
            return
        atexit.unregister(self.close)
        self.cpu_seconds()
        self._closed = True
        for proc in self._procs:
            if proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + grace
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5.0)
            if proc.exitcode is not None:
                proc.close()
        for conn in self._conns:
            conn.close()
        with self._lock:  # not while next() reads a slot
            self._views.clear()
            self._ready.clear()
            for shm in self._shms:
                try:
                    shm.close()  # unmaps, even under live numpy views
                except BufferError:
                    pass  # a buffer export still open: unmapped later
                shm.unlink()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
