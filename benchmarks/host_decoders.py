"""The TensorFlow-free train path's JPEG decoders, measured per core.

    .venv/bin/python benchmarks/host_decoders.py [--images 240] [--rounds 5]
        [--big] [--image_size 224]

Builds ImageNet-like records with the project's builder (500x375 and
375x500 JPEGs at quality 90, ~110 KB: tests/support/natural_images.py),
reads them once, then times, per image and in CPU seconds of this process
pinned to one core, what a loader worker does to each record: parse, train
crop window (sample_distorted_bounding_box's arithmetic), decode, flip,
resize (data/records/host_decode.py), for each decoder in
host_decode.DECODERS but the GPU's, and the eval path. Decoders take
turns (a b c a b c ...), so a busy neighbour slows them alike; the median
round is reported.
`--big` also times 1200x900 images, where the train crop often allows DCT
scaling. Prints img per CPU-second per decoder and its ratio to the chosen
one (host_decode.DECODER), then a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))  # support.natural_images

from official_bench.config import DatasetConfig  # noqa: E402
from official_bench.data.records import (  # noqa: E402
    host_decode,
    host_examples,
    host_reader,
)
from official_bench.data.records.record_sets import CLASSIC_LAYOUT  # noqa: E402
from support.natural_images import record_set  # noqa: E402


def read_records(root: str):
    files = sorted(os.path.join(root, f) for f in os.listdir(root)
                   if f.startswith("train-"))
    return [item[2] for item in host_reader.interleave(
        files, [os.path.getsize(f) for f in files])]


def one_round(records, ds, decoder: str, training: bool) -> float:
    """Images per CPU-second of the worker's per-record work."""
    rng = random.Random(0)
    start = time.process_time()
    for record in records:
        host_examples._example(record, CLASSIC_LAYOUT, 1, ds, training, rng,
                               decoder)
    return len(records) / (time.process_time() - start)


def measure(records, ds, rounds: int, label: str) -> dict:
    names = [(d, True) for d in host_decode.DECODERS
             if host_decode.WINDOW_DECODERS.get(d) != "gpu"] + \
        [(host_decode.DECODER, False)]
    rates = {n: [] for n in names}
    for r in range(rounds):
        for decoder, training in names:
            rates[decoder, training].append(
                one_round(records, ds, decoder, training))
    out = {}
    base = statistics.median(rates[host_decode.DECODER, True])
    for (decoder, training), values in rates.items():
        key = f"{decoder} {'train' if training else 'eval'}"
        out[key] = statistics.median(values)
        print(f"{label:9s} {key:18s} {out[key]:7.1f} img/CPU-s  "
              f"{out[key] / base:5.2f}x  rounds: "
              + " ".join(f"{v:.0f}" for v in values))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=240,
                   help="records built and timed (default 240)")
    p.add_argument("--rounds", type=int, default=5,
                   help="rounds of every decoder in turn; the median is "
                        "reported (default 5)")
    p.add_argument("--image_size", type=int, default=224,
                   help="the crop's output size (default 224)")
    p.add_argument("--big", action="store_true",
                   help="also time 1200x900 images")
    args = p.parse_args(argv)
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[-1:])
    ds = DatasetConfig(builder="records", split="train", num_classes=3,
                       image_size=args.image_size)
    sizes = [("500x375", 500, 375)] + ([("1200x900", 1200, 900)]
                                       if args.big else [])
    result = {"decoder": host_decode.DECODER, "cores": 1}
    with tempfile.TemporaryDirectory() as tmp:
        for label, width, height in sizes:
            root = record_set(os.path.join(tmp, label), classes=3,
                              train=max(1, args.images // 3), validation=1,
                              width=width, height=height)
            records = read_records(root)
            kb = sum(len(r) for r in records) / len(records) / 1024
            print(f"{label}: {len(records)} records, mean {kb:.0f} KiB")
            result[label] = measure(records, ds, args.rounds, label)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
