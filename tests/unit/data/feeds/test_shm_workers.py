"""data/feeds/shm_workers.py: real spawned workers running a stand-in
source (support/worker_examples.py), batches through shared memory, and
every way a worker can fail ending in one line, with nothing left behind."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from official_bench.data.feeds import shm_workers
from official_bench.data.feeds.shm_workers import (
    BatchShape,
    InputWorkerError,
    Source,
    WorkerPool,
)
from support.helpers import REPO

EXAMPLES = "support.worker_examples:examples"


def _pool(workers, batch=4, timeout=60.0, files=(), **kwargs):
    source = Source(EXAMPLES, dict(kwargs, files=tuple(files)),
                    tuple(files))
    return WorkerPool(source, BatchShape(batch, 4, 4, 3), workers,
                      timeout=timeout)


def _take(pool, n):
    """Labels and first pixels of the next n batches, each released."""
    out = []
    for _ in range(n):
        batch = pool.next()
        if batch is None:
            break
        assert batch.images.shape == (4, 4, 4, 3)
        assert batch.images.dtype == np.uint8
        out.append((batch.labels.tolist(),
                    batch.images[:, 0, 0, 0].tolist()))
        batch.release()
    return out


def _gone(pool):
    """The pool's processes have exited and its shared memory is gone."""
    alive = [p for p in pool.pids if os.path.exists(f"/proc/{p}")]
    left = [n for n in pool.shm_names
            if os.path.exists(os.path.join("/dev/shm", n))]
    return alive == [] and left == []


def _files(tmp_path, n):
    out = []
    for i in range(n):
        path = tmp_path / f"train-{i:05d}-of-{n:05d}"
        path.write_bytes(b"x")
        out.append(str(path))
    return out


def test_batches_come_round_robin_and_a_rerun_repeats_them():
    runs = []
    for _ in range(2):
        with _pool(3) as pool:
            runs.append(_take(pool, 6))
        assert _gone(pool)
    # batch j is worker j % 3's (j // 3)-th; worker w makes w, w+3, ...
    expected = []
    for j in range(6):
        w, m = j % 3, j // 3
        labels = [w + 3 * (4 * m + r) for r in range(4)]
        expected.append((labels, [k % 256 for k in labels]))
    assert runs[0] == expected
    assert runs[1] == runs[0]


def test_a_ctrl_c_while_the_workers_start_does_not_reach_them():
    """Ctrl-C signals the terminal's whole process group; workers still
    importing (before they ignore SIGINT) died of it, each printing a
    KeyboardInterrupt traceback. They start with SIGINT blocked now."""
    with _pool(2) as pool:
        for pid in pool.pids:  # at once: they are still starting
            os.kill(pid, signal.SIGINT)
        assert len(_take(pool, 4)) == 4
        for pid in pool.pids:
            with open(f"/proc/{pid}/status") as f:
                blocked = next(int(line.split()[1], 16) for line in f
                               if line.startswith("SigBlk:"))
            assert blocked & (1 << (signal.SIGINT - 1)), pid
    assert _gone(pool)
    # this thread's mask is as it was
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_a_finite_source_joins_the_last_partial_batches_in_order():
    # 22 examples over 3 workers: worker 0 has 8 (2 batches of 4), workers
    # 1 and 2 have 7 (one batch and 3 left each). The 3 + 3 left join
    # into one more batch (worker 1's 3, then worker 2's first), and the 2
    # left under a batch are dropped: 5 batches, 20 examples.
    with _pool(3, count=22) as pool:
        got = _take(pool, 10)
        assert pool.next() is None
    labels = [b[0] for b in got]
    assert labels == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11],
                      [12, 15, 18, 21], [13, 16, 19, 14]]
    assert [b[1] for b in got] == labels  # pixels follow their labels


def _progress(folder):
    return {int(name): int((folder / name).read_text() or 0)
            for name in os.listdir(folder)}


def _wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_the_workers_skipped_records_reach_this_processs_count():
    """A worker's skips (skip_bad_records) are counted in its process; its
    batch messages carry them to the trainer's count (result.json's
    records_skipped), each once however many batches repeat them."""
    from official_bench.data.records import record_problems
    before = record_problems.PROCESS.count("train")
    # 40 examples over 2 workers, every 5th skipped: 0, 5, ..., 35.
    with _pool(2, count=40, skip_every=5) as pool:
        got = _take(pool, 20)
        assert pool.next() is None
    assert sum(len(labels) for labels, _ in got) == 32
    assert all(k % 5 for labels, _ in got for k in labels)
    assert record_problems.PROCESS.count("train") - before == 8


