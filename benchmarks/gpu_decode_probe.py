"""Can the GPU's JPEG decoder feed an H200? (issue 46: the GPU decode option
CPU decoding needs; BENCHMARKS.md, "Real records against synthetic data on
an H200"). nvImageCodec's decoders (the hardware JPEG engines, nvJPEG's CUDA
decoder) decode ImageNet-sized JPEGs in batches with the train crop's window as
the region of interest, against simplejpeg on one core doing what an input
worker does (the whole image, then the window): images per second, the
process's CPU seconds per image (every thread, nvImageCodec's too), images it
could not decode, and the mean absolute difference from simplejpeg's pixels of
the same window (0-255 units). Then an input worker's whole per-image work
(window, decode, resize, flip) with simplejpeg and with `decode: gpu`'s
decoder, one image a call and, as the workers decode, a group of
host_examples.WINDOW_GROUP a call. Then why 15 `decode: gpu` workers fed
less than one alone (BENCHMARKS.md, "`decode: gpu` on the H200"): that
worker path in N processes at once, each its own CUDA context (simplejpeg
beside it shows what the CPUs' cores and hyperthreads do without a GPU;
`--jax_step`, a JAX stand-in for the trainer's step timed alone and
beside them), and the trainer path: one process, one decoder, `--batch`
windows a call, resized by T threads. Then `decode: gpu_trainer`'s own
code (jax_backend/host_feed.TrainerDecode, its decoder call of a batch
beside the resizes of the one before) over packed batches in memory,
against the same work on one thread as before that pipeline, with the
largest T (stage trainer_decode), and with `--worker_shares` the same
with that share of each batch's JPEGs decoded beforehand, as
worker_decode_share's workers do (their part not timed). With
`--blocking_sync` each process of the processes stage first sets its CUDA
waits to block instead of spin (host/cuda_driver.py: CUDA spins a core
through each wait of a process with one context), its rows marked so.

    python benchmarks/gpu_decode_probe.py --image_dir DIR [--batch 256]
        [--seconds 8] [--decoders hw,cuda] [--processes 1,8,15]
        [--trainer_threads 4,8] [--worker_shares 0,0.5] [--json OUT.json]

DIR is searched for *.JPEG / *.jpg (scripts/make_jpeg_folder.py makes
ImageNet-like ones). `--decoders cpu` with `--worker_decoders
simplejpeg,nvimgcodec_cpu` runs nvImageCodec's CPU decoder with no GPU,
which checks this script's flow. `--stages` picks the parts, `--append`
adds to an earlier call's --json (scripts/gpu_decode_probe.sh's stages).
Needs the nvidia-nvimgcodec-cu13 and nvidia-nvjpeg wheels; TensorFlow-free.
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import queue
import random
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from official_bench.data.records import (  # noqa: E402
    crop_sampling,
    host_decode,
    host_examples,
)
from official_bench.host import cuda_driver  # noqa: E402
from official_bench.host.atomic import write_text_atomic  # noqa: E402

# nvImageCodec 0.9 registers nvJPEG's CUDA decoder as HYBRID_CPU_GPU.
KINDS = {"hw": "HW_GPU_ONLY", "cuda": "HYBRID_CPU_GPU", "cpu": "CPU_ONLY"}
CHECKED = 16  # images per decoder compared with simplejpeg
STAGES = ("decoders", "worker", "processes", "trainer", "trainer_decode")
READY_S = 90.0  # the most a process may take to read and start its decoder


def jpeg_paths(image_dir: str, limit: int):
    """The first `limit` *.JPEG / *.jpg under `image_dir`, sorted."""
    paths = sorted(p for p in glob.glob(os.path.join(image_dir, "**", "*"),
                                        recursive=True)
                   if p.lower().endswith((".jpeg", ".jpg")))[:limit]
    if not paths:
        raise SystemExit(f"gpu_decode_probe: no *.JPEG or *.jpg under "
                         f"{image_dir}")
    return paths


def load(paths, seed: int):
    """[(bytes, window)] of the JPEGs at `paths`, each with a train
    window."""
    rng = random.Random(seed)
    out = []
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        height, width = host_decode.jpeg_header(data)[:2]
        out.append((data, crop_sampling.train_window(height, width, [], rng)))
    return out


def simplejpeg_crop(data: bytes, window) -> np.ndarray:
    """What a worker decodes: the whole image (TensorFlow's integer-fast
    DCT), then the window."""
    import simplejpeg
    y, x, h, w = window
    return simplejpeg.decode_jpeg(data, "RGB", fastdct=True,
                                  strict=False)[y:y + h, x:x + w]


def cpu_rate(images, seconds: float) -> dict:
    """simplejpeg on this thread: images per CPU-second."""
    count, cpu0 = 0, time.process_time()
    while time.process_time() - cpu0 < seconds:
        data, window = images[count % len(images)]
        simplejpeg_crop(data, window)
        count += 1
    cpu = time.process_time() - cpu0
    return {"decoder": "simplejpeg, 1 thread", "img_s": count / cpu,
            "cpu_ms_per_image": 1e3 * cpu / count, "failed": 0,
            "mad": None, "images": count}


def _syncer():
    """wait(decoded): waits for the GPU's work on a decoded batch, with
    cupy's device synchronise where it is there, else by copying the
    batch's last decoded image to the host. Chosen once, outside the
    timed loop."""
    try:
        import cupy
        sync = cupy.cuda.runtime.deviceSynchronize
        return lambda decoded: sync()
    except Exception:  # no cupy, or no GPU for it
        def copy_last(decoded):
            done = [image for image in decoded if image is not None]
            if done:
                done[-1].cpu()
        return copy_last


def nv_rate(nv, name: str, images, batch: int, seconds: float) -> dict:
    """One nvImageCodec decoder: batches of `batch` windows, timed."""
    kind = getattr(nv.BackendKind, KINDS[name])
    device = nv.NVIMGCODEC_DEVICE_CPU_ONLY if name == "cpu" else -1
    decoder = nv.Decoder(device_id=device, backends=[nv.Backend(kind)],
                         options=":fancy_upsampling=1 nvjpeg_cuda_decoder:"
                                 "hybrid_huffman_threshold=0")
    params = nv.DecodeParams(apply_exif_orientation=False)

    def streams(start: int):
        out = []
        for k in range(batch):
            data, (y, x, h, w) = images[(start + k) % len(images)]
            out.append(nv.CodeStream(data).get_sub_code_stream(
                region=nv.Region(y, x, y + h, x + w)))
        return out

    first = decoder.decode(streams(0), params=params)
    mads = []
    for k, image in enumerate(first[:CHECKED]):
        if image is None:
            continue
        got = np.asarray(image.cpu())
        want = simplejpeg_crop(*images[k])
        if got.shape != want.shape:
            raise SystemExit(f"gpu_decode_probe: {name}: image {k} came out "
                             f"{got.shape}, its window is {want.shape}")
        mads.append(float(np.abs(got.astype(np.int16) - want).mean()))
    count = failed = 0
    start = batch
    wait = _syncer()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        decoded = decoder.decode(streams(start), params=params)
        failed += sum(image is None for image in decoded)
        wait(decoded)
        count += batch
        start += batch
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    return {"decoder": f"nvImageCodec {name} ({KINDS[name]})",
            "img_s": count / wall, "cpu_ms_per_image": 1e3 * cpu / count,
            "failed": failed, "images": count,
            "mad": statistics.mean(mads) if mads else None}


def _start_crops(decoder: str, images, first: int, group: int):
    """host_decode.start_crop of images first.. first+group-1 (their
    windows, 224, every other one flipped): Pending for a window
    decoder's, else done."""
    crops = []
    for k in range(first, first + group):
        data, window = images[k % len(images)]
        crops.append(host_decode.start_crop(
            data, lambda h, w, window=window: window, 224, k % 2 == 0,
            decoder=decoder, dct_scaling=False))
    return crops


