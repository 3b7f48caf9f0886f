"""Input-pipeline throughput (no model): our fused train path vs references.

    .venv/bin/python benchmarks/input_pipeline.py [--images 300] [--cores 1]
        [--seconds 6] [--rounds 3] [--image_size 224] [--batch 32]

Generates ImageNet-sized JPEGs (smooth random colour fields plus texture,
500x375 and 375x500, quality 90, ~90 KiB like ImageNet's), writes them as
classic TFRecords, and measures images/second of several pipelines over the
SAME files in the same run. The process is pinned to `--cores` cores and
tf.data gets that many private threads (intra-op parallelism 1), so with
the default of one core every number is a per-core rate. Each rate is
reported per wall second and per CPU second of the process (the latter is
what a busy neighbour on the same core distorts least).

The real pipeline (pipeline.build_dataset: reader with the bad-file check,
shuffle, parse and decode inside the bad-record guard, batch, check),
with three per-image decodes swapped in:
  ours            sample_distorted_bounding_box window fused into
                  decode_and_crop_jpeg, flip, resize to image_size
  crop_after (a)  decode the whole JPEG, then the same window, flip, resize
  decode (b)      decode the whole JPEG and nothing else (the upper bound;
                  a 224x224 corner is kept so that it can be batched)
  ours_uint8      ours with transfer_uint8 (no normalisation on the host)
  ours_skip       ours with skip_bad_records: true (filter + count)
The same three in a bare frame (reader, shuffle, parse, one plain map per
image, batch; no guard): bare ours, bare naive (a), bare decode (b) (which
only decodes, nothing is batched but one pixel).

Pipelines are measured in interleaved rounds (a b c ... a b c ...) and the
median round is reported, so a neighbour's load affects them alike.
Prints a table, the ratios, and a JSON line.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from official_bench.config import DatasetConfig  # noqa: E402
from official_bench.data import preprocessing  # noqa: E402
from official_bench.data.build.example_proto import classic_example  # noqa: E402
from official_bench.data.records import pipeline  # noqa: E402
from official_bench.data.records.record_files import CLASSIC_LAYOUT  # noqa: E402
from official_bench.runtime.keras_setup import tf  # noqa: E402


def make_jpegs(count: int, seed: int = 0):
    """ImageNet-like JPEGs: smooth colour fields plus texture, ~500x375."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        w, h = (500, 375) if i % 3 else (375, 500)
        base = rng.integers(0, 256, (6, 8, 3)).astype(np.uint8)
        smooth = np.asarray(Image.fromarray(base).resize((w, h),
                                                         Image.BICUBIC),
                            dtype=np.float32)
        texture = rng.normal(0, 18, (h, w, 1)).astype(np.float32)
        pixels = np.clip(smooth + texture, 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, "JPEG", quality=90)
        out.append((buf.getvalue(), h, w))
    return out


def write_records(directory: str, jpegs, shards: int = 4):
    files = []
    for s in range(shards):
        path = os.path.join(directory, f"train-{s:05d}-of-{shards:05d}")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(s, len(jpegs), shards):
                data, h, w = jpegs[i]
                writer.write(classic_example(data, 1 + i % 10, h, w))
        files.append(path)
    return files


def _options(threads: int) -> tf.data.Options:
    options = tf.data.Options()
    options.threading.private_threadpool_size = threads
    options.threading.max_intra_op_parallelism = 1
    options.deterministic = False
    return options


