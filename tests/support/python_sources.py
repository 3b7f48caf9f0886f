"""User sources for `builder: python` tests, importable as
`support.python_sources:<name>` (tests/ is on sys.path in pytest through
setup.cfg, and on PYTHONPATH for the CLI runs). Each is called with a
SourceContext."""

import os
import threading
import time

import numpy as np

from official_bench.data.feeds import python_loader


def slow_source(ctx):
    """0.15 s per batch: far slower than a depth-8 model step on 16x16."""
    for batch in python_loader.synthetic_source(ctx):
        time.sleep(0.15)
        yield batch


def raising_source(ctx):
    yield from python_loader.synthetic_batches(
        ctx.batch_size, ctx.image_size, ctx.num_channels, ctx.num_classes,
        ctx.image_dtype)
    raise AssertionError("unreachable")  # pragma: no cover


def failing_source(ctx):
    batches = python_loader.synthetic_source(ctx)
    yield next(batches)
    raise OSError("disk on fire")


def second_pipeline_failing_source(ctx):
    """Input pipeline 1 raises at its 8th batch; the others never do."""
    for n, batch in enumerate(python_loader.synthetic_source(ctx), 1):
        if ctx.input_pipeline_id == 1 and n == 8:
            raise OSError("official_bench: test: pipeline 1 failed")
        yield batch


def float64_source(ctx):
    while True:
        yield (np.zeros((ctx.batch_size, ctx.image_size, ctx.image_size,
                         ctx.num_channels), np.float64),
               np.zeros((ctx.batch_size,), np.int32))


def context_source(ctx):
    """Encodes the context into the labels so the test can read it back."""
    images = np.zeros((ctx.batch_size, ctx.image_size, ctx.image_size,
                       ctx.num_channels), ctx.image_dtype)
    labels = np.full((ctx.batch_size,), ctx.input_pipeline_id +
                     2 * ctx.is_training, np.int64)
    while True:
        yield images, labels


RELEASE = threading.Event()  # lets the in-process stuck sources go


def hanging_source(ctx):
    """Makes no first batch (a dead mount, a pool that never answers)."""
    RELEASE.wait()
    yield from python_loader.synthetic_source(ctx)


def stalling_source(ctx):
    """One good batch, then nothing."""
    batches = python_loader.synthetic_source(ctx)
    yield next(batches)
    RELEASE.wait()
    yield from batches


def call_failing_source(ctx):
    raise KeyError("no such split")


NOT_CALLABLE = 3


def recording_source(ctx):
    """synthetic_source that records its pipeline id in data_dir."""
    path = os.path.join(ctx.config.data_dir,
                        f"pipeline-{ctx.input_pipeline_id}")
    with open(path, "w") as f:
        f.write(f"{ctx.input_pipeline_id} of {ctx.num_input_pipelines}")
    return python_loader.synthetic_source(ctx)


def pipeline_source(ctx):
    """Labels = this pipeline's id, so the batches say who made them."""
    images = np.zeros((ctx.batch_size, ctx.image_size, ctx.image_size,
                       ctx.num_channels), ctx.image_dtype)
    labels = np.full((ctx.batch_size,), ctx.input_pipeline_id, np.int32)
    while True:
        yield images, labels


def reused_buffer_source(ctx):
    """Yields one page-aligned buffer over and over, refilled in place with
    the batch's number (as a loader recycling pinned buffers does): on the
    CPU, JAX adopts such a buffer without copying it, so a feed that kept
    it would see every queued batch change."""
    import mmap
    shape = (ctx.batch_size, ctx.image_size, ctx.image_size,
             ctx.num_channels)
    nbytes = int(np.prod(shape)) * np.dtype(ctx.image_dtype).itemsize
    images = np.frombuffer(mmap.mmap(-1, nbytes), ctx.image_dtype)
    images = images.reshape(shape)
    labels = np.zeros((ctx.batch_size,), np.int32)
    k = 0
    while True:
        images[...] = k
        labels[...] = k
        yield images, labels
        k += 1


def two_batch_source(ctx):
    """Ends after two batches (a training source must be endless)."""
    batches = python_loader.synthetic_source(ctx)
    yield next(batches)
    yield next(batches)
