"""The JAX backend's TF-free train input against tf.data's, same JPEGs, same
run: images per second per core, and 1 -> 2 input workers.

    .venv/bin/python benchmarks/input_workers.py [--images 300]
        [--seconds 6] [--rounds 3] [--image_size 224] [--batch 32]
        [--workers 1,2] [--decoders simplejpeg,nvimgcodec_cpu]

The JPEGs are input_pipeline.py's (ImageNet-like, ~500x375 at quality 90),
written as classic TFRecords once; every pipeline reads those files:
  tf.data     the TensorFlow backend's records pipeline (pipeline.
              build_dataset: reader, shuffle, guarded decode with the crop
              fused, flip, resize, batch), pinned to one core with one
              private thread, as input_pipeline.py's `ours`
  workers=N   the JAX backend's path without JAX: N input worker processes
              (data/feeds/shm_workers.py) running the records reader's
              worker_examples (decode, crop, flip, resize in numpy/the
              decoder), whole uint8 batches back through shared memory;
              the process is pinned to N cores; with --decoders, the same
              for each decoder after the first (workers=N nvimgcodec_cpu:
              decode: cpu_window's window decode on nvImageCodec's CPU
              decoder)
Rates are images per wall second and per CPU second (every thread of the
process, plus the workers' CPU time from /proc): the per-CPU-second rate is
the per-core rate, which a busy neighbour distorts least. Pipelines run in
interleaved rounds (a b c a b c ...) and the median round is reported.
Prints a table, the ratios (TF-free per core / tf.data per core; 2 workers
/ 1 worker in wall rate) and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def tf_data_maker(files, size: int, batch: int):
    """tf.data's records pipeline on one core (input_pipeline.py's)."""
    import input_pipeline
    return input_pipeline.pipelines(files, size, batch, 1)["ours"]


def measure_tf_data(make, batch: int, seconds: float):
    import input_pipeline
    return input_pipeline.measure(make, batch, seconds)


def measure_workers(files, size: int, batch: int, workers: int,
                    seconds: float, cores, warmup_batches: int = 3,
                    decoder: str = None):
    """(img per wall s, img per CPU s) of `workers` input workers decoding
    with `decoder` (default: the records reader's)."""
    from official_bench.config import DatasetConfig
    from official_bench.data.feeds.shm_workers import (
        BatchShape,
        WorkerPool,
    )
    from official_bench.jax_backend.host_feed import records_source
    ds = DatasetConfig(split="train", image_size=size, num_classes=10,
                       batch_size=batch, shuffle_buffer_size=256,
                       one_hot=False, layout="classic")
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)  # the workers inherit it
    try:
        pool = WorkerPool(records_source(ds, files, True, 0, decoder),
                          BatchShape(batch, size, size, 3), workers,
                          timeout=600.0)
    finally:
        os.sched_setaffinity(0, previous)
    try:
        for _ in range(warmup_batches * workers):
            pool.next().release()
        count = 0
        cpu0, own0 = pool.cpu_seconds(), time.process_time()
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            pool.next().release()
            count += batch
        wall = time.perf_counter() - start
        cpu = pool.cpu_seconds() - cpu0 + time.process_time() - own0
    finally:
        pool.close()
    return count / wall, count / max(cpu, 1e-9)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=300,
                   help="distinct JPEGs made and written as records "
                        "(default 300)")
    p.add_argument("--seconds", type=float, default=6.0,
                   help="seconds each pipeline is timed per round "
                        "(default 6)")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved rounds; the median is reported "
                        "(default 3)")
    p.add_argument("--image_size", type=int, default=224,
                   help="the train crop's output size (default 224)")
    p.add_argument("--batch", type=int, default=32,
                   help="images per batch (default 32)")
    p.add_argument("--workers", default="1,2",
                   help="comma-separated worker counts (default 1,2)")
    p.add_argument("--decoders", default="simplejpeg",
                   help="the workers' decoders, comma-separated, the first "
                        "as the workers=N rows (default simplejpeg; "
                        "nvimgcodec_cpu: decode: cpu_window's)")
    args = p.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",")]
    decoders = args.decoders.split(",")
    from official_bench.data.records import host_decode
    unknown = [d for d in decoders if d not in host_decode.DECODERS]
    if unknown:
        p.error(f"--decoders {','.join(unknown)}: valid: "
                f"{', '.join(host_decode.DECODERS)}")
    available = sorted(os.sched_getaffinity(0))
    if max(counts) > len(available):
        p.error(f"--workers {max(counts)}: only {len(available)} cores")
    import input_pipeline

    with tempfile.TemporaryDirectory() as tmp:
        jpegs = input_pipeline.make_jpegs(args.images)
        files = input_pipeline.write_records(tmp, jpegs)
        mean_kib = statistics.mean(len(j[0]) for j in jpegs) / 1024
        print(f"{len(jpegs)} JPEGs, mean {mean_kib:.0f} KiB, in "
              f"{len(files)} TFRecord files; image_size={args.image_size}, "
              f"batch={args.batch}; TF-free decoders "
              f"{', '.join(decoders)}", flush=True)
        tf_make = tf_data_maker(files, args.image_size, args.batch)
        rows = [(f"workers={n}" + (f" {d}" if d != decoders[0] else ""),
                 n, d) for d in decoders for n in counts]
        names = ["tf.data"] + [name for name, _, _ in rows]
        wall = {n: [] for n in names}
        per_cpu = {n: [] for n in names}
        for r in range(args.rounds):
            os.sched_setaffinity(0, available[-1:])
            w, c = measure_tf_data(tf_make, args.batch, args.seconds)
            os.sched_setaffinity(0, available)
            wall["tf.data"].append(w)
            per_cpu["tf.data"].append(c)
            for name, n, decoder in rows:
                w, c = measure_workers(files, args.image_size, args.batch,
                                       n, args.seconds, available[-n:],
                                       decoder=decoder)
                wall[name].append(w)
                per_cpu[name].append(c)
            print(f"round {r + 1} (img per CPU-s): " + ", ".join(
                f"{k} {v[-1]:.1f}" for k, v in per_cpu.items()), flush=True)
    return report(names, wall, per_cpu, counts, args, decoders)


