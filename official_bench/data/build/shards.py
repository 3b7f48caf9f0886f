"""Writing one split's shards: the seeded image -> shard assignment, the
conversion of each shard in a worker process, and each shard written under
a hidden temporary name after the record of what it skipped; a worker that
dies stops the build (WorkerLost) instead of a wait for shards that never
come."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import random
import signal
from concurrent.futures.process import BrokenProcessPool
from typing import Dict, List, Sequence, Tuple

from official_bench.data.build import shard_skips
from official_bench.data.build.example_proto import classic_example
from official_bench.data.build.image_codec import to_rgb_jpeg
from official_bench.data.build.progress import Progress
from official_bench.data.build.sources import BuildError, Item
from official_bench.data.build.worker_pool import WorkerPool
from official_bench.data.records.framing import frame
from official_bench.host.atomic import atomic_path
from official_bench.host.write_errors import writing


def shard_name(split: str, index: int, count: int) -> str:
    return f"{split}-{index:05d}-of-{count:05d}"


def assign_shards(items: Sequence[Item], num_shards: int,
                  seed: int) -> List[List[Item]]:
    """Seeded shuffle, then contiguous slices: same inputs -> same shards."""
    order = list(items)
    random.Random(seed).shuffle(order)
    n = len(order)
    return [order[i * n // num_shards:(i + 1) * n // num_shards]
            for i in range(num_shards)]


@dataclasses.dataclass
class ShardTask:
    """One shard for a worker to encode: its split, index of count, the
    images in it, the class texts and the JPEG quality."""
    split: str
    index: int
    count: int
    items: List[Item]
    class_text: Dict[str, str]
    quality: int


# One slot per shard of the split being built: the worker converting shard i
# counts its images in slot i, the main process sums the slots. No lock, so
# a worker killed mid-update can never leave one held.
_progress = None


def init_progress(slots) -> None:
    global _progress
    _progress = slots


def encode_shard(task: ShardTask) -> Tuple[int, List[bytes],
                                           List[Tuple[str, str]]]:
    """(shard index, serialized records, [(path, why skipped)]): in a worker.

    Raises NeedsPillow (the build must stop) for an image only Pillow can
    convert when Pillow is not installed.
    """
    records, skipped = [], []
    for done, item in enumerate(task.items, 1):
        try:
            with open(item.path, "rb") as f:
                data = f.read()
            jpeg, height, width = to_rgb_jpeg(data, task.quality, item.path)
        except (OSError, ValueError) as e:
            skipped.append((item.path, _why_skipped(item.path, e)))
        else:
            records.append(classic_example(
                jpeg, item.label, height, width, synset=item.synset,
                text=task.class_text.get(item.synset, item.synset),
                filename=os.path.basename(item.path), boxes=item.boxes))
        if _progress is not None:
            _progress[task.index] = done
    return task.index, records, skipped


def _why_skipped(path: str, error: Exception) -> str:
    if isinstance(error, FileNotFoundError) and os.path.islink(path):
        return f"a broken symbolic link (to {os.readlink(path)})"
    return str(error)


def _write_shard(path: str, records: Sequence[bytes]) -> None:
    """Writes under a hidden temporary name, renames when complete. The
    frames are TFRecord's (data/records/framing.frame): no TensorFlow."""
    with writing(path, "a TFRecord shard"), atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            for record in records:
                f.write(frame(record))


def _finish_shard(output_dir: str, name: str, images: int,
                  records: Sequence[bytes],
                  skipped: Sequence[Tuple[str, str]]) -> None:
    """The shard's record first, then the shard: a shard never exists
    without the list of what it skipped."""
    shard_skips.write_record(output_dir, name, images, len(records), skipped)
    _write_shard(os.path.join(output_dir, name), records)


def _remove_stale_temporaries(output_dir: str, split: str) -> None:
    for name in os.listdir(output_dir):
        if name.startswith(f".{split}-") and name.endswith(".tmp"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(output_dir, name))
    shard_skips.remove_stale_temporaries(output_dir)


