"""`builder: python`'s batches without TensorFlow: the source called, its
batches waited for and checked.

`python_source: "package.module:function"` names a function called once per
input pipeline with a `SourceContext`; it returns an iterable of (images,
labels) numpy batches of the per-replica batch size (batch_spec.py). The
source runs in its own thread and each batch is waited for at most
`python_timeout_seconds`, so a source stuck in user code stops the run with
one line instead of hanging it; every failure is a SourceError naming the
source ("official_bench: python_source <spec>: ..."). TensorFlow-free: the
TensorFlow backend wraps these batches in tf.data (python_source.py), the
JAX backend copies them to its devices (jax_backend/host_feed.py).
"""

from __future__ import annotations

import dataclasses
import importlib
import queue
import threading
from typing import Callable, Iterator, Optional, Tuple

import numpy as np

from official_bench.config import ConfigError, DatasetConfig
from official_bench.config.paths import source_import_message
from official_bench.contracts import dtypes
from official_bench.data.feeds.batch_spec import (
    BadBatch,
    BatchSpec,
    check_batch,
)


@dataclasses.dataclass(frozen=True)
class SourceContext:
    """What a source needs to make this pipeline's batches."""
    batch_size: int  # per replica
    image_size: int
    num_channels: int
    num_classes: int
    image_dtype: str  # the numpy dtype name batches must have
    is_training: bool
    seed: int
    input_pipeline_id: int  # this worker's index among the pipelines
    num_input_pipelines: int
    config: DatasetConfig  # data_dir, filenames, split, ... as configured


class SourceError(RuntimeError):
    """A Python source failed while making batches."""


def image_dtype(ds: DatasetConfig) -> str:
    """The dtype batches carry: uint8 with transfer_uint8, else ds.dtype."""
    return "uint8" if ds.transfer_uint8 else dtypes.tf_name(ds.dtype)


def batch_spec(ds: DatasetConfig, batch_size: int) -> BatchSpec:
    return BatchSpec(batch_size, ds.image_size, ds.num_channels,
                     ds.num_classes, image_dtype(ds))


def load_source(spec: str, key: str = "train_dataset.python_source"
                ) -> Callable:
    """The function `spec` names, or a ConfigError saying what is wrong."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's
        raise ConfigError(source_import_message(
            key, spec, module_name, f"{type(e).__name__}: {e}")) from e
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        raise ConfigError(f"{key} {spec!r}: module {module_name!r} has no "
                          f"callable {attr!r}")
    return fn


_NEXT, _STOP = "next", "stop"


class _Failed(Exception):
    """The source raised; `stage` is "call" or "batch"."""

    def __init__(self, stage: str, error: Exception):
        super().__init__(stage)
        self.stage, self.error = stage, error


def _serve(fn: Callable, ctx: SourceContext, requests: queue.Queue,
           results: queue.Queue) -> None:
    """The source's own thread: calls it, then makes one batch per request.

    Results are (kind, value): ("item", batch), ("end", None),
    ("call", error) when calling fn failed, ("batch", error) when the
    iterable raised.
    """
    iterator = None
    while requests.get() == _NEXT:
        try:
            if iterator is None:
                stage = "call"
                iterator = iter(fn(ctx))
            stage = "batch"
            results.put(("item", next(iterator)))
        except StopIteration:
            results.put(("end", None))
            return
        except Exception as e:  # noqa: BLE001 - reported by the consumer
            results.put((stage, e))
            return


def _items(fn: Callable, ctx: SourceContext, timeout: Optional[float],
           late: Callable[[int], str]) -> Iterator[tuple]:
    """What the source yields, each item waited for at most `timeout` s
    (None: for ever).

    Why a thread: a source stuck in user code (a dead mount, a pool that
    never answers, a generator that never yields) cannot be interrupted,
    but a queue with a deadline can be waited on. On a timeout the stuck
    thread (a daemon) is left behind and SourceError(late(index)) is
    raised; when the consumer stops early, the thread is told to stop.
    """
    requests, results = queue.Queue(), queue.Queue()
    threading.Thread(target=_serve, args=(fn, ctx, requests, results),
                     name="python_source", daemon=True).start()
    index = 0
    try:
        while True:
            requests.put(_NEXT)
            try:
                kind, value = results.get(timeout=timeout)
            except queue.Empty:
                raise SourceError(late(index)) from None
            if kind == "end":
                return
            if kind != "item":
                raise _Failed(kind, value)
            index += 1
            yield value
    finally:
        requests.put(_STOP)


def checked_batches(fn: Callable, spec: str, ctx: SourceContext,
                    bspec: BatchSpec, timeout: Optional[float] = 300.0,
                    key: str = "train_dataset"
                    ) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
    """Checked batches; any failure becomes one line naming the source.
    Each batch is waited for at most `timeout` s (None: for ever, as the
    ZMQ producer waits: zmq_producer.py).

    The message carries the "official_bench:" prefix because tf.data wraps
    it in its own error, and the CLI picks our line out of that.
    """
    origin = f"official_bench: python_source {spec}"

    def late(index: int) -> str:
        what = (f"made no batch {index} within {timeout:g} s"
                if index else f"made no first batch within {timeout:g} s "
                              "of being called")
        return (f"{origin}: {what} ({key}.python_timeout_seconds); is it "
                "blocked (a lock, a dead mount, a worker pool that never "
                "answers)?")
    index = 0
    try:
        for item in _items(fn, ctx, timeout, late):
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise SourceError(f"{origin}: batch {index} must be a pair "
                                  f"(images, labels), got "
                                  f"{type(item).__name__}")
            try:
                images, labels = check_batch(bspec, item[0], item[1],
                                             f"{origin}: batch {index}")
            except BadBatch as e:
                raise SourceError(str(e)) from None
            index += 1
            yield images, labels
    except _Failed as f:
        e = f.error
        if f.stage == "call":
            raise SourceError(f"{origin}: calling it failed: "
                              f"{type(e).__name__}: {e}") from e
        raise SourceError(f"{origin}: batch {index} raised "
                          f"{type(e).__name__}: {e}") from e


def source_context(ds: DatasetConfig, batch_size: int, is_training: bool,
                   seed: int, pipeline_id: int, num_pipelines: int
                   ) -> SourceContext:
    """The context a source is called with, for one input pipeline."""
    return SourceContext(
        batch_size, ds.image_size, ds.num_channels, ds.num_classes,
        image_dtype(ds), is_training, seed, pipeline_id, num_pipelines, ds)


def ran_out_message(ds: DatasetConfig, key: str, step: int,
                    total: Optional[int] = None) -> str:
    """The one line for a training input that ended after `step` steps (of
    `total`, where known), on either backend: a source that ends (a
    python_source, most often) must not give a result for fewer steps."""
    source = f"{key}.builder {ds.builder}" + (
        f", python_source {ds.python_source}" if ds.builder == "python"
        else "")
    of = "" if total is None else f" of {total}"
    return (f"official_bench: the training input ran out after step {step}"
            f"{of} ({source}): a training source must be endless (the "
            "trainer takes train.steps batches); no result written")