def test_workers_stop_when_their_slots_are_full(tmp_path):
    """2 slots of 4 examples per worker: each makes 8 and waits until the
    consumer gives a slot back."""
    progress = tmp_path / "progress"
    progress.mkdir()
    with _pool(2, progress_dir=str(progress)) as pool:
        _wait_for(lambda: _progress(progress) == {0: 8, 1: 8})
        time.sleep(1.0)
        assert _progress(progress) == {0: 8, 1: 8}
        batch = pool.next()  # worker 0's first slot
        assert _progress(progress) == {0: 8, 1: 8}
        batch.release()
        _wait_for(lambda: _progress(progress)[0] == 12)
        time.sleep(0.5)
        assert _progress(progress) == {0: 12, 1: 8}
    assert _gone(pool)


def _error_of(pool, batches=20):
    with pytest.raises(InputWorkerError) as e:
        _take(pool, batches)
    return str(e.value)


def test_an_exception_in_a_worker_is_one_line_naming_worker_and_file(
        tmp_path):
    files = _files(tmp_path, 2)
    pool = _pool(2, files=files, fail_at=9)
    try:
        message = _error_of(pool)
    finally:
        pool.close()
    assert "\n" not in message
    assert message.startswith(
        f"official_bench: train_dataset: input worker 1 of 2 (pid "
        f"{pool.pids[1]}) failed: ValueError: bad record 9 in {files[1]}: "
        "truncated")
    assert _gone(pool)


@pytest.mark.parametrize("failure", [
    {"prefix": "official_bench: "},  # the project's own line
    # ConfigError's message is a sentence (the key and the fix), printed
    # as other config errors are: no 'ConfigError:' inside the line
    {"error": "ConfigError"}])
def test_the_projects_own_errors_are_passed_on_without_their_type(
        tmp_path, failure):
    files = _files(tmp_path, 1)
    pool = _pool(1, files=files, fail_at=2, **failure)
    try:
        message = _error_of(pool)
    finally:
        pool.close()
    assert message == (
        f"official_bench: train_dataset: input worker 0 of 1 (pid "
        f"{pool.pids[0]}) failed: bad record 2 in {files[0]}: truncated")


def test_a_worker_that_dies_is_named_with_the_file_it_had_open(tmp_path):
    files = _files(tmp_path, 2)
    # worker 0 makes 0, 2, 4, 6 (its first batch), then dies at 8
    pool = _pool(2, files=files, die_at=8)
    try:
        message = _error_of(pool)
    finally:
        pool.close()
    assert message == (
        f"official_bench: train_dataset: input worker 0 of 2 (pid "
        f"{pool.pids[0]}) died (killed by SIGKILL) while reading "
        f"{files[0]}")
    assert _gone(pool)


def test_the_open_file_is_named_as_given_relative_or_through_a_symlink(
        tmp_path, monkeypatch):
    """/proc names the real path; the death and timeout lines above name
    the file as data_dir gave it (a relative folder, a symlinked mount)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "train-00000-of-00001").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    for name in ("link/train-00000-of-00001", "real/train-00000-of-00001",
                 str(tmp_path / "link" / "train-00000-of-00001")):
        with open(name, "rb"):
            assert shm_workers.open_file_of(
                os.getpid(), ["real/other", name]) == name
        assert shm_workers.open_file_of(os.getpid(), [name]) is None


def test_a_stuck_worker_times_out_naming_the_file(tmp_path):
    files = _files(tmp_path, 2)
    pool = _pool(2, files=files, hang_at=1)
    try:
        # The 3 s start once both workers hold their files: spawning them
        # can take longer than that on a loaded machine, and then worker
        # 0 timed out first (seen once under a load average of 6).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
                shm_workers.open_file_of(pid, files) for pid in pool.pids):
            time.sleep(0.05)
        pool.timeout = 3.0
        start = time.monotonic()
        message = _error_of(pool)
        assert time.monotonic() - start < 30
    finally:
        pool.close()
    assert message == (
        f"official_bench: train_dataset: input worker 1 of 2 (pid "
        f"{pool.pids[1]}) made no batch within 3 s (train_dataset."
        f"worker_timeout_seconds) while reading {files[1]}; is it blocked "
        "(a dead mount, a lock)?")
    assert _gone(pool)


def test_a_source_that_does_not_import_is_named():
    pool = WorkerPool(Source("support.no_such_module:examples"),
                      BatchShape(2, 4, 4, 3), 1)
    try:
        message = _error_of(pool)
    finally:
        pool.close()
    assert message.startswith("official_bench: train_dataset: input worker "
                              "0 of 1")
    assert "ModuleNotFoundError: No module named 'support.no_such_module'" \
        in message


_KILLED_PARENT = """
import json, sys, time
sys.path.insert(0, {tests!r})
from official_bench.data.feeds.shm_workers import BatchShape, Source, \\
    WorkerPool