def report(names, wall, per_cpu, counts, args, decoders) -> int:
    med_wall = {n: statistics.median(wall[n]) for n in names}
    med_cpu = {n: statistics.median(per_cpu[n]) for n in names}
    print(f"\n{'pipeline':<27} {'img/CPU-s':>10} {'img/s wall':>11}   "
          "per-round img/CPU-s")
    for n in names:
        print(f"{n:<27} {med_cpu[n]:10.1f} {med_wall[n]:11.1f}   "
              + " ".join(f"{v:.1f}" for v in per_cpu[n]))
    ratios = {f"per core workers={n} / tf.data":
              med_cpu[f"workers={n}"] / med_cpu["tf.data"] for n in counts}
    if 1 in counts and 2 in counts:
        ratios["wall workers=2 / workers=1"] = \
            med_wall["workers=2"] / med_wall["workers=1"]
    for d in decoders[1:]:
        for n in counts:
            ratios[f"per core workers={n} {d} / {decoders[0]}"] = \
                med_cpu[f"workers={n} {d}"] / med_cpu[f"workers={n}"]
    print("ratios:")
    for k, v in ratios.items():
        print(f"  {k}: {v:.2f}x")
    print(json.dumps({"images": args.images, "image_size": args.image_size,
                      "batch": args.batch,
                      "img_per_cpu_s": {k: round(v, 1)
                                        for k, v in med_cpu.items()},
                      "img_per_s": {k: round(v, 1)
                                    for k, v in med_wall.items()},
                      "ratios": {k: round(v, 3) for k, v in ratios.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