def _worker_call(decoder: str, images, first: int, group: int) -> int:
    """One call of a worker's decode of `group` images: the failures."""
    crops = _start_crops(decoder, images, first, group)
    pending = [c for c in crops if isinstance(c, host_decode.Pending)]
    if not pending:
        return 0
    done = host_decode.finish_crops(pending, decoder)
    return sum(isinstance(c, Exception) for c in done)


def worker_rate(decoder: str, images, seconds: float, group: int = 1
                ) -> dict:
    """An input worker's whole per-image work (host_decode.start_crop
    and finish_crops: the window decoded, resized to 224, flipped) with
    `decoder`, a window decoder taking `group` windows a call: per wall
    and per CPU second."""
    count = failed = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        failed += _worker_call(decoder, images, count, group)
        count += group
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    return {"decoder": f"worker path, {decoder}, {group} a call",
            "img_s": count / wall, "cpu_ms_per_image": 1e3 * cpu / count,
            "failed": failed, "mad": None, "images": count}


def _one_process(decoder: str, paths, seed: int, group: int,
                 seconds: float, spawned: float, barrier, results,
                 blocking: bool = False) -> None:
    """One of processes_rate's: its images read, its CUDA waits set to
    block (`blocking`), its decoder started (one call), then worker_rate
    after the barrier; its row, or its error, put on `results`."""
    error, waits = None, "CUDA's default"
    try:
        if blocking:
            why = cuda_driver.block_waits(0)
            waits = "blocking sync" if why is None else \
                f"blocking sync not set: {why}"
        images = load(paths, seed)
        _worker_call(decoder, images, 0, group)
        ready = time.time() - spawned
    except Exception as e:  # noqa: BLE001 - reported, as the others run
        error = f"{type(e).__name__}: {e}"
    try:
        barrier.wait(timeout=READY_S)
    except threading.BrokenBarrierError:
        error = error or f"another process was not ready in {READY_S:g} s"
    if error:
        results.put({"k": seed, "error": error})
        return
    row = worker_rate(decoder, images, seconds, group)
    results.put({**row, "k": seed, "ready_s": ready, "waits": waits})


