"""Reference Python sources: the "Python loader" of PyTorch-style code.

TensorFlow-free, so its worker processes start light. Two sources:

- `folder_source` reads an image folder, `data_dir/<split>/<class>/*.jpg`
  (or `data_dir/<class>/...` when there is no split folder): classes are
  the sorted folder names, label = index. A pool of worker processes (spawn,
  never fork: the trainer's process holds TensorFlow's threads) decodes
  and resizes whole batches with Pillow; at most 2 batches per worker are
  in flight, so a slow consumer does not pile decoded batches up. Training
  reshuffles the files every epoch (seeded) and flips at random; images are
  float pixels scaled to [0, 1] (or uint8 with transfer_uint8).
- `synthetic_source` repeats one random batch (tests, producer benchmarks).

Use one with `builder: python` and
`python_source: official_bench.data.feeds.python_loader:folder_source`, or from
the ZMQ producer (`--folder`, `--synthetic`). Write your own the same way:
a function of a SourceContext returning an endless iterable of
(images, labels) numpy batches (batch_spec.py says what they must be).
"""

from __future__ import annotations

import multiprocessing
import os
import random
from collections import deque
from typing import Iterator, List, Sequence, Tuple

import numpy as np

from official_bench.data.feeds.batch_spec import numpy_dtype
from official_bench.data.feeds.shm_workers import worker_start

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")
MAX_WORKERS = 8


def list_folder(data_dir: str, split: str) -> Tuple[List[str], List[int],
                                                     List[str]]:
    """(paths, labels, class names) of an image folder, sorted."""
    root = os.path.join(data_dir, split)
    if not os.path.isdir(root):
        root = data_dir
    if not os.path.isdir(root):
        raise FileNotFoundError(f"image folder {data_dir!r} does not exist")
    classes = sorted(d for d in os.listdir(root)
                     if os.path.isdir(os.path.join(root, d)))
    paths, labels = [], []
    for label, name in enumerate(classes):
        folder = os.path.join(root, name)
        for f in sorted(os.listdir(folder)):
            if f.lower().endswith(IMAGE_EXTENSIONS):
                paths.append(os.path.join(folder, f))
                labels.append(label)
    if not paths:
        raise FileNotFoundError(
            f"image folder {root!r} has no images in class subfolders "
            f"({', '.join(IMAGE_EXTENSIONS)})")
    return paths, labels, classes


def decode_batch(task) -> Tuple[np.ndarray, np.ndarray]:
    """One batch in a worker: decode, resize, optional flip, scale."""
    from PIL import Image
    paths, labels, flips, size, channels, dtype = task
    out = np.empty((len(paths), size, size, channels), np.uint8)
    for i, (path, flip) in enumerate(zip(paths, flips)):
        pixels = _decode(Image, path, size, channels)
        out[i] = pixels[:, ::-1] if flip else pixels
    images = out if dtype == "uint8" else \
        (out.astype(np.float32) / 255.0).astype(numpy_dtype(dtype))
    return images, np.asarray(labels, np.int32)


def _decode(Image, path: str, size: int, channels: int) -> np.ndarray:
    """One image as uint8 [size, size, channels]; a file Pillow cannot
    read (empty, cut short, not an image) is a ValueError naming it (the
    message crosses the pool's process boundary as text)."""
    try:
        with Image.open(path) as img:
            img = img.convert("RGB" if channels == 3 else "L").resize(
                (size, size), Image.BILINEAR)
            return np.asarray(img, np.uint8).reshape(size, size, channels)
    except (OSError, ValueError, SyntaxError) as e:  # PIL's decode errors
        raise ValueError(f"image {path} ({_file_size(path)}): cannot "
                         f"decode it: {type(e).__name__}: {e}") from None


def _file_size(path: str) -> str:
    try:
        return f"{os.path.getsize(path)} bytes"
    except OSError:
        return "unreadable"


def _tasks(paths: Sequence[str], labels: Sequence[int], batch_size: int,
           training: bool, seed: int, size: int, channels: int,
           dtype: str) -> Iterator[tuple]:
    """Batch descriptions, endless when training (reshuffled each epoch)."""
    rng = random.Random(seed)
    order = list(range(len(paths)))
    while True:
        if training:
            rng.shuffle(order)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            idx = order[start:start + batch_size]
            flips = [training and rng.random() < 0.5 for _ in idx]
            yield ([paths[i] for i in idx], [labels[i] for i in idx], flips,
                   size, channels, dtype)
        if not training:
            return


def pooled(tasks: Iterator[tuple], workers: int) -> Iterator[tuple]:
    """Results of decode_batch over `tasks` in order, 2 per worker ahead."""
    if workers <= 0:
        for task in tasks:
            yield decode_batch(task)
        return
    with worker_start():  # a Ctrl-C is the consumer's to handle
        pool = multiprocessing.get_context("spawn").Pool(workers)
    try:
        pending = deque()
        for task in tasks:
            pending.append(pool.apply_async(decode_batch, (task,)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
    finally:
        pool.terminate()


def default_workers() -> int:
    return min(MAX_WORKERS, os.cpu_count() or 1)


def folder_batches(data_dir: str, split: str, batch_size: int, size: int,
                   channels: int, dtype: str, training: bool, seed: int,
                   shard: int = 0, num_shards: int = 1,
                   workers: int = -1) -> Iterator[tuple]:
    """Batches of an image folder; this shard's files only."""
    paths, labels, _ = list_folder(data_dir, split)
    paths, labels = paths[shard::num_shards], labels[shard::num_shards]
    if len(paths) < batch_size:
        raise ValueError(f"image folder {data_dir!r} shard {shard} of "
                         f"{num_shards} has {len(paths)} images, fewer than "
                         f"one batch of {batch_size}")
    return pooled(_tasks(paths, labels, batch_size, training,
                         seed + shard, size, channels, dtype),
                  default_workers() if workers < 0 else workers)


def folder_source(ctx):
    """python_source for an image folder in `data_dir` (see module doc)."""
    ds = ctx.config
    if not ds.data_dir:
        raise ValueError("folder_source needs data_dir (the image folder)")
    return folder_batches(ds.data_dir, ds.split, ctx.batch_size,
                          ctx.image_size, ctx.num_channels, ctx.image_dtype,
                          ctx.is_training, ctx.seed, ctx.input_pipeline_id,
                          ctx.num_input_pipelines)


def synthetic_batches(batch_size: int, size: int, channels: int,
                      num_classes: int, dtype: str,
                      seed: int = 0) -> Iterator[tuple]:
    """One random batch, repeated forever."""
    rng = np.random.default_rng(seed)
    if dtype == "uint8":
        images = rng.integers(0, 256, (batch_size, size, size, channels),
                              dtype=np.uint8)
    else:
        images = rng.standard_normal(
            (batch_size, size, size, channels), np.float32).astype(
                numpy_dtype(dtype))
    labels = rng.integers(0, num_classes, (batch_size,), dtype=np.int32)
    while True:
        yield images, labels


def synthetic_source(ctx):
    """python_source of random batches (tests, pipeline overhead)."""
    return synthetic_batches(ctx.batch_size, ctx.image_size,
                             ctx.num_channels, ctx.num_classes,
                             ctx.image_dtype,
                             ctx.seed + ctx.input_pipeline_id)