def _raw(files, seed=0):
    """Shared reading for the reference pipelines: files -> records."""
    ds = tf.data.Dataset.from_tensor_slices(files).repeat()
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=len(files),
                       num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=False)
    ds = ds.shuffle(256, seed=seed)
    spec = {"image/encoded": tf.io.FixedLenFeature((), tf.string),
            "image/class/label": tf.io.FixedLenFeature((), tf.int64)}
    ds = ds.map(lambda r: tf.io.parse_single_example(r, spec),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    seeds = tf.data.Dataset.random(seed=seed).batch(2)
    return tf.data.Dataset.zip((ds, seeds))


def pipelines(files, size: int, batch: int, threads: int):
    """name -> function making the dataset; two frames, three decodes each."""
    ctx = tf.distribute.InputContext()
    opts = _options(threads)

    def ours(decode_fn=None, **extra):
        cfg = DatasetConfig(split="train", image_size=size, num_classes=10,
                            batch_size=batch, shuffle_buffer_size=256,
                            one_hot=False, **extra)
        ds = pipeline.build_dataset(files, CLASSIC_LAYOUT, cfg, ctx,
                                   batch, True, 0, decode_fn=decode_fn)
        return ds.with_options(opts)

    def bare(fn):
        ds = _raw(files).map(lambda ex, s: fn(ex["image/encoded"], s),
                             num_parallel_calls=tf.data.AUTOTUNE,
                             deterministic=False)
        return ds.batch(batch, drop_remainder=True).with_options(opts)

    def crop_after(image_bytes, boxes, seed):
        return preprocessing.decode_then_random_crop(image_bytes, seed, size)

    def decode(image_bytes, boxes, seed):
        image = preprocessing.decode_only(image_bytes)
        # Keep a corner (the batch needs one shape): no resize, no crop.
        return tf.cast(tf.image.pad_to_bounding_box(
            image[:size, :size], 0, 0, size, size), tf.float32)

    def bare_ours(image_bytes, seed):
        return preprocessing.preprocess_for_train(
            image_bytes, tf.zeros([0, 4]), seed, image_size=size)

    def bare_naive(image_bytes, seed):
        return preprocessing.decode_then_random_crop(image_bytes, seed, size)

    def bare_decode(image_bytes, seed):
        image = preprocessing.decode_only(image_bytes)
        # Consume the pixels (so nothing is pruned) without a resize.
        return tf.reduce_max(image[:1, :1])

    return {
        # The real pipeline (pipeline.build_dataset), decode swapped:
        "ours": lambda: ours(),
        "crop_after (a)": lambda: ours(crop_after),
        "decode (b)": lambda: ours(decode),
        "ours_uint8": lambda: ours(transfer_uint8=True),
        "ours_skip": lambda: ours(skip_bad_records=True),
        # A bare frame (reader, shuffle, parse, one map per image, batch):
        "bare ours": lambda: bare(bare_ours),
        "bare naive (a)": lambda: bare(bare_naive),
        "bare decode (b)": lambda: bare(bare_decode),
    }


def measure(make, batch: int, seconds: float, warmup_batches: int = 3):
    """(images per wall second, images per CPU second of this process).

    CPU seconds count every thread of the process, so the second number is
    a per-core rate that a busy neighbour does not lower (much).
    """
    iterator = iter(make())
    for _ in range(warmup_batches):
        next(iterator)
    count = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        next(iterator)
        count += batch
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    return count / wall, count / max(cpu, 1e-9)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=300,
                   help="JPEGs generated and written to 4 TFRecord files, "
                        "read over and over (default 300)")
    p.add_argument("--cores", type=int, default=1,
                   help="pin the process to this many cores and give tf.data "
                        "as many private threads (default 1: per-core rates)")
    p.add_argument("--seconds", type=float, default=6.0,
                   help="seconds each pipeline is timed per round, after 3 "
                        "untimed batches (default 6)")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved rounds over the pipelines; the median "
                        "is reported (default 3)")
    p.add_argument("--image_size", type=int, default=224,
                   help="output image height and width in pixels "
                        "(default 224)")
    p.add_argument("--batch", type=int, default=32,
                   help="images a batch (default 32)")
    p.add_argument("--only", default="",
                   help="comma-separated pipeline names, or starts of "
                        "them ('bare' for the three bare ones; default: "
                        "all)")
    args = p.parse_args(argv)
    available = sorted(os.sched_getaffinity(0))
    if args.cores > len(available):
        p.error(f"--cores {args.cores}: only {len(available)} available")
    # Pin to the last cores (other work tends to start on core 0).
    os.sched_setaffinity(0, available[-args.cores:])

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        jpegs = make_jpegs(args.images)
        files = write_records(tmp, jpegs)
        sizes = [len(j[0]) for j in jpegs]
        print(f"{len(jpegs)} JPEGs, mean {np.mean(sizes) / 1024:.0f} KiB, "
              f"500x375/375x500, in {len(files)} TFRecord files "
              f"({time.perf_counter() - t0:.1f} s); cores={args.cores}, "
              f"image_size={args.image_size}, batch={args.batch}, "
              f"TF {tf.__version__}", flush=True)
        makers = pipelines(files, args.image_size, args.batch, args.cores)
        if args.only:
            wanted = [w.strip() for w in args.only.split(",")]
            makers = {k: v for k, v in makers.items()
                      if any(k.startswith(w) for w in wanted)}
        rates = {name: [] for name in makers}
        per_cpu = {name: [] for name in makers}
        for r in range(args.rounds):
            for name, make in makers.items():
                wall, cpu = measure(make, args.batch, args.seconds)
                rates[name].append(wall)
                per_cpu[name].append(cpu)
            print(f"round {r + 1} (img per CPU-s): " + ", ".join(
                f"{n} {v[-1]:.1f}" for n, v in per_cpu.items()), flush=True)
    wall_med = {n: statistics.median(v) for n, v in rates.items()}
    median = {n: statistics.median(v) for n, v in per_cpu.items()}
    print(f"\n{'pipeline':<16} {'img/CPU-s':>10} {'img/s wall':>11}   "
          "per-round img/CPU-s")
    for name, value in median.items():
        print(f"{name:<16} {value:10.1f} {wall_med[name]:11.1f}   "
              + " ".join(f"{v:.1f}" for v in per_cpu[name]))
    pairs = [("ours/(a)", "ours", "crop_after (a)"),
             ("ours/(b)", "ours", "decode (b)"),
             ("ours/bare naive (a)", "ours", "bare naive (a)"),
             ("ours/bare decode (b)", "ours", "bare decode (b)"),
             ("bare ours/bare naive (a)", "bare ours", "bare naive (a)"),
             ("bare ours/bare decode (b)", "bare ours", "bare decode (b)"),
             ("ours/bare ours", "ours", "bare ours"),
             ("ours_skip/ours", "ours_skip", "ours"),
             ("ours_uint8/ours", "ours_uint8", "ours")]
    ratios = {k: median[a] / median[b] for k, a, b in pairs
              if a in median and b in median}
    print("ratios of images per CPU-second (= per core):")
    for k, v in ratios.items():
        print(f"  {k}: {v:.2f}x")
    print(json.dumps({"cores": args.cores, "images": args.images,
                      "img_per_cpu_s": {k: round(v, 1)
                                        for k, v in median.items()},
                      "img_per_s": {k: round(v, 1)
                                    for k, v in wall_med.items()},
                      "ratios": {k: round(v, 3) for k, v in ratios.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