def _collect(procs, results, seconds: float):
    """The processes' rows, then the processes ended (terminated if one
    hangs); one that put nothing is an error row."""
    rows, deadline = [], time.time() + READY_S + seconds + 30
    while len(rows) < len(procs):
        try:
            rows.append(results.get(timeout=max(0.1, deadline -
                                                time.time())))
        except queue.Empty:
            break
    for proc in procs:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()
            proc.join()
    said = {r["k"] for r in rows}
    return rows + [{"k": k, "error": "ended without a result (exit code "
                    f"{proc.exitcode})"}
                   for k, proc in enumerate(procs) if k not in said]


def jax_step():
    """A stand-in for the trainer's step: a jitted chain of 8 matmuls
    (4096 square in bfloat16 on a GPU, 128 elsewhere), compiled; each
    call runs it once to the end."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp
    size = 4096 if jax.default_backend() == "gpu" else 128
    x = jnp.full((size, size), 1.0 / size, jnp.bfloat16)
    chain = jax.jit(lambda a: jax.lax.fori_loop(
        0, 8, lambda _, b: jnp.tanh(b @ a), a))
    chain(x).block_until_ready()
    return lambda: chain(x).block_until_ready()


def step_ms(step, seconds: float) -> float:
    """`step`'s mean wall ms over `seconds`."""
    count, wall0 = 0, time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        step()
        count += 1
    return 1e3 * (time.perf_counter() - wall0) / count


def processes_rate(decoder: str, paths, n: int, seconds: float,
                   label: str = "", step=None, blocking: bool = False
                   ) -> dict:
    """worker_rate's loop in `n` spawned processes at once (each its own
    decoder: on a GPU, its own CUDA context, its waits blocking with
    `blocking`), each on its share of `paths`, timed together after a
    barrier: the total and each one's img/s, CPU ms per image (all
    processes' CPU over all their images; each one's), failures, the
    slowest start, how they waited; with `step` (jax_step), its ms beside
    them in this process, as the trainer's beside its workers."""
    group = host_examples.WINDOW_GROUP \
        if decoder in host_decode.WINDOW_DECODERS else 1
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(n + (step is not None))
    results = ctx.Queue()
    procs = [ctx.Process(target=_one_process, daemon=True, args=(
        decoder, paths[k::n], k, group, seconds, time.time(), barrier,
        results, blocking)) for k in range(n)]
    for proc in procs:
        proc.start()
    beside = None
    if step is not None:
        try:
            barrier.wait(timeout=READY_S)
            beside = step_ms(step, seconds)
        except threading.BrokenBarrierError:  # their errors say why
            pass
    each = _collect(procs, results, seconds)
    ok = [r for r in each if "error" not in r]
    images = sum(r["images"] for r in ok)
    cpu_ms = sum(r["cpu_ms_per_image"] * r["images"] for r in ok)
    return {"decoder": f"worker path, {decoder}, {group} a call, {n} "
                       f"process{'es' if n > 1 else ''}{label}",
            "processes": n, "img_s": sum(r["img_s"] for r in ok),
            "cpu_ms_per_image": cpu_ms / images if images else 0.0,
            "failed": sum(r["failed"] for r in ok), "images": images,
            "mad": None,
            "img_s_each": [round(r["img_s"], 1) for r in ok],
            "cpu_ms_each": [round(r["cpu_ms_per_image"], 4) for r in ok],
            "ready_s": max((r["ready_s"] for r in ok), default=None),
            "step_ms_beside": beside,
            "waits": sorted({r["waits"] for r in ok}),
            "errors": [r["error"] for r in each if "error" in r]}


