"""An ImageNet-like image folder for the records benchmarks: JPEGs of
smooth colour fields with luminance and colour grain, 500x375 and 375x500
(every third one tall), quality 90, about 110 KB each, as ImageNet's
train images are; every image different, so nothing is served from a few
cached files.

    python3 scripts/make_jpeg_folder.py OUT_DIR [--train 20000]
        [--validation 500] [--classes 100] [--width 500] [--height 375]
        [--workers N]

Writes OUT_DIR/{train,validation}/nXXXXXXXX/*.JPEG (one folder per class)
for official-bench-build-records, in worker processes (numpy and Pillow,
no TensorFlow), and prints the count, the mean size and the time.
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import os
import sys
import time

import numpy as np

LUMA_GRAIN, CHROMA_GRAIN = 23.0, 13.0  # ~110 KB at 500x375, quality 90


def jpeg(seed: int, width: int, height: int) -> bytes:
    """One image: a random 6x8 colour field, bicubic-upscaled, plus
    grain; tall (height x width swapped) for every third seed."""
    from PIL import Image
    if seed % 3 == 0:
        width, height = height, width
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (6, 8, 3)).astype(np.uint8)
    smooth = np.asarray(Image.fromarray(base).resize((width, height),
                                                     Image.BICUBIC),
                        np.float32)
    grain = rng.normal(0, LUMA_GRAIN, (height, width, 1)) + \
        rng.normal(0, CHROMA_GRAIN, (height, width, 3))
    pixels = np.clip(smooth + grain, 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _write(task) -> int:
    path, seed, width, height = task
    data = jpeg(seed, width, height)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def tasks(out: str, split: str, count: int, classes: int, width: int,
          height: int, seed0: int):
    for i in range(count):
        folder = os.path.join(out, split, f"n{i % classes:08d}")
        yield (os.path.join(folder, f"{split}_{i:07d}.JPEG"), seed0 + i,
               width, height)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--train", type=int, default=20000,
                   help="train images (default 20000)")
    p.add_argument("--validation", type=int, default=500,
                   help="validation images (default 500)")
    p.add_argument("--classes", type=int, default=100,
                   help="class folders per split; images go round-robin "
                        "(default 100)")
    p.add_argument("--width", type=int, default=500,
                   help="image width in pixels; every third image is "
                        "tall, width and height swapped (default 500)")
    p.add_argument("--height", type=int, default=375,
                   help="image height in pixels (default 375)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="processes writing images (default: the CPUs, "
                        f"{os.cpu_count() or 1} here)")
    args = p.parse_args(argv)
    start = time.perf_counter()
    work = list(tasks(args.out_dir, "train", args.train, args.classes,
                      args.width, args.height, 0)) + \
        list(tasks(args.out_dir, "validation", args.validation,
                   args.classes, args.width, args.height, 10 ** 7))
    for folder in {os.path.dirname(t[0]) for t in work}:
        os.makedirs(folder, exist_ok=True)
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        sizes = pool.map(_write, work, chunksize=64)
    print(f"make_jpeg_folder: {args.train} train + {args.validation} "
          f"validation JPEGs in {args.classes} classes, "
          f"{args.width}x{args.height} / {args.height}x{args.width}, mean "
          f"{np.mean(sizes) / 1000:.0f} KB, {args.workers} workers, "
          f"{time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