pool = WorkerPool(Source({examples!r}), BatchShape(4, 4, 4, 3), 2)
pool.next()
print(json.dumps({{"pids": pool.pids, "shm": pool.shm_names}}), flush=True)
time.sleep(3600)
"""


def test_a_killed_parent_leaves_no_worker_and_no_shared_memory():
    code = _KILLED_PARENT.format(tests=os.path.join(REPO, "tests"),
                                 examples=EXAMPLES)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    try:
        started = json.loads(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert len(started["pids"]) == 2

    def cleaned():
        return not any(os.path.exists(f"/proc/{p}")
                       for p in started["pids"]) and \
            not any(os.path.exists(os.path.join("/dev/shm", n))
                    for n in started["shm"])
    _wait_for(cleaned, timeout=30)


def test_a_pool_that_shared_memory_cannot_hold_is_refused(monkeypatch):
    class Small:
        f_bavail, f_frsize = 16, 4096  # 64 KiB
    monkeypatch.setattr(shm_workers.os, "statvfs", lambda path: Small)
    with pytest.raises(InputWorkerError, match=(
            r"^official_bench: train_dataset: 2 input worker\(s\) x 2 "
            r"batches of 4 needs 1 MiB of shared memory \(/dev/shm\), 0 MiB "
            r"is free: give the container more \(docker --shm-size")):
        WorkerPool(Source(EXAMPLES), BatchShape(4, 128, 128, 3), 2)


@pytest.mark.parametrize("cpus, expected", [({0}, 1), ({0, 1}, 1),
                                            ({0, 1, 2, 3}, 3)])
def test_auto_is_the_usable_cpus_less_one(monkeypatch, cpus, expected):
    monkeypatch.setattr(shm_workers.os, "sched_getaffinity", lambda pid: cpus)
    assert shm_workers.resolve_workers("auto") == expected
    assert shm_workers.resolve_workers(5) == 5


def test_more_workers_than_cpus_is_one_warning_line(monkeypatch):
    monkeypatch.setattr(shm_workers.os, "sched_getaffinity",
                        lambda pid: {0, 1})
    assert shm_workers.crowded_workers(2, "train_dataset") is None
    assert shm_workers.crowded_workers(3, "validation_dataset") == (
        "official_bench: validation_dataset.num_workers is 3, more than the "
        "2 CPU(s) this process may use: the workers share them with each "
        "other and with the process feeding the devices, and each is a "
        "Python process of its own (memory, start-up); 'auto' starts 1")


_LEFT_OPEN = """
import json, sys
sys.path.insert(0, {tests!r})
from official_bench.data.feeds.shm_workers import BatchShape, Source, \\
    WorkerPool
pool = WorkerPool(Source({examples!r}), BatchShape(4, 4, 4, 3), 2)
pool.next()
print(json.dumps({{"pids": pool.pids, "shm": pool.shm_names}}), flush=True)
raise SystemExit(3)  # a run that raised past its feed
"""


def test_a_pool_left_open_is_closed_at_exit_without_warnings():
    code = _LEFT_OPEN.format(tests=os.path.join(REPO, "tests"),
                             examples=EXAMPLES)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, out.stderr
    started = json.loads(out.stdout.strip().splitlines()[-1])
    assert "leaked" not in out.stderr and "Traceback" not in out.stderr, \
        out.stderr
    assert not any(os.path.exists(os.path.join("/dev/shm", n))
                   for n in started["shm"])
    _wait_for(lambda: not any(os.path.exists(f"/proc/{p}")
                              for p in started["pids"]), timeout=10)


_CLOSED_MID_NEXT = """
import json, sys, threading
sys.path.insert(0, {tests!r})
from official_bench.data.feeds.shm_workers import BatchShape, \\
    InputWorkerError, Source, WorkerPool