def _finish(pending, windows) -> int:
    """host_decode.finish_crop of each: the failures."""
    return sum(isinstance(host_decode.finish_crop(p, w), Exception)
               for p, w in zip(pending, windows))


def trainer_rate(decoder: str, images, batch: int, threads: int,
                 seconds: float) -> dict:
    """The trainer path: one process, one decoder (`decoder`, a window
    decoder: the JPEG engines, else the CUDA decoder; on CPU its CPU
    decoder), `batch` windows a call copied to the host
    (host_decode._nv_windows), then resized and flipped
    (host_decode.finish_crop) by `threads` threads while the next batch
    decodes. img/s, CPU ms per image, and the decode call's wall ms per
    image (the one thread's part)."""
    kind = host_decode.WINDOW_DECODERS[decoder]
    _worker_call(decoder, images, 0, 1)  # starts the decoder
    count = failed = 0
    decode_s, waiting = 0.0, []
    with ThreadPoolExecutor(threads) as pool:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        while time.perf_counter() - wall0 < seconds:
            crops = _start_crops(decoder, images, count, batch)
            pending = [c for c in crops if isinstance(c, host_decode.Pending)]
            start = time.perf_counter()
            windows = host_decode._nv_windows(pending, kind, 0)
            decode_s += time.perf_counter() - start
            failed += sum(f.result() for f in waiting)  # the batch before
            waiting = [pool.submit(_finish, pending[k::threads],
                                   windows[k::threads])
                       for k in range(threads)]
            count += len(crops)
        failed += sum(f.result() for f in waiting)
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
    return {"decoder": f"trainer path, {decoder}, {batch} a call, "
                       f"{threads} thread{'s' if threads > 1 else ''}",
            "threads": threads, "img_s": count / wall,
            "cpu_ms_per_image": 1e3 * cpu / count, "failed": failed,
            "images": count, "mad": None,
            "decode_ms_per_image": 1e3 * decode_s / count}


class PackedPool:
    """WorkerPool's part TrainerDecode uses, over packed batches in
    memory: `batches` in turn until `seconds` after the first next(),
    then None."""

    def __init__(self, batches, seconds: float):
        from official_bench.data.feeds.shm_workers import Batch
        self._batches = [Batch(*b) for b in batches]
        self._seconds, self._end, self.given = seconds, None, 0
        self.source = type("Source", (), {"files": ["probe"]})()

    def next(self):
        if self._end is None:
            self._end = time.perf_counter() + self._seconds
        if time.perf_counter() >= self._end:
            return None
        self.given += 1
        return self._batches[(self.given - 1) % len(self._batches)]

    def close(self) -> None:
        pass


def packed_batches(decoder: str, images, batch: int, count: int = 2,
                   share: float = 0.0):
    """`count` batches of `batch` images (224, every other one flipped) as
    decode: gpu_trainer's workers hand them over: (packed_batch.pack's
    images, labels with PACKED on the first); a JPEG that does not fit,
    and `share` of them (worker_decode_share), decoded here, as a worker
    would."""
    from official_bench.data.records import packed_batch
    out = []
    for b in range(count):
        crops = _start_crops(decoder, images, b * batch, batch)
        keep = packed_batch.plan(crops, 224 * 224 * 3, share) or \
            [False] * batch
        crops = [c if k or not isinstance(c, host_decode.Pending) else
                 host_decode.finish_crops([c], decoder)[0]
                 for c, k in zip(crops, keep)]
        labels = np.arange(batch, dtype=np.int32)
        labels[0] |= packed_batch.PACKED
        out.append((packed_batch.pack(crops, [packed_batch.Tag(0, k)
                                              for k in range(batch)],
                                      (224, 224, 3)), labels))
    return out