class WorkerLost(Exception):
    """A conversion worker died mid-build (killed or crashed)."""


def _lost_message(exited) -> str:
    """Names the dead workers. Once one dies the executor SIGTERMs the
    rest, so those are left out when another cause is known."""
    causes = [(pid, code) for pid, code in exited
              if code != -signal.SIGTERM]
    exited = causes or exited
    how = []
    for pid, code in exited:
        if code is not None and code < 0:
            how.append(f"worker {pid} was killed by "
                       f"{signal.Signals(-code).name}")
        else:
            how.append(f"worker {pid} exited with status {code}")
    return ("; ".join(how or ["a worker died"]) + " (the out-of-memory "
            "killer? try fewer --num_workers); finished shards are kept, "
            "re-run the same command to build the rest")


def _check_workers(pool: WorkerPool) -> None:
    """Fails the build when a worker died, instead of waiting for shards
    that will never come (see WorkerPool.exited_workers)."""
    exited = pool.exited_workers()
    if exited:
        raise WorkerLost(_lost_message(exited))


def _shard_result(future: concurrent.futures.Future, pool: WorkerPool):
    try:
        return future.result()
    except BrokenProcessPool as e:
        pool.wait_all_exited(timeout=5.0)
        raise WorkerLost(_lost_message(pool.exited_workers())) from e


def check_shard_count(split: str, images: int, num_shards: int) -> None:
    """BuildError unless 1 <= num_shards <= images (and images > 0)."""
    if not images:
        raise BuildError(f"split {split}: no images found")
    if num_shards < 1 or num_shards > images:
        raise BuildError(f"--{split}_shards {num_shards}: must be 1.."
                         f"{images} (the number of {split} images)")


def build_split(split: str, items: Sequence[Item], num_shards: int,
                output_dir: str, pool: WorkerPool, slots,
                class_text: Dict[str, str], quality: int, seed: int,
                log=print) -> Tuple[int, int, List[Tuple[str, str]]]:
    """Writes one split's missing shards; returns (written, already there,
    images skipped by this run). `num_shards` is checked already
    (check_shard_count, by builder.py before anything is written)."""
    _remove_stale_temporaries(output_dir, split)
    shards = assign_shards(items, num_shards, seed)
    tasks, done_images = [], 0
    for index, shard_items in enumerate(shards):
        path = os.path.join(output_dir, shard_name(split, index, num_shards))
        if os.path.exists(path):
            done_images += len(shard_items)
        else:
            tasks.append(ShardTask(split, index, num_shards, shard_items,
                                   class_text, quality))
    if done_images:
        log(f"[{split}] {num_shards - len(tasks)} of {num_shards} shard(s) "
            "already complete; skipping them")
    progress = Progress(split, len(items))
    for i in range(len(slots)):
        slots[i] = 0
    bad: List[Tuple[str, str]] = []
    # Queued shards are not cancelled here when something raises: the pool's
    # stop() does it inside the executor, and a cancel from this thread races
    # with the executor marking the same futures broken (CPython 3.11).
    pending = {pool.submit(encode_shard, task) for task in tasks}
    written = 0
    try:
        while pending:
            done, pending = concurrent.futures.wait(
                pending, timeout=0.5,
                return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                index, records, skipped = _shard_result(future, pool)
                _finish_shard(output_dir,
                              shard_name(split, index, num_shards),
                              len(shards[index]), records, skipped)
                bad.extend(skipped)
                written += 1
            if pending:
                _check_workers(pool)
                progress.update(done_images + sum(slots[:num_shards]))
    except BaseException:
        # A signal can land between a temporary's creation and the code
        # that would remove it (atomic_path's try, a context manager's
        # __enter__): whatever stopped the build, none is left behind.
        _remove_stale_temporaries(output_dir, split)
        raise
    progress.update(done_images + sum(slots[:num_shards]), force=True)
    return written, num_shards - len(tasks), bad