pool = WorkerPool(Source({examples!r}), BatchShape(4, 4, 4, 3), 2)
pool.next().release()
received, closed, out = threading.Event(), threading.Event(), {{}}
receive = pool._receive


def receive_then_wait(i):  # worker i's batch is in; the pool closes now
    message = receive(i)
    received.set()
    closed.wait(30)
    return message


def reader():
    try:
        pool.next()
        out["got"] = "a batch"
    except InputWorkerError as e:
        out["got"] = str(e)


pool._receive = receive_then_wait
thread = threading.Thread(target=reader)
thread.start()
received.wait(30)
pool.close()  # unmaps the slots the message points into
closed.set()
thread.join(30)
print(json.dumps(out), flush=True)
"""


def test_close_from_another_thread_mid_next_reads_no_unmapped_slot():
    """The feed's copy thread may be in next() when the training thread
    closes the pool: next() then says the pool was closed, and never reads
    the slot (unmapped by close(): a segfault, or another mapping's
    bytes). In a child process, so a segfault fails only this test."""
    code = _CLOSED_MID_NEXT.format(tests=os.path.join(REPO, "tests"),
                                   examples=EXAMPLES)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "got": "official_bench: train_dataset: the input workers were "
               "closed"}, out.stderr
    assert "Traceback" not in out.stderr, out.stderr


def test_a_pools_shared_memory_names_its_process_and_worker():
    pool = WorkerPool(Source(EXAMPLES), BatchShape(2, 4, 4, 3), 2)
    try:
        names = pool.shm_names
        assert all(os.path.exists(os.path.join("/dev/shm", n))
                   for n in names)
    finally:
        pool.close()
    prefix = f"official_bench_{os.getpid()}_"
    assert [n[:len(prefix) + 2] for n in names] == [prefix + "0_",
                                                    prefix + "1_"]
    assert len(set(names)) == 2 and not any(
        os.path.exists(os.path.join("/dev/shm", n)) for n in names)


# A researcher's script without an `if __name__ == "__main__":` guard.
UNGUARDED = """
import sys
sys.path.insert(0, {tests!r})
print("script body ran", flush=True)
from official_bench.data.feeds import shm_workers as w
with w.WorkerPool(w.Source({source!r}, {{}}), w.BatchShape(4, 4, 4, 3),
                  2) as pool:
    batch = pool.next()
    print("labels", sorted(batch.labels.tolist()), flush=True)
    batch.release()
"""


def test_the_workers_do_not_run_the_parents_script_again(tmp_path):
    """spawn runs the parent's __main__ again in each child; a notebook
    sequence in a script without a __main__ guard ran its experiments
    again in every input worker, writing over the parent's results."""
    script = tmp_path / "experiments.py"
    script.write_text(UNGUARDED.format(
        tests=os.path.join(REPO, "tests"), source=EXAMPLES))
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.count("script body ran") == 1, p.stdout
    assert "labels [0, 2, 4, 6]" in p.stdout
    # This process's main module is whole again after a start.
    main = sys.modules["__main__"]
    before = (main.__dict__.get("__file__"), main.__spec__)
    with shm_workers.main_not_rerun():
        assert main.__spec__ is None and "__file__" not in main.__dict__
    assert (main.__dict__.get("__file__"), main.__spec__) == before


def _open_fds():
    return sorted(os.listdir("/proc/self/fd"))


def test_close_leaves_no_fd_of_its_workers_open_while_the_pool_lives():
    """A failed run's traceback keeps its feed's pool alive (a notebook
    keeps the last exception): close() closes each worker's Process, so
    its two pipe fds do not stay open with it (4 with 2 workers)."""
    with _pool(1) as warm:  # multiprocessing's heap keeps an fd for good
        _take(warm, 1)
    before = _open_fds()
    pool = _pool(2)
    assert len(_take(pool, 2)) == 2
    pool.close()
    assert _open_fds() == before
    assert _gone(pool)  # its pids are still known once closed
    assert len(pool.pids) == 2