def _serial_decode(pool, decoder: str, threads: int) -> int:
    """The decode: gpu_trainer thread before its pipeline (one thread:
    pool.next, unpack, finish_crops' decoder call then resizes on
    `threads` threads, np.stack): the images."""
    from official_bench.data.records import packed_batch
    count = 0
    with ThreadPoolExecutor(threads) as resize:
        while True:
            host = pool.next()
            if host is None:
                return count
            items, _ = packed_batch.unpack(host.images)
            todo = [k for k, item in enumerate(items)
                    if isinstance(item, host_decode.Pending)]
            crops = host_decode.finish_crops([items[k] for k in todo],
                                             decoder, 0, resize.map)
            for k, crop in zip(todo, crops):
                items[k] = crop
            count += len(np.stack(items))


def _pipelined_decode(pool, decoder: str, threads: int,
                      own_streams: bool = True) -> int:
    """jax_backend/host_feed.TrainerDecode over `pool` (on a GPU, a CUDA
    stream per batch in flight, else every batch on the default stream):
    the images."""
    from official_bench.jax_backend.host_feed import TrainerDecode
    stage = TrainerDecode(pool, decoder, 0, threads, "probe",
                          own_streams=own_streams)
    count = 0
    try:
        while True:
            out = stage.next()
            if out is None:
                return count
            count += len(out.images)
    finally:
        stage.close()


def trainer_decode_rates(decoder: str, images, batch: int, threads: int,
                         seconds: float, share: float = 0.0) -> list:
    """decode: gpu_trainer's decoding in the trainer over packed batches
    in memory (no workers: the trainer's part alone), before its pipeline
    (one thread) and as TrainerDecode does it (the decoder call of a batch
    beside the resizes of the one before), one after the other: their
    img/s and CPU ms per image; the pipelined row's `ratio` is its img/s
    over the serial's. `share`: that share of each batch's JPEGs arrives
    decoded (the rows' images count them; their decoding is not timed).
    At share 0, a third row: the pipeline with every batch on CUDA's
    default stream, as before it had streams of its own."""
    batches = packed_batches(decoder, images, batch, share=share)
    _worker_call(decoder, images, 0, 1)  # starts the decoder
    rows = []
    runs = [("serial, before", _serial_decode),
            ("pipelined, TrainerDecode", _pipelined_decode)]
    if not share:
        runs.append(("pipelined, TrainerDecode, default stream",
                     lambda *args: _pipelined_decode(*args, False)))
    for name, run in runs:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        count = run(PackedPool(batches, seconds), decoder, threads)
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        rows.append({"decoder": f"trainer decode, {decoder}, {batch} a "
                                f"batch, {threads} thread"
                                f"{'s' if threads > 1 else ''}, {name}"
                                + (f", worker share {share:g}" if share
                                   else ""),
                     "threads": threads, "worker_share": share,
                     "img_s": count / wall,
                     "cpu_ms_per_image": 1e3 * cpu / max(count, 1),
                     "failed": 0, "images": count, "mad": None})
    for row in rows[1:]:
        row["ratio"] = row["img_s"] / rows[0]["img_s"]
    return rows


def _notes(r) -> str:
    """The last column: each process's rates, or the decode call's."""
    if r.get("img_s_each"):
        cpu = r["cpu_ms_each"]
        step = "" if r.get("step_ms_beside") is None else (
            f"; JAX step {r['step_ms_alone']:.2f} ms alone, "
            f"{r['step_ms_beside']:.2f} beside them")
        waits = [w for w in r.get("waits", []) if w != "CUDA's default"]
        return (f"each {statistics.mean(r['img_s_each']):,.0f} img/s, "
                f"{statistics.mean(cpu):.3f} CPU ms/image "
                f"({min(cpu):.3f}-{max(cpu):.3f}); slowest start "
                f"{r['ready_s']:.1f} s{step}"
                + "".join(f"; {w}" for w in waits))
    if "ratio" in r:
        return f"{r['ratio']:.2f} x the serial row's img/s"
    if "decode_ms_per_image" in r:
        return f"decode call {r['decode_ms_per_image']:.3f} ms/image (wall)"
    return "-"


