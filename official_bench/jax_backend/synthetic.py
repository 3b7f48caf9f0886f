"""Synthetic ImageNet-shaped batches for the JAX backend.

The same content as the TensorFlow backend's (data/synthetic.py): images
random normals in the dataset's dtype, labels random classes (one-hot when
`one_hot`), one batch per process seeded by its index and repeated every
step. Where it lives is `synthetic_location`: `device` puts the global
batch on the devices once (each keeps its shard; no copy per step,
tensorpack's "gpu" location); `host` keeps it a numpy array that is copied
to the devices for every step, as the host pipelines of DLPerf and Model
Garden did, by a thread that copies the next batch while the current step
runs (two in flight).
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Optional, Tuple

import numpy as np

from official_bench.config import DatasetConfig

PREFETCH = 2


def host_batch(ds: DatasetConfig, batch_size: int, seed: int,
               stream: int) -> Tuple[np.ndarray, np.ndarray]:
    """(images, labels) as numpy arrays; `stream` picks the random stream
    (the process index), so processes hold different batches."""
    rng = np.random.default_rng([seed, stream])
    shape = (batch_size, ds.image_size, ds.image_size, ds.num_channels)
    images = rng.standard_normal(shape, dtype=np.float32).astype(
        _numpy_dtype(ds.dtype))
    labels = rng.integers(0, ds.num_classes, batch_size).astype(np.int32)
    if ds.one_hot:
        labels = np.eye(ds.num_classes, dtype=np.float32)[labels]
    return images, labels


def _numpy_dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return np.dtype(name)


class SyntheticFeed:
    """Global (images, labels) arrays for each step, sharded over the mesh's
    batch axis; `next()` gives the next step's."""

    def __init__(self, jax, ds: DatasetConfig, local_batch: int, sharding,
                 seed: int, process_index: int):
        self._jax, self._sharding = jax, sharding
        self.location = ds.synthetic_location
        self._host = host_batch(ds, local_batch, seed, process_index)
        self._resident: Optional[Tuple[Any, Any]] = None
        self._queue: "queue.Queue" = queue.Queue(maxsize=PREFETCH)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.error: Optional[BaseException] = None
        if self.location == "device":
            self._resident = self._to_devices()

    def _to_devices(self):
        make = self._jax.make_array_from_process_local_data
        return tuple(make(self._sharding, part) for part in self._host)

    def _copy_ahead(self) -> None:
        try:
            while not self._stop.is_set():
                batch = self._to_devices()
                while not self._stop.is_set():
                    try:
                        self._queue.put(batch, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as e:  # handed to the training thread
            self.error = e
            self._queue.put(None)

    def next(self):
        """The next step's (images, labels) on the devices."""
        if self._resident is not None:
            return self._resident
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._copy_ahead, name="synthetic-host-copy",
                daemon=True)
            self._thread.start()
        batch = self._queue.get()
        if batch is None:
            raise RuntimeError(
                f"official_bench: copying the synthetic batch to the devices "
                f"failed: {self.error}") from self.error
        return batch

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
