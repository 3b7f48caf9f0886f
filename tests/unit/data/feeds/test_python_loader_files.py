"""The image-folder loader names the file it cannot decode (an empty or
cut-short JPEG), also from its worker processes."""

import signal

import numpy as np
import pytest

from official_bench.data.feeds import python_loader

Image = pytest.importorskip("PIL.Image")


def _folder(tmp_path, bad_name, bad_bytes):
    folder = tmp_path / "train" / "a"
    folder.mkdir(parents=True)
    for i in range(3):
        Image.fromarray(np.full((6, 6, 3), 40 * i, np.uint8)).save(
            folder / f"{i}.jpg")
    bad = folder / bad_name
    bad.write_bytes(bad_bytes)
    return str(tmp_path), str(bad)


@pytest.mark.parametrize("name, data, words", [
    ("empty.jpg", b"", "(0 bytes): cannot decode it"),
    ("cut.jpg", b"\xff\xd8\xff\xe0" + b"x" * 40, "(44 bytes): cannot decode"),
])
@pytest.mark.parametrize("workers", [0, 1])
def test_a_bad_image_is_named(tmp_path, name, data, words, workers):
    root, bad = _folder(tmp_path, name, data)
    batches = python_loader.folder_batches(root, "train", 4, 4, 3, "uint8",
                                           False, 0, workers=workers)
    with pytest.raises(ValueError) as e:
        list(batches)
    assert f"image {bad} {words}" in str(e.value)


# In a fresh Python, as in a trainer: the pool made by the first next(),
# from a thread of its own (python_batches runs sources so), before which
# no process was started (the resource tracker starts with the pool).
_POOL_MASKS = """
import json, multiprocessing, signal, sys, threading
from official_bench.data.feeds import python_loader
batches = python_loader.folder_batches(sys.argv[1], "train", 2, 4, 3,
                                       "uint8", True, 0, workers=2)
masks = []
def first():
    next(batches)
    masks.append(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
thread = threading.Thread(target=first)
thread.start()
thread.join()
blocked = [int(next(line.split()[1] for line in open(
    f"/proc/{c.pid}/status") if line.startswith("SigBlk:")), 16)
    for c in multiprocessing.active_children()
    if c.name.startswith("SpawnPoolWorker")]
print(json.dumps({"blocked": blocked, "thread_mask": masks[0]}))
batches.close()
"""


def test_the_pool_workers_leave_a_ctrl_c_to_the_consumer(tmp_path):
    """Ctrl-C signals the terminal's whole process group: each pool worker
    died of it with a KeyboardInterrupt traceback (and the batch it held
    never came). They run with SIGINT blocked; the thread that made the
    pool has its mask back."""
    import json
    import subprocess
    import sys
    root, _ = _folder(tmp_path, "3.jpg", b"")
    (tmp_path / "train" / "a" / "3.jpg").unlink()
    out = subprocess.run([sys.executable, "-c", _POOL_MASKS, root],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.splitlines()[-1])
    assert len(r["blocked"]) == 2, r
    assert all(m & (1 << (signal.SIGINT - 1)) for m in r["blocked"]), r
    assert r["thread_mask"] == [], r