def report(rows, args) -> None:
    print("| decoder | img/s | CPU ms per image | failed | mean abs diff "
          "vs simplejpeg (0-255) | notes |\n|---|---|---|---|---|---|")
    for r in rows:
        mad = "-" if r.get("mad") is None else f"{r['mad']:.2f}"
        failed = f"{r['failed']} of {r['images']}"
        if r.get("errors"):
            failed += f"; {len(r['errors'])} process(es) failed"
        print(f"| {r['decoder']} | {r['img_s']:,.0f} | "
              f"{r['cpu_ms_per_image']:.3f} | {failed} | {mad} | "
              f"{_notes(r)} |")
    print(f"(batch {args.batch}, {args.seconds:g} s each, processes and "
          f"threads {args.sweep_seconds:g} s each, train windows as the "
          f"region of interest; {os.cpu_count()} CPUs)")


def _counts(text: str):
    """'1,8,15' -> [1, 8, 15] ('' -> none): an argparse type."""
    try:
        counts = [int(c) for c in text.split(",")] if text else []
    except ValueError:
        counts = [0]
    if min(counts, default=1) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of whole numbers of 1 "
            "or more (e.g. 1,8,15; '' for none)")
    return counts


def _shares(text: str):
    """'0,0.5' -> [0.0, 0.5], each in [0, 1): an argparse type."""
    try:
        shares = [float(c) for c in text.split(",")]
    except ValueError:
        shares = [-1.0]
    if not all(0 <= s < 1 for s in shares):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of shares from 0 to "
            "under 1 (e.g. 0,0.5)")
    return shares


def _parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--image_dir", required=True,
                   help="a folder of JPEGs (searched recursively)")
    p.add_argument("--images", type=int, default=2000,
                   help="JPEGs read from it (default 2000)")
    p.add_argument("--batch", type=int, default=256,
                   help="images per decode call (default 256)")
    p.add_argument("--seconds", type=float, default=8.0,
                   help="seconds each decoder is timed (default 8)")
    p.add_argument("--decoders", default="hw,cuda",
                   help="comma-separated, of " + ", ".join(KINDS) +
                        " (default hw,cuda)")
    p.add_argument("--worker_decoders", default="simplejpeg,nvimgcodec",
                   help="host_decode decoders timed on the input worker's "
                        "whole per-image work; a window decoder one image "
                        "a call and a group of host_examples.WINDOW_GROUP "
                        "(default simplejpeg,nvimgcodec; '' for none); "
                        "the processes stage runs each (a window decoder "
                        "a group a call), the trainer stage each window "
                        "decoder")
    p.add_argument("--processes", type=_counts, default="1,8,15",
                   help="process counts the worker path runs in at once "
                        "(default 1,8,15)")
    p.add_argument("--trainer_threads", type=_counts, default="4,8",
                   help="resize threads of the trainer path (default 4,8)")
    p.add_argument("--worker_shares", type=_shares, default="0",
                   help="the trainer_decode stage's worker_decode_share "
                        "values: that share of each batch's JPEGs decoded "
                        "before the trainer's part (default 0)")
    p.add_argument("--sweep_seconds", type=float, default=2.0,
                   help="seconds each process count and thread count is "
                        "timed (default 2)")
    p.add_argument("--stages", default=",".join(STAGES),
                   help="comma-separated, of " + ", ".join(STAGES) +
                        " (default all)")
    p.add_argument("--jax_step", action="store_true",
                   help="the processes stage also times a JAX stand-in "
                        "for the trainer's step (8 matmuls) alone and "
                        "beside each count's processes")
    p.add_argument("--label", default="",
                   help="added to the processes' rows' names (e.g. MPS)")
    p.add_argument("--blocking_sync", action="store_true",
                   help="each process of the processes stage sets its "
                        "CUDA waits to block, not spin, before its decoder "
                        "starts (host/cuda_driver.py); the rows say whether "
                        "it could")
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--append", action="store_true",
                   help="add the rows to those --json's file has")
    return p


def _decoder_rows(nv, names, images, args):
    rows = [cpu_rate(images, min(args.seconds, 4.0))]
    for name in names:
        try:
            rows.append(nv_rate(nv, name, images, args.batch, args.seconds))
        except Exception as e:  # a backend this card or build lacks
            print(f"{name}: failed: {type(e).__name__}: {e}", flush=True)
            rows.append({"decoder": f"nvImageCodec {name}", "img_s": 0.0,
                         "cpu_ms_per_image": 0.0, "failed": "all",
                         "images": 0, "mad": None,
                         "error": f"{type(e).__name__}: {e}"})
        print(f"{rows[-1]['decoder']}: {rows[-1]['img_s']:,.0f} img/s",
              flush=True)
    return rows


