"""Real data for the JAX backend: host batches copied to the devices one
step ahead, with SyntheticFeed's interface (`next()`, `close()`).

Two producers of this process's batches: `builder: records` decodes in
input worker processes (data/feeds/shm_workers.py) running the records
reader's `worker_examples` over this process's files; `builder: python`
calls the user's source (data/feeds/python_batches.py), one per-replica
batch per local device per step. A thread takes the next batch, makes it a
global array (jax.make_array_from_process_local_data, sharded over the
batch axis) and prepares it with one small jitted function: uint8 images
cast and normalised (mean_subtract, standardize: contracts/imagenet.py)
to the dataset's dtype, the model's input dtype, and labels one-hot when
`one_hot`. That runs outside the train step, so the step is the same XLA
program on synthetic and real data, and one step ahead, so its cost hides
under the running step; the worker's slot is given back once the device
holds its copy. With `decode: gpu_trainer` the workers pack their batches'
JPEGs undecoded and TrainerDecode decodes their windows with one
nvImageCodec decoder in this process, a batch's decoder call beside the
resizes of the batch before.

An evaluation feed reads a fresh pass for each evaluation (as Keras'
evaluate on TensorFlow) and says so in one line when a pass holds fewer
batches than the evaluation takes. Failures are the producers' one-line
errors (InputWorkerError, SourceError), raised in the training thread.
"""

from __future__ import annotations