def _worker_rows(decoders, images, args):
    rows = []
    for decoder in decoders:
        groups = [1, host_examples.WINDOW_GROUP] \
            if decoder in host_decode.WINDOW_DECODERS else [1]
        for group in groups:
            try:
                rows.append(worker_rate(decoder, images,
                                        min(args.seconds, 4.0), group))
            except Exception as e:  # DecoderUnavailable: no GPU here
                print(f"worker path, {decoder}, {group} a call: failed: {e}",
                      flush=True)
    return rows


def _sweep_rows(stages, decoders, paths, images, args):
    """The processes and trainer stages' rows."""
    rows, step, alone = [], None, None
    if args.jax_step and "processes" in stages and args.processes:
        step = jax_step()
        alone = step_ms(step, args.sweep_seconds)
        print(f"JAX step alone: {alone:.2f} ms", flush=True)
    for n in args.processes if "processes" in stages else []:
        for decoder in decoders:
            rows.append(processes_rate(decoder, paths, n, args.sweep_seconds,
                                       f", {args.label}" if args.label
                                       else "", step, args.blocking_sync))
            rows[-1]["step_ms_alone"] = alone
            for error in rows[-1]["errors"][:1]:
                print(f"{rows[-1]['decoder']}: {error}", flush=True)
    window = [d for d in decoders if d in host_decode.WINDOW_DECODERS]
    for threads in args.trainer_threads if "trainer" in stages else []:
        for decoder in window:
            try:
                rows.append(trainer_rate(decoder, images, args.batch,
                                         threads, args.sweep_seconds))
            except Exception as e:  # DecoderUnavailable: no GPU here
                print(f"trainer path, {decoder}, {threads} threads: "
                      f"failed: {e}", flush=True)
    threads = max(args.trainer_threads, default=0)
    for decoder in window if "trainer_decode" in stages and threads else []:
        for share in args.worker_shares:
            try:
                rows += trainer_decode_rates(decoder, images, args.batch,
                                             threads, args.sweep_seconds,
                                             share)
            except Exception as e:  # DecoderUnavailable: no GPU here
                print(f"trainer decode, {decoder}, {threads} threads, "
                      f"worker share {share:g}: failed: {e}", flush=True)
    return rows


def _write_json(path: str, append: bool, args, rows) -> None:
    """The rows (after the file's own with `append`), written whole."""
    if append and os.path.exists(path):
        with open(path) as f:
            rows = json.load(f)["rows"] + rows
    write_text_atomic(path, json.dumps(
        {"batch": args.batch, "seconds": args.seconds,
         "sweep_seconds": args.sweep_seconds, "cpus": os.cpu_count(),
         "rows": rows}, indent=1))


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    names = args.decoders.split(",")
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        p.error(f"unknown decoder {unknown[0]!r}; valid: {', '.join(KINDS)}")
    stages = args.stages.split(",")
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        p.error(f"unknown stage {unknown[0]!r} in --stages; valid: "
                f"{', '.join(STAGES)}")
    try:  # without its lines about codecs this probe does not use
        nv = host_decode.import_nvimgcodec("cpu")
    except host_decode.DecoderUnavailable as e:
        p.error(str(e))
    for flag in ("batch", "seconds", "sweep_seconds"):
        if getattr(args, flag) <= 0:
            p.error(f"--{flag} {getattr(args, flag):g}: must be above 0")
    paths = jpeg_paths(args.image_dir, args.images)
    if "processes" in stages and max(args.processes, default=0) > \
            len(paths):
        p.error(f"--processes {max(args.processes)}: more processes than "
                f"the {len(paths)} JPEGs under {args.image_dir}")
    images = load(paths, seed=0)
    print(f"{len(images)} JPEGs, mean "
          f"{statistics.mean(len(d) for d, _ in images) / 1024:.0f} KiB",
          flush=True)
    decoders = list(filter(None, args.worker_decoders.split(",")))
    rows = _decoder_rows(nv, names, images, args) \
        if "decoders" in stages else []
    if "worker" in stages:
        rows += _worker_rows(decoders, images, args)
    rows += _sweep_rows(stages, decoders, paths, images, args)
    report(rows, args)
    if args.json:
        _write_json(args.json, args.append, args, rows)
    return 0

if __name__ == "__main__":
    sys.exit(main())