import queue
import threading
from typing import (
    Any,
    Callable,
    Dict,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import numpy as np
from absl import logging

from official_bench.config import ConfigError, DatasetConfig
from official_bench.config.backends import GPU_DECODES
from official_bench.contracts import record_names
from official_bench.contracts.imagenet import (
    IMAGENET_MEAN_RGB,
    IMAGENET_STD_RGB,
)
from official_bench.data.feeds import python_batches
from official_bench.data.feeds.batch_spec import numpy_dtype
from official_bench.data.feeds.shm_workers import (
    Batch,
    BatchShape,
    InputWorkerError,
    Source,
    WorkerPool,
    crowded_workers,
    resolve_workers,
)
from official_bench.host.probes import usable_cores

PREFETCH = 2
DECODE_THREADS = 8  # decode: gpu_trainer's resize threads per GPU, at most
AHEAD = 3  # decode: gpu_trainer's batches in flight: read, decoded, resized
# decode: gpu_trainer: what a worker decodes itself (JPEGs that do not fit
# a packed batch, its worker_decode_share of them, a pass's last partial
# batch): nvImageCodec's CPU decoder, so no worker holds a CUDA context.
WORKER_WINDOW_DECODER = "nvimgcodec_cpu"
# A feed's own one-line failures (not a lost peer's).
INPUT_ERRORS = (InputWorkerError, python_batches.SourceError)
RECORDS_EXAMPLES = \
    "official_bench.data.records.host_examples:worker_examples"
_ENDED = object()  # a producer's end, passed on by the feeds' threads


def channel_constants(channels: int):
    """The ImageNet mean and std (float32) for 3 channels, or their
    averages for 1, as data/preprocessing.normalize takes them."""
    mean = np.asarray(IMAGENET_MEAN_RGB, np.float32)
    std = np.asarray(IMAGENET_STD_RGB, np.float32)
    if channels == 1:
        return mean.mean(keepdims=True), std.mean(keepdims=True)
    return mean, std


def normalize(xp, images, ds: DatasetConfig):
    """uint8 images -> (x - mean) / std as configured, computed in float32
    and cast to ds.dtype; `xp` is jax.numpy (or numpy, in tests)."""
    mean, std = channel_constants(ds.num_channels)
    x = images.astype(xp.float32)
    if ds.mean_subtract:
        x = x - mean
    if ds.standardize:
        x = x / std
    return x.astype(numpy_dtype(ds.dtype))


def prepare_fn(jax, ds: DatasetConfig, sharding, uint8: bool):
    """The jitted (images, labels) -> (model input, labels) on the
    devices, keeping the batch sharding."""
    jnp = jax.numpy

    def prepare(images, labels):
        if uint8:
            images = normalize(jnp, images, ds)
        labels = labels.astype(jnp.int32)
        if ds.one_hot:
            labels = jax.nn.one_hot(labels, ds.num_classes,
                                    dtype=jnp.float32)
        return images, labels
    return jax.jit(prepare, out_shardings=(sharding, sharding))


class PythonBatches:
    """`builder: python`: the source's checked per-replica batches, `per_step`
    of them joined into this process's batch."""

    def __init__(self, ds: DatasetConfig, key: str, per_replica: int,
                 per_step: int, training: bool, seed: int,
                 process_index: int, process_count: int):
        fn = python_batches.load_source(ds.python_source,
                                        f"{key}.python_source")
        ctx = python_batches.source_context(
            ds, per_replica, training, seed, process_index, process_count)
        self._batches = python_batches.checked_batches(
            fn, ds.python_source, ctx,
            python_batches.batch_spec(ds, per_replica),
            ds.python_timeout_seconds, key)
        self._per_step = per_step

    def next(self) -> Optional[Batch]:
        parts = []
        for _ in range(self._per_step):
            try:
                parts.append(next(self._batches))
            except StopIteration:
                return None
        if len(parts) == 1:
            return Batch(*parts[0])
        return Batch(np.concatenate([p[0] for p in parts]),
                     np.concatenate([p[1] for p in parts]))

    def close(self) -> None:
        try:
            self._batches.close()
        except ValueError:
            pass  # still running in the copy thread: it sees the stop


class HostFeed:
    """Global (images, labels) arrays for each step, sharded over the
    mesh's batch axis, from `make()`'s producer (next() -> Batch or None
    at its end, close()). With `steps_per_pass` (evaluation) each pass is
    a new producer and takes that many batches; `total_steps` (training)
    is named when the producer ends before them."""

    def __init__(self, jax, make: Callable[[], Any], sharding,
                 ds: DatasetConfig, key: str, uint8: bool,
                 steps_per_pass: Optional[int] = None,
                 info: Optional[Dict[str, Any]] = None,
                 total_steps: Optional[int] = None):
        self._jax, self._make, self._sharding = jax, make, sharding
        self.key, self._ds = key, ds
        self.info: Dict[str, Any] = dict(info or {})
        self._prepare = prepare_fn(jax, ds, sharding, uint8)
        self._steps_per_pass, self._total_steps = steps_per_pass, total_steps
        self._producer: Any = None
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        # Held while a batch is copied from its shared-memory slot:
        # _end_pass takes it before the producer unmaps the slots.
        self._copying = threading.Lock()
        self._queue: "queue.Queue" = queue.Queue(maxsize=PREFETCH)
        self._served = 0
        if steps_per_pass is None:
            self._start()  # training: decoding starts while XLA compiles

    def _start(self) -> None:
        # In the calling (main) thread: workers die with the thread that
        # started them (host/processes.die_with_parent).
        self._producer = self._make()
        self._stop = threading.Event()
        self._queue = queue.Queue(maxsize=PREFETCH)
        self._served = 0
        self._thread = threading.Thread(
            target=self._copy_ahead,
            args=(self._producer, self._queue, self._stop),
            name=f"{self.key}-host-copy", daemon=True)
        self._thread.start()

    def _to_devices(self, host: Batch):
        make = self._jax.make_array_from_process_local_data
        images = make(self._sharding, host.images)
        labels = make(self._sharding, host.labels)
        out = self._prepare(images, labels)
        # On the CPU, JAX adopts a page-aligned host buffer (a shared-
        # memory slot, a source's recycled array) without copying it;
        # prepare's outputs are new buffers: once they are ready, the
        # slot may be reused (tests/unit/jax_backend/test_host_feed.py).
        self._jax.block_until_ready(out)
        return out

    def _copy_ahead(self, producer, out: "queue.Queue",
                    stop: threading.Event) -> None:
        limit, made = self._steps_per_pass, [0]

        def take():
            if limit is not None and made[0] >= limit:
                return _ENDED  # unread: next() has ended the pass
            made[0] += 1
            host = producer.next()
            return _ENDED if host is None else host

        def copy(host: Batch):
            with self._copying:
                if stop.is_set():  # the producer may be closed already
                    raise InputWorkerError("closed")
                try:
                    return self._to_devices(host)
                finally:
                    host.release()
        _stage(take, copy, out, stop)

    def next(self):
        """The next step's (images, labels) on the devices."""
        if self._thread is None:
            self._start()
        item = self._queue.get()
        if isinstance(item, BaseException):  # handed to this thread
            self._end_pass()
            raise item
        if item is _ENDED:
            served = self._served
            self._end_pass()
            raise InputWorkerError(self._ended_message(served))
        self._served += 1
        if self._steps_per_pass and self._served >= self._steps_per_pass:
            self._end_pass()
        return item

    def _ended_message(self, served: int) -> str:
        if self._steps_per_pass is None:  # the TensorFlow trainer's words
            return python_batches.ran_out_message(self._ds, self.key, served,
                                                  self._total_steps)
        return (f"official_bench: {self.key}: one pass gave {served} "
                f"batches, the evaluation takes {self._steps_per_pass} "
                "(evaluation.steps, else this dataset's num_examples / the "
                "global batch): is num_examples right for these files?")

    def _end_pass(self) -> None:
        """Stops the copy thread and the producer (its workers)."""
        if self._thread is None:
            return
        self._stop.set()
        self.info.update(self.stats())
        with self._copying:  # no copy reads a slot once they are unmapped
            self._producer.close()
        self._thread.join(timeout=10)
        self._thread = None

    def stats(self) -> Dict[str, Any]:
        """What the producer's workers did: images, CPU seconds."""
        pool = getattr(self._producer, "pool", self._producer)
        if not isinstance(pool, WorkerPool):
            return {}
        cpu = pool.cpu_seconds()
        out = {"images_decoded": pool.images_made,
               "worker_cpu_seconds": round(cpu, 3),
               "decode_images_per_cpu_second": round(
                   pool.images_made / cpu, 1) if cpu else None}
        if pool is not self._producer:
            out["images_decoded_in_trainer"] = self._producer.decoded
            out["decode_streams"] = len(self._producer.streams)
        return out

    def describe(self) -> Dict[str, Any]:
        """result.json's words for this input: builder, decoder, workers
        and what they did."""
        return dict(self.info, **(self.stats() if self._thread else {}))

    def close(self) -> None:
        self._end_pass()


def _put(out: "queue.Queue", item, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            out.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


def records_source(ds: DatasetConfig, files, training: bool, seed: int,
                   decoder: Optional[str] = None,
                   decode_devices: Sequence[int] = (0,),
                   pack_batch: int = 0) -> Source:
    """What each input worker runs: the records reader over `files` (as
    process_files gave them, with this process's share of their records
    where processes share files), decoding with `decoder` (default: the
    reader's) on the GPUs `decode_devices` where it is a GPU's; with
    `pack_batch` (decode: gpu_trainer) packing batches of that many for
    TrainerDecode."""
    from official_bench.data.records import host_examples
    return Source(RECORDS_EXAMPLES,
                  dict(ds=ds, files=list(files), training=training,
                       seed=seed, record_shard=tuple(getattr(
                           files, "record_shard", (0, 1))),
                       decoder=decoder or host_examples.DECODER,
                       decode_devices=tuple(decode_devices),
                       pack_batch=pack_batch),
                  tuple(files))


def decode_threads(gpus: int = 1) -> int:
    """decode: gpu_trainer's resize threads: the usable cores, at most
    DECODE_THREADS for each of the `gpus` it decodes on."""
    return max(1, min(DECODE_THREADS * gpus, usable_cores()))


class _Windows(NamedTuple):
    """A packed batch between TrainerDecode's stages: its new batch array
    (ready items in place), labels, items, tags, the Pending items'
    indices, their decoded windows and the (GPU, CUDA stream) of each
    decoder call that made them."""
    images: np.ndarray
    labels: np.ndarray
    items: list
    tags: list
    todo: List[int]
    windows: list
    streams: Tuple[Tuple[int, int], ...] = ()


class TrainerDecode:
    """decode: gpu_trainer: the workers' packed batches
    (data/records/packed_batch.py) decoded in this process by two threads
    in a pipeline: "decode" takes a batch (pool.next()), unpacks it into a
    new batch array, gives its slot back and decodes its windows in one
    decoder call; "finish" has `threads` threads resize and flip them into
    that array. So batch n+1's decoder call runs while batch n is resized.
    At most AHEAD batches are between pool.next() and next() (at batch 512
    and 224 pixels, 77 MB of crops each and, until resized, its windows:
    an estimated 140 MB for ImageNet's), handed out in the pool's order.
    Plain batches pass through. An image no decoder can read ends the run
    with its record's line and the skip hint; with `ds.skip_bad_records`
    it is logged and counted as the workers' bad records are (`skipped`:
    this process's count) and, the batch's size being static, its slot
    takes a copy of another image of the batch, with that image's label
    (on TensorFlow the next record takes its place). On a GPU each batch
    in flight has a CUDA stream of its own (`streams`, AHEAD + 1 in turn):
    nvImageCodec orders a decoder call on the stream it is given and
    copies each window on it, so on one shared stream a batch's copies
    would wait for the next batch's call, and that call for them; the
    finish thread waits for a batch's stream once before the resize
    threads copy its windows, so they do not each wait (CUDA spins a
    core through a wait) for its decoding. Where streams cannot be made
    (`own_streams` False, no driver) every batch shares the default
    stream, said once. With several GPUs (`devices`) each has a decoder
    and decodes its contiguous share of each batch's windows, the calls
    side by side (a thread each). Its failures are one-line
    InputWorkerErrors; close() stops both threads and the workers."""

    def __init__(self, pool: WorkerPool, decoder: str,
                 devices: Union[int, Sequence[int]], threads: int, key: str,
                 ds: Optional[DatasetConfig] = None,
                 own_streams: bool = True):
        from concurrent.futures import ThreadPoolExecutor

        from official_bench.data.records import record_problems
        self.pool, self.key, self._ds = pool, key, ds
        self._decoder = decoder
        self._devices = (devices,) if isinstance(devices, int) \
            else tuple(devices)
        self._rings = {d: decoder_streams(decoder, d, key) if own_streams
                       else [0] for d in self._devices}
        self._calls = 0  # batches decoded so far: batch n's streams
        self._calls_pool = ThreadPoolExecutor(
            len(self._devices), thread_name_prefix=f"{key}-decoders") \
            if len(self._devices) > 1 else None
        self.decoded = 0  # windows decoded here, of the batches handed out
        self.skipped = record_problems.SkippedRecords()  # skip_bad_records
        self._resize = ThreadPoolExecutor(threads,
                                          thread_name_prefix=f"{key}-resize")
        self._stop = threading.Event()
        self._reading = threading.Lock()  # a slot read vs close()
        self._ahead = threading.Semaphore(AHEAD)
        self._windows: "queue.Queue" = queue.Queue(maxsize=1)
        self._queue: "queue.Queue" = queue.Queue(maxsize=1)
        self._threads = [
            threading.Thread(target=_stage, daemon=True,
                             name=f"{key}-trainer-{name}",
                             args=(take, work, out, self._stop))
            for name, take, work, out in (
                ("decode", self._take, self._decode, self._windows),
                ("finish", lambda: _get(self._windows, self._stop),
                 self._finish, self._queue))]
        for thread in self._threads:
            thread.start()

    def _take(self):
        """The pool's next batch, once fewer than AHEAD are in flight;
        _ENDED at its end or on close()."""
        while not self._ahead.acquire(timeout=0.1):
            if self._stop.is_set():
                return _ENDED
        host = self.pool.next()
        return _ENDED if host is None else host

    def _decode(self, host: Batch):
        """The decode stage: a plain batch as (it, 0), a packed one as
        _Windows."""
        from official_bench.data.records import host_decode, packed_batch
        if not host.labels[0] & packed_batch.PACKED:
            return host, 0  # plain: the workers decoded it
        images = np.empty(host.images.shape, np.uint8)  # new: JAX may alias
        with self._reading:
            if self._stop.is_set():
                raise InputWorkerError("closed")
            try:
                items, tags = packed_batch.unpack(host.images, images)
            except packed_batch.PackError as e:
                raise InputWorkerError(
                    f"official_bench: {self.key}: a batch from the input "
                    f"workers is not a packed batch: {e}") from None
            finally:
                host.release()
        todo = [k for k, item in enumerate(items)
                if isinstance(item, host_decode.Pending)]
        calls = self._shares([items[k] for k in todo])
        self._calls += 1
        try:
            if self._calls_pool is None:
                windows = [host_decode.decode_windows(*call) for call in calls]
            else:
                windows = list(self._calls_pool.map(
                    lambda call: host_decode.decode_windows(*call), calls))
        except host_decode.DecoderUnavailable as e:
            raise self._decoder_failed(e) from None
        return _Windows(images, host.labels & ~packed_batch.PACKED, items,
                        tags, todo, [w for part in windows for w in part],
                        tuple((d, s) for _, _, d, s in calls))

    def _shares(self, pending: list) -> list:
        """decode_windows' arguments for each GPU: its contiguous share of
        `pending` and this batch's stream of its ring."""
        n, count = len(self._rings), len(pending)
        return [(pending[i * count // n:(i + 1) * count // n], self._decoder,
                 device, ring[self._calls % len(ring)])
                for i, (device, ring) in enumerate(self._rings.items())]

    @property
    def streams(self) -> List[int]:
        """Every CUDA stream the decoders use, GPU by GPU ([0]: the
        default stream)."""
        return [s for ring in self._rings.values() for s in ring]

    def _finish(self, got) -> Tuple[Batch, int]:
        """The finish stage: (the batch, how many windows it decoded
        here)."""
        if not isinstance(got, _Windows):
            return got
        from official_bench.data.records import host_decode
        from official_bench.host import cuda_driver
        try:  # one thread waits for the decoding, not each copy
            for device, stream in got.streams:
                if stream:
                    cuda_driver.synchronize(device, stream)
        except cuda_driver.CudaDriverError as e:
            raise self._decoder_failed(e) from None

        def place(k: int, window):
            crop = host_decode.finish_crop(got.items[k], window)
            if not isinstance(crop, host_decode.UndecodableImage):
                got.images[k] = crop
                return None
            return crop
        try:  # a window's copy from the GPU happens in place()
            failed = list(self._resize.map(place, got.todo, got.windows))
        except host_decode.DecoderUnavailable as e:
            raise self._decoder_failed(e) from None
        bad = [k for k, why in zip(got.todo, failed) if why is not None]
        if bad:
            self._settle(got, bad, failed[got.todo.index(bad[0])])
        return Batch(got.images, got.labels), len(got.todo) - len(bad)

    def _settle(self, got: _Windows, bad: List[int], why) -> None:
        """The batch's undecodable images (indices `bad`; `why`: the
        first's error): InputWorkerError naming the first, or with
        skip_bad_records each logged and counted and its slot filled with
        the next image of the batch that decoded (cyclically), label too;
        InputWorkerError where none did."""
        from official_bench.data.records import record_problems as words
        if self._ds is None or not self._ds.skip_bad_records:
            raise InputWorkerError(self._undecodable(
                got.items[bad[0]], got.tags[bad[0]], why) + words.SKIP_HINT)
        lines = [self._bad_line(got.items[k], got.tags[k]) for k in bad]
        for line in lines:
            words.log_skipped(self._ds.split, self.skipped, [line], 1)
        good = sorted(set(range(len(got.items))) - set(bad))
        if not good:
            raise InputWorkerError(
                f"official_bench: {self.key}: the trainer skipped all "
                f"{len(bad)} image(s) of a batch as bad (skip_bad_records: "
                f"true) and can make no batch of it; the last: {lines[-1]}")
        for k in bad:
            twin = next((j for j in good if j > k), good[0])
            got.images[k], got.labels[k] = got.images[twin], got.labels[twin]

    def _decoder_failed(self, e: Exception) -> InputWorkerError:
        return InputWorkerError(f"official_bench: {self.key}: the "
                                f"trainer's decoder failed: {e}")

    def _file(self, tag) -> str:
        files = self.pool.source.files
        return files[tag.file] if tag.file < len(files) else "its file"

    def _undecodable(self, item, tag, why) -> str:
        return (f"official_bench: {self.key}: record {tag.record} in "
                f"{self._file(tag)}: its JPEG ({len(item.data)} bytes) "
                f"cannot be decoded ({why})")

    def _bad_line(self, item, tag) -> str:
        """The workers' line for a record whose image does not decode."""
        from official_bench.data.records import (
            record_problems as words,
            record_sets,
        )
        layout = record_sets.layout_for(self._ds, self.pool.source.files,
                                        self.key)
        detail = words.undecodable(layout.image_key).format(len(item.data))
        return words.message_line(self._file(tag), tag.record, detail)

    def next(self) -> Optional[Batch]:
        item = _get(self._queue, self._stop)
        if self._stop.is_set():
            raise InputWorkerError(f"official_bench: {self.key}: "
                                   "the input workers were closed")
        if isinstance(item, BaseException):
            raise item
        if item is _ENDED:
            return None
        self._ahead.release()
        batch, decoded = item
        self.decoded += decoded
        return batch

    def close(self) -> None:
        """Stops both stages (the resizes not yet started dropped) and the
        workers; each thread is waited for 10 s at most."""
        self._stop.set()
        with self._reading:
            self.pool.close()
        self._resize.shutdown(wait=False, cancel_futures=True)
        if self._calls_pool is not None:
            self._calls_pool.shutdown(wait=False, cancel_futures=True)
        for thread in self._threads:
            thread.join(timeout=10)


def decoder_streams(decoder: str, device: int, key: str) -> List[int]:
    """TrainerDecode's CUDA streams: AHEAD + 1 for a GPU decoder (a batch
    in flight each), else [0], the default stream (for a GPU decoder with
    a line saying why)."""
    from official_bench.data.records import host_decode
    from official_bench.host import cuda_driver
    if host_decode.WINDOW_DECODERS.get(decoder) != "gpu":
        return [0]
    try:
        return cuda_driver.new_streams(device, AHEAD + 1)
    except cuda_driver.CudaDriverError as e:
        logging.warning(
            "official_bench: %s: the trainer's decoder shares CUDA's "
            "default stream (%s), so each batch's copies to the host wait "
            "for the next batch's decoding", key, e)
        return [0]


def _get(source: "queue.Queue", stop: threading.Event):
    """The next item on `source`; _ENDED once `stop` is set."""
    while not stop.is_set():
        try:
            return source.get(timeout=0.1)
        except queue.Empty:
            continue
    return _ENDED


def _stage(take: Callable[[], Any], work: Callable[[Any], Any],
           out: "queue.Queue", stop: threading.Event) -> None:
    """A feed's thread (HostFeed's copy, TrainerDecode's two stages):
    work(item) of each item take() gives, in order, onto `out`; _ENDED
    and a failure (the exception, its own or the stage's before) are
    passed on and end it, as does `stop`."""
    try:
        while not stop.is_set():
            item = take()
            if item is _ENDED or isinstance(item, BaseException):
                _put(out, item, stop)
                return
            _put(out, work(item), stop)
    except BaseException as e:  # handed to next()
        if not stop.is_set():
            _put(out, e, stop)


def trainer_decode_maker(source: Source, ds: DatasetConfig, batch: int,
                         key: str, workers: int, decoder: str,
                         devices: Union[int, Sequence[int]], threads: int
                         ) -> Callable[[], TrainerDecode]:
    """A function starting `workers` packing input workers for `source`
    and the TrainerDecode over them, decoding on `devices`."""
    make_pool = pool_maker(source, ds, batch, key, workers)
    return lambda: TrainerDecode(make_pool(), decoder, devices, threads,
                                 key, ds)


def workers_decoder(jax, ds: DatasetConfig, key: str) -> Tuple[str, tuple]:
    """(decoder, GPU ordinals) the input workers decode `ds` with:
    `decode: cpu_window` is nvImageCodec's CPU decoder, `gpu` nvImageCodec
    on this process's GPUs, workers shared out over them (`gpu_trainer`:
    the trainer's decoders, one on each). Raises
    ConfigError without the CPU path's modules (simplejpeg, OpenCV: every
    decode needs them), without a GPU, without nvImageCodec and nvJPEG,
    or where its decoder does not start on one of them."""
    from official_bench.data.records import host_decode, host_examples
    try:
        host_decode.check_cpu_path()
        if ds.decode == "cpu":
            return host_examples.DECODER, (0,)
        if ds.decode == "cpu_window":
            kind, ids = "cpu", (0,)
        else:
            kind, ids = "gpu", _gpu_ids(jax, ds, key)
        for device in ids:  # the workers' decoders will start too
            host_decode.check_decoder(kind, device)
    except host_decode.DecoderUnavailable as e:
        raise ConfigError(f"{key}.decode: {ds.decode!r}: {e}") from e
    return ("nvimgcodec_cpu" if kind == "cpu" else "nvimgcodec"), ids


def _gpu_ids(jax, ds: DatasetConfig, key: str) -> tuple:
    """This process's GPU ordinals; ConfigError where it has none."""
    gpus = [d for d in jax.local_devices() if d.platform == "gpu"]
    if not gpus:
        raise ConfigError(
            f"{key}.decode: {ds.decode!r} needs a GPU; this process's JAX "
            "devices are "
            f"{', '.join(str(d) for d in jax.local_devices())}")
    return tuple(d.local_hardware_id for d in gpus)


def pool_maker(source: Source, ds: DatasetConfig, batch: int, key: str,
               workers: int) -> Callable[[], WorkerPool]:
    """A function starting `workers` input workers for `source`."""
    shape = BatchShape(batch, ds.image_size, ds.image_size, ds.num_channels)
    return lambda: WorkerPool(source, shape, workers, key,
                              ds.worker_timeout_seconds)


def records_info(ds: DatasetConfig, decoder: str, workers: int,
                 files: int, gpus: int = 1) -> Dict[str, Any]:
    """result.json's words for a records feed before it runs; decode:
    gpu_trainer adds its resize threads (for its `gpus`) and the
    workers' share."""
    info = {"builder": "records", "decoder": decoder, "decode": ds.decode,
            "num_workers": workers, "files": files}
    if ds.decode == "gpu_trainer":
        info["decode_threads"] = decode_threads(gpus)
        info["worker_decode_share"] = ds.worker_decode_share
    return info


def records_feed(jax, ds: DatasetConfig, local_batch: int, sharding, *,
                 training: bool, seed: int, process_index: int,
                 process_count: int, steps_per_pass: Optional[int] = None,
                 files: Optional[List[str]] = None,
                 total_steps: Optional[int] = None,
                 decoder: Optional[Tuple[str, tuple]] = None) -> HostFeed:
    """`builder: records` on JAX: this process's files (`files` where the
    caller found them already), decoded by `ds.num_workers` input
    workers (with `decoder`, where the caller has it from
    workers_decoder already)."""
    from official_bench.data.records import host_examples
    key = "train_dataset" if training else "validation_dataset"
    if files is None:
        files = host_examples.process_files(ds, process_index,
                                            process_count, training)
    workers = resolve_workers(ds.num_workers)
    crowded = crowded_workers(workers, key)
    if crowded:
        logging.warning("%s", crowded)
    decoder, gpus = decoder or workers_decoder(jax, ds, key)
    logging.info("official_bench: %s: %d record file(s) for process %d of "
                 "%d %s, %d input worker(s), decoder %s%s", key, len(files),
                 process_index, process_count, record_names.span(files),
                 workers, decoder, f" on GPU {', '.join(map(str, gpus))}"
                 if ds.decode in GPU_DECODES else "")
    info = records_info(ds, decoder, workers, len(files), len(gpus))
    if ds.decode == "gpu_trainer":  # the workers pack, this process decodes
        make = trainer_decode_maker(
            records_source(ds, files, training, seed, WORKER_WINDOW_DECODER,
                           pack_batch=local_batch), ds, local_batch, key,
            workers, decoder, gpus, info["decode_threads"])
    else:
        make = pool_maker(records_source(ds, files, training, seed, decoder,
                                         gpus), ds, local_batch, key, workers)
    return HostFeed(jax, make, sharding, ds, key, uint8=True,
                    steps_per_pass=steps_per_pass, info=info,
                    total_steps=total_steps)


def check_eval_pass(files, batch: int, steps: int,
                    key: str = "validation_dataset") -> None:
    """Before training, one process: raises ConfigError when one pass over
    its validation `files` cannot give the evaluation's `steps` batches of
    `batch` (their records, 16 bytes read per record, over the batch: the
    most the feed can give). The feed would say so at the first
    evaluation, after the training it waited for. A truncated, corrupt or
    unreadable file raises its bad-record line (BadRecordFile) first, as
    the evaluation would after the training (host_examples.records_of;
    with skip_bad_records a warning names it)."""
    from official_bench.data.records import host_examples, set_counts
    problem = set_counts.eval_pass_problem(
        key, f"one pass over its {len(files)} file(s)",
        host_examples.records_of(files), batch, steps)
    if problem:
        raise ConfigError(problem)


def python_feed(jax, ds: DatasetConfig, per_replica: int, local_replicas: int,
                sharding, *, training: bool, seed: int, process_index: int,
                process_count: int, steps_per_pass: Optional[int] = None,
                total_steps: Optional[int] = None) -> HostFeed:
    """`builder: python` on JAX: the source's numpy batches (in
    `ds.dtype`), `local_replicas` per step."""
    key = "train_dataset" if training else "validation_dataset"
    # Load it now: a bad spec is a ConfigError before the first step.
    python_batches.load_source(ds.python_source, f"{key}.python_source")

    def make():
        return PythonBatches(ds, key, per_replica, local_replicas, training,
                             seed, process_index, process_count)
    return HostFeed(jax, make, sharding, ds, key, uint8=False,
                    steps_per_pass=steps_per_pass,
                    info={"builder": "python",
                          "python_source": ds.python_source},
                    total_steps=total_steps)
