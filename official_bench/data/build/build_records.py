"""Writes image folders as ImageNet-style TFRecord shards (the classic schema).

    python -m official_bench.data.build.build_records \\
        --input_dir=/data/digits --output_dir=/data/digits-records \\
        --train_shards=4 --validation_shards=2 [--verify]

    # ImageNet as distributed (train synset folders, flat validation folder):
    python -m official_bench.data.build.build_records --layout=imagenet \\
        --train_dir=/raw/train --validation_dir=/raw/val \\
        --validation_labels=imagenet_2012_validation_synset_labels.txt \\
        [--bounding_boxes=imagenet_2012_bounding_boxes.csv] \\
        --output_dir=/data/imagenet          # 1024 + 128 shards by default

    # Check existing shards only: count records, decode every image.
    python -m official_bench.data.build.build_records --output_dir=/data/imagenet --verify

Layouts:
- imagefolder: `<input_dir>/train/<class>/*.jpg` and
  `<input_dir>/validation/<class>/*.jpg` (`val/` also accepted).
- imagenet: train as above (synset folders); validation is one flat folder
  plus a label file: one class (synset) per line for the images in sorted
  file-name order (`imagenet_2012_validation_synset_labels.txt`), or
  `<file name> <class>` per line.

Output: `train-00000-of-01024`, ..., `validation-00000-of-00128` with keys
image/encoded (RGB JPEG), image/class/label (1-based), image/class/synset,
image/class/text, image/height, image/width, image/format, image/filename,
image/colorspace, image/channels and image/object/bbox/{xmin,ymin,xmax,ymax}
(from --bounding_boxes); `labels.txt` (line i holds the class of label i);
`build_records.json` (what was built, checked on a re-run; after a finished
build also the record and skipped counts per split, which --verify checks).

Classes are the sorted train folder names (or --class_names), so the class
index is deterministic. Images are assigned to shards after a seeded shuffle
(--seed), so every shard mixes classes. RGB JPEGs are stored unchanged; CMYK,
grayscale, PNG and other formats are converted to RGB JPEG (--quality), with
Pillow (the `builder` extra) if installed, else with TensorFlow, which reads
JPEG, PNG, GIF, BMP and WebP (TIFF and PPM/PGM then stop the build: exit 2,
saying what to install). Unreadable images are skipped, listed in
skipped_images.txt and reported at the end.

Restartable: each shard is written under a hidden temporary name and renamed
when complete, after a record of what it skipped (`.shards/<shard>.json`);
shards that already exist are skipped on a re-run (the same inputs, seed and
shard counts give the same assignment, which build_records.json guards), and
every run ends by merging the records of all shards into
skipped_images.txt and build_records.json. Workers (--num_workers) convert
images in parallel processes that die with this one (even on SIGKILL);
SIGTERM or Ctrl-C stops the workers, keeps finished shards and exits
128+signal (143, 130).

Exit status: 0 done, 1 --verify found problems or a worker died (killed,
e.g. by the out-of-memory killer), 2 bad arguments or inputs,
128+signal stopped by a signal.
"""

from __future__ import annotations

import argparse
import concurrent.futures
from concurrent.futures.process import BrokenProcessPool
import contextlib
import dataclasses
import json
import os
import random
import signal
import struct
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

from official_bench.contracts import exit_status
from official_bench.data.build import shard_skips
from official_bench.data.build.image_codec import (  # noqa: F401 (re-exported)
    INSTALL_HINT, NeedsPillow, pillow_available, to_rgb_jpeg)
from official_bench.data.build.worker_pool import SPAWN, WorkerPool
from official_bench.host.atomic import atomic_path, write_text_atomic

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff",
                    ".webp", ".ppm", ".pgm")
MANIFEST = "build_records.json"
LABELS_FILE = "labels.txt"
SKIPPED_FILE = "skipped_images.txt"
DEFAULT_SHARDS = {"train": 1024, "validation": 128}
SPLIT_DIRS = {"train": ("train",), "validation": ("validation", "val")}


class BuildError(Exception):
    """Bad arguments or inputs; the message says which."""


# --------------------------------------------------------------------------
# tf.train.Example, encoded by hand (workers need no TensorFlow)
# --------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s: two's complement, 10 bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature(value) -> bytes:
    """Feature{bytes_list=1 | float_list=2 | int64_list=3}."""
    values = value if isinstance(value, (list, tuple)) else [value]
    if all(isinstance(v, (bytes, str)) for v in values) and values:
        items = b"".join(_field(1, v.encode("utf-8") if isinstance(v, str)
                                else v) for v in values)
        return _field(1, items)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values) \
            and values:
        packed = b"".join(_varint(v) for v in values)
        return _field(3, _field(1, packed) if values else b"")
    if all(isinstance(v, (int, float)) for v in values):
        if not values:
            return _field(2, b"")
        packed = struct.pack(f"<{len(values)}f", *values)
        return _field(2, _field(1, packed))
    raise TypeError(f"cannot store {value!r} in a tf.train.Feature")


def example_bytes(features: Dict[str, object]) -> bytes:
    """A serialized tf.train.Example; values are bytes/str, ints or floats.

    A list stores several values; an empty list must be given as a float
    list (`[]` is stored as an empty FloatList).
    """
    entries = b"".join(
        _field(1, _field(1, key.encode("utf-8")) + _field(2, _feature(v)))
        for key, v in sorted(features.items()))
    return _field(1, entries)


def classic_example(image: bytes, label: int, height: int, width: int,
                    synset: str = "", text: str = "", filename: str = "",
                    boxes: Sequence[Tuple[float, float, float, float]] = (),
                    image_format: str = "JPEG") -> bytes:
    """One record in the classic ImageNet schema (label is 1-based).

    `boxes` are (xmin, ymin, xmax, ymax) fractions of the image.
    """
    features = {
        "image/encoded": image, "image/format": image_format,
        "image/class/label": int(label), "image/class/synset": synset,
        "image/class/text": text, "image/filename": filename,
        "image/height": int(height), "image/width": int(width),
        "image/colorspace": "RGB", "image/channels": 3,
    }
    if boxes:
        for i, side in enumerate(("xmin", "ymin", "xmax", "ymax")):
            features[f"image/object/bbox/{side}"] = [float(b[i])
                                                     for b in boxes]
        features["image/object/bbox/label"] = [int(label)] * len(boxes)
    return example_bytes(features)


# --------------------------------------------------------------------------
# Listing the inputs
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Item:
    path: str
    label: int  # 1-based
    synset: str
    boxes: Tuple[Tuple[float, float, float, float], ...] = ()


def _images_in(directory: str) -> List[str]:
    return sorted(
        os.path.join(directory, f) for f in os.listdir(directory)
        if not f.startswith(".") and f.lower().endswith(IMAGE_EXTENSIONS)
        and os.path.isfile(os.path.join(directory, f)))


def class_folders(directory: str) -> List[str]:
    """Sorted sub-folder names: the class order of an ImageFolder tree."""
    return sorted(d for d in os.listdir(directory) if not d.startswith(".")
                  and os.path.isdir(os.path.join(directory, d)))


def list_folder_split(directory: str, classes: Sequence[str]) -> List[Item]:
    """An ImageFolder split: <directory>/<class>/<image>."""
    index = {c: i + 1 for i, c in enumerate(classes)}
    items = []
    for name in class_folders(directory):
        if name not in index:
            raise BuildError(f"{os.path.join(directory, name)}: class {name!r} "
                             "is not a train class (not in the class list)")
        items.extend(Item(p, index[name], name)
                     for p in _images_in(os.path.join(directory, name)))
    return items


def read_validation_labels(path: str, files: Sequence[str]) -> Dict[str, str]:
    """file name -> class, from `<class>` lines (sorted file order) or
    `<file> <class>` lines."""
    with open(path, encoding="utf-8") as f:
        lines = [line.split() for line in f if line.strip()]
    if lines and all(len(parts) == 1 for parts in lines):
        names = sorted(os.path.basename(p) for p in files)
        if len(lines) != len(names):
            raise BuildError(f"--validation_labels {path}: {len(lines)} labels "
                             f"for {len(names)} validation images")
        return {n: parts[0] for n, parts in zip(names, lines)}
    labels = {}
    for number, parts in enumerate(lines, 1):
        if len(parts) < 2:
            raise BuildError(f"--validation_labels {path}:{number}: expected "
                             "'<file> <class>'")
        labels[os.path.basename(parts[0])] = parts[1]
    return labels


def list_flat_split(directory: str, labels_path: str,
                    classes: Sequence[str]) -> List[Item]:
    """ImageNet's validation: one folder of images plus a label file."""
    files = _images_in(directory)
    labels = read_validation_labels(labels_path, files)
    index = {c: i + 1 for i, c in enumerate(classes)}
    items = []
    for path in files:
        name = os.path.basename(path)
        if name not in labels:
            raise BuildError(f"--validation_labels has no label for {name}")
        cls = labels[name]
        if cls not in index:
            raise BuildError(f"--validation_labels: {name} has class {cls!r}, "
                             "which is not a train class")
        items.append(Item(path, index[cls], cls))
    return items


def read_boxes(path: str) -> Dict[str, List[Tuple[float, ...]]]:
    """`<file>,xmin,ymin,xmax,ymax` lines (fractions) -> file name -> boxes."""
    boxes: Dict[str, List[Tuple[float, ...]]] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            parts = [p.strip() for p in line.strip().split(",")]
            if not parts or not parts[0]:
                continue
            if len(parts) != 5:
                raise BuildError(f"--bounding_boxes {path}:{number}: expected "
                                 "file,xmin,ymin,xmax,ymax")
            try:
                box = tuple(float(p) for p in parts[1:])
            except ValueError:
                raise BuildError(f"--bounding_boxes {path}:{number}: not "
                                 f"numbers: {line.strip()!r}")
            boxes.setdefault(os.path.basename(parts[0]), []).append(box)
    return boxes


def read_class_text(path: Optional[str]) -> Dict[str, str]:
    """`<class> <human-readable text>` lines (e.g. ImageNet's synset words)."""
    if not path:
        return {}
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split(None, 1)
            if parts:
                out[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return out


# --------------------------------------------------------------------------
# Shards
# --------------------------------------------------------------------------


def shard_name(split: str, index: int, count: int) -> str:
    return f"{split}-{index:05d}-of-{count:05d}"


def assign_shards(items: Sequence[Item], num_shards: int,
                  seed: int) -> List[List[Item]]:
    """Seeded shuffle, then contiguous slices: same inputs -> same shards."""
    order = list(items)
    random.Random(seed).shuffle(order)
    n = len(order)
    return [order[i * n // num_shards:(i + 1) * n // num_shards]
            for i in range(num_shards)]


@dataclasses.dataclass
class ShardTask:
    split: str
    index: int
    count: int
    items: List[Item]
    class_text: Dict[str, str]
    quality: int


# One slot per shard of the split being built: the worker converting shard i
# counts its images in slot i, the main process sums the slots. No lock, so
# a worker killed mid-update can never leave one held.
_progress = None


def _init_progress(slots) -> None:
    global _progress
    _progress = slots


def encode_shard(task: ShardTask) -> Tuple[int, List[bytes],
                                           List[Tuple[str, str]]]:
    """(shard index, serialized records, [(path, why skipped)]): in a worker.

    Raises NeedsPillow (the build must stop) for an image only Pillow can
    convert when Pillow is not installed.
    """
    records, skipped = [], []
    for done, item in enumerate(task.items, 1):
        try:
            with open(item.path, "rb") as f:
                data = f.read()
            jpeg, height, width = to_rgb_jpeg(data, task.quality, item.path)
        except (OSError, ValueError) as e:
            skipped.append((item.path, str(e)))
        else:
            records.append(classic_example(
                jpeg, item.label, height, width, synset=item.synset,
                text=task.class_text.get(item.synset, item.synset),
                filename=os.path.basename(item.path), boxes=item.boxes))
        if _progress is not None:
            _progress[task.index] = done
    return task.index, records, skipped


class Progress:
    """A progress bar on a terminal, a line every few seconds otherwise."""

    def __init__(self, label: str, total: int, stream=None,
                 every_seconds: float = 10.0):
        self.label, self.total = label, total
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every = 0.2 if self.tty else every_seconds
        self.start = time.monotonic()
        self.last = 0.0

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        pct = 100.0 * done / self.total if self.total else 100.0
        eta = (self.total - done) / rate if rate > 0 else 0.0
        width = 30
        filled = int(width * pct / 100)
        line = (f"[{self.label}] [{'#' * filled}{'.' * (width - filled)}] "
                f"{done}/{self.total} images ({pct:5.1f}%) {rate:7.1f} img/s "
                f"ETA {time.strftime('%H:%M:%S', time.gmtime(eta))}")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if force else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _write_shard(path: str, records: Sequence[bytes]) -> None:
    """Writes under a hidden temporary name, renames when complete."""
    from official_bench.runtime.keras_setup import tf
    with atomic_path(path) as tmp:
        with tf.io.TFRecordWriter(tmp) as writer:
            for record in records:
                writer.write(record)


def _finish_shard(output_dir: str, name: str, images: int,
                  records: Sequence[bytes],
                  skipped: Sequence[Tuple[str, str]]) -> None:
    """The shard's record first, then the shard: a shard never exists
    without the list of what it skipped."""
    shard_skips.write_record(output_dir, name, images, len(records), skipped)
    _write_shard(os.path.join(output_dir, name), records)


def _remove_stale_temporaries(output_dir: str, split: str) -> None:
    for name in os.listdir(output_dir):
        if name.startswith(f".{split}-") and name.endswith(".tmp"):
            os.remove(os.path.join(output_dir, name))
    shard_skips.remove_stale_temporaries(output_dir)


class WorkerLost(Exception):
    """A conversion worker died mid-build (killed or crashed)."""


def _lost_message(exited) -> str:
    """Names the dead workers. Once one dies the executor SIGTERMs the
    rest, so those are left out when another cause is known."""
    causes = [(pid, code) for pid, code in exited
              if code != -signal.SIGTERM]
    exited = causes or exited
    how = []
    for pid, code in exited:
        if code is not None and code < 0:
            how.append(f"worker {pid} was killed by "
                       f"{signal.Signals(-code).name}")
        else:
            how.append(f"worker {pid} exited with status {code}")
    return ("; ".join(how or ["a worker died"]) + " (the out-of-memory "
            "killer? try fewer --num_workers); finished shards are kept, "
            "re-run the same command to build the rest")


def _check_workers(pool: WorkerPool) -> None:
    """Fails the build when a worker died, instead of waiting for shards
    that will never come (see WorkerPool.exited_workers)."""
    exited = pool.exited_workers()
    if exited:
        raise WorkerLost(_lost_message(exited))


def _shard_result(future: concurrent.futures.Future, pool: WorkerPool):
    try:
        return future.result()
    except BrokenProcessPool as e:
        pool.wait_all_exited(timeout=5.0)
        raise WorkerLost(_lost_message(pool.exited_workers())) from e


def build_split(split: str, items: Sequence[Item], num_shards: int,
                output_dir: str, pool: WorkerPool, slots,
                class_text: Dict[str, str], quality: int, seed: int,
                log=print) -> Tuple[int, int, List[Tuple[str, str]]]:
    """Writes one split's missing shards; returns (written, already there,
    images skipped by this run)."""
    if not items:
        raise BuildError(f"split {split}: no images found")
    if num_shards < 1 or num_shards > len(items):
        raise BuildError(f"--{split}_shards {num_shards}: must be 1.."
                         f"{len(items)} (the number of {split} images)")
    _remove_stale_temporaries(output_dir, split)
    shards = assign_shards(items, num_shards, seed)
    tasks, done_images = [], 0
    for index, shard_items in enumerate(shards):
        path = os.path.join(output_dir, shard_name(split, index, num_shards))
        if os.path.exists(path):
            done_images += len(shard_items)
        else:
            tasks.append(ShardTask(split, index, num_shards, shard_items,
                                   class_text, quality))
    if done_images:
        log(f"[{split}] {num_shards - len(tasks)} of {num_shards} shard(s) "
            "already complete; skipping them")
    progress = Progress(split, len(items))
    for i in range(len(slots)):
        slots[i] = 0
    bad: List[Tuple[str, str]] = []
    # Queued shards are not cancelled here when something raises: the pool's
    # stop() does it inside the executor, and a cancel from this thread races
    # with the executor marking the same futures broken (CPython 3.11).
    pending = {pool.submit(encode_shard, task) for task in tasks}
    written = 0
    while pending:
        done, pending = concurrent.futures.wait(
            pending, timeout=0.5,
            return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            index, records, skipped = _shard_result(future, pool)
            _finish_shard(output_dir, shard_name(split, index, num_shards),
                          len(shards[index]), records, skipped)
            bad.extend(skipped)
            written += 1
        if pending:
            _check_workers(pool)
            progress.update(done_images + sum(slots[:num_shards]))
    progress.update(done_images + sum(slots[:num_shards]), force=True)
    return written, num_shards - len(tasks), bad


# --------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------


def verify(output_dir: str, splits: Sequence[str], num_classes: Optional[int],
           expected: Optional[Dict[str, int]] = None,
           log=print, expected_shards: Optional[Dict[str, int]] = None) -> int:
    """Counts records, decodes every image, checks labels; returns #problems.

    `expected` holds record counts per split, `expected_shards` shard counts
    (an interrupted build leaves some missing).
    """
    from official_bench.data.records.record_files import (
        CLASSIC_LAYOUT, classic_files)
    from official_bench.data.records.record_reader import OK
    from official_bench.data.build.record_verify import check_records
    problems = 0
    for split in splits:
        files = classic_files(output_dir, split)
        if not files:
            log(f"verify [{split}]: no shards in {output_dir}")
            problems += 1
            continue
        total, bad = 0, []
        for filename, index, status, detail in check_records(
                files, CLASSIC_LAYOUT, num_classes):
            if status == OK:
                total += 1
            else:
                bad.append(f"{filename} record {index}: {detail}")
        log(f"verify [{split}]: {len(files)} shard(s), {total} good "
            f"record(s), {len(bad)} bad")
        for line in bad:
            log(f"  BAD {line}")
        problems += len(bad)
        want_shards = (expected_shards or {}).get(split)
        if want_shards is not None:
            missing = [shard_name(split, i, want_shards)
                       for i in range(want_shards)
                       if not os.path.exists(os.path.join(
                           output_dir, shard_name(split, i, want_shards)))]
            if missing:
                log(f"verify [{split}]: {len(missing)} of {want_shards} "
                    f"shard(s) missing (first: {missing[0]}); the build did "
                    "not finish: re-run the build command")
                problems += 1
        want = (expected or {}).get(split)
        if want is not None and want != total:
            log(f"verify [{split}]: expected {want} records "
                f"({MANIFEST}), found {total}")
            problems += 1
    return problems


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


@dataclasses.dataclass
class BuildOptions:
    """What `build` converts: the CLI's flags, typed, so that a notebook or
    a test can call the builder without argparse."""
    output_dir: str
    input_dir: Optional[str] = None
    layout: str = "imagefolder"  # or "imagenet"
    train_dir: Optional[str] = None
    validation_dir: Optional[str] = None
    validation_labels: Optional[str] = None
    bounding_boxes: Optional[str] = None
    class_names: Optional[str] = None
    class_text: Optional[str] = None
    splits: str = "train,validation"
    train_shards: int = DEFAULT_SHARDS["train"]
    validation_shards: int = DEFAULT_SHARDS["validation"]
    num_workers: int = dataclasses.field(
        default_factory=lambda: os.cpu_count() or 1)
    quality: int = 95  # JPEG quality for converted images
    seed: int = 12345  # shuffle seed for the image -> shard assignment

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> "BuildOptions":
        return cls(**{f.name: getattr(ns, f.name)
                      for f in dataclasses.fields(cls)})


def _parser() -> argparse.ArgumentParser:
    d = BuildOptions(output_dir="")  # the defaults, shown by --help
    p = argparse.ArgumentParser(
        prog="python -m official_bench.data.build.build_records",
        description="Write image folders as ImageNet-style TFRecord shards.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--output_dir", required=True,
                   help="where the shards, labels.txt and build_records.json go")
    p.add_argument("--input_dir", help="root holding train/ and validation/")
    p.add_argument("--layout", choices=("imagefolder", "imagenet"),
                   default=d.layout)
    p.add_argument("--train_dir", help="train folder (default input_dir/train)")
    p.add_argument("--validation_dir",
                   help="validation folder (default input_dir/validation "
                        "or input_dir/val)")
    p.add_argument("--validation_labels",
                   help="imagenet layout: the validation label file")
    p.add_argument("--bounding_boxes",
                   help="CSV file,xmin,ymin,xmax,ymax (fractions), optional")
    p.add_argument("--class_names",
                   help="file with one class per line: fixes the class order "
                        "(default: sorted train folder names)")
    p.add_argument("--class_text",
                   help="'<class> <text>' per line for image/class/text")
    p.add_argument("--splits", default=d.splits)
    p.add_argument("--train_shards", type=int, default=d.train_shards)
    p.add_argument("--validation_shards", type=int,
                   default=d.validation_shards)
    p.add_argument("--num_workers", type=int, default=d.num_workers)
    p.add_argument("--quality", type=int, default=d.quality,
                   help="JPEG quality for converted images")
    p.add_argument("--seed", type=int, default=d.seed,
                   help="shuffle seed for the image -> shard assignment")
    p.add_argument("--verify", action="store_true",
                   help="afterwards (or, without inputs, only) count records "
                        "and decode every image")
    return p


def _split_dir(args: BuildOptions, split: str) -> Optional[str]:
    explicit = getattr(args, f"{split}_dir", None)
    if explicit:
        return explicit
    if not args.input_dir:
        return None
    for name in SPLIT_DIRS.get(split, (split,)):
        path = os.path.join(args.input_dir, name)
        if os.path.isdir(path):
            return path
    return os.path.join(args.input_dir, SPLIT_DIRS.get(split, (split,))[0])


def _read_lines(path: str) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def _classes(args: BuildOptions, splits: Sequence[str]) -> List[str]:
    if args.class_names:
        return _read_lines(args.class_names)
    train_dir = _split_dir(args, "train")
    source = train_dir if train_dir and os.path.isdir(train_dir) else None
    if source is None:
        # No train split: classes from the validation folders.
        source = _split_dir(args, splits[0])
    if not source or not os.path.isdir(source):
        raise BuildError(f"cannot find the class folders: {source} is not a "
                         "directory (give --input_dir or --train_dir)")
    classes = class_folders(source)
    if not classes:
        raise BuildError(f"{source} has no class folders")
    return classes


def _list_items(args: BuildOptions, split: str,
                classes: Sequence[str]) -> List[Item]:
    directory = _split_dir(args, split)
    if not directory or not os.path.isdir(directory):
        raise BuildError(f"split {split}: {directory} is not a directory")
    if args.layout == "imagenet" and split != "train":
        if not args.validation_labels:
            raise BuildError("--layout=imagenet needs --validation_labels for "
                             "the flat validation folder")
        return list_flat_split(directory, args.validation_labels, classes)
    return list_folder_split(directory, classes)


def _read_manifest(output_dir: str) -> Dict:
    path = os.path.join(output_dir, MANIFEST)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _check_manifest(output_dir: str, manifest: Dict) -> None:
    path = os.path.join(output_dir, MANIFEST)
    old = _read_manifest(output_dir)
    for split, info in manifest["splits"].items():
        before = old.get("splits", {}).get(split)
        keys = ("images", "shards", "seed")
        if before and any(before.get(k) != info[k] for k in keys):
            raise BuildError(
                f"{path}: split {split} was started with "
                f"{ {k: before.get(k) for k in keys} }, now "
                f"{ {k: info[k] for k in keys} }; finished shards would not "
                "match: use a new --output_dir or the old settings")
    if old.get("classes") and old["classes"] != manifest["classes"]:
        raise BuildError(f"{path}: the class list changed since the shards "
                         "were started; use a new --output_dir")


def _start_manifest(output_dir: str, manifest: Dict) -> Dict:
    """Writes the manifest of a run about to start: this run's splits lose
    their record counts until it finishes; other splits are kept."""
    old = _read_manifest(output_dir)
    merged = dict(manifest)
    merged["splits"] = {**old.get("splits", {}), **manifest["splits"]}
    write_text_atomic(os.path.join(output_dir, MANIFEST),
                      json.dumps(merged, indent=1) + "\n")
    return merged


def finish(output_dir: str, manifest: Dict, log=print) -> List[Tuple[str,
                                                                   str]]:
    """Merges the per-shard records of every finished shard into
    skipped_images.txt and the record counts of build_records.json;
    returns all skipped images. Run at the end of every build, so a re-run
    that rebuilt only some shards still lists what earlier runs skipped."""
    all_skipped: List[Tuple[str, str]] = []
    for split, info in manifest["splits"].items():
        names = [shard_name(split, i, info["shards"])
                 for i in range(info["shards"])]
        finished = [n for n in names
                    if os.path.exists(os.path.join(output_dir, n))]
        try:
            total, skipped, unrecorded = shard_skips.merge(output_dir,
                                                           finished)
        except ValueError as e:
            raise BuildError(str(e)) from e
        all_skipped.extend(skipped)
        info.pop("records", None)
        info.pop("skipped", None)
        if unrecorded:
            log(f"WARNING: [{split}] {len(unrecorded)} shard(s) have no "
                f"record of skipped images (e.g. {unrecorded[0]}, from an "
                "older builder); --verify will not compare record counts")
        elif len(finished) == len(names):
            info["records"], info["skipped"] = total, len(skipped)
    write_text_atomic(os.path.join(output_dir, MANIFEST),
                      json.dumps(manifest, indent=1) + "\n")
    path = os.path.join(output_dir, SKIPPED_FILE)
    if all_skipped:
        write_text_atomic(path, "".join(f"{image}\t{why}\n"
                                        for image, why in all_skipped))
    elif os.path.exists(path):
        os.remove(path)
    return all_skipped


def build(args: BuildOptions, log=print) -> int:
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    os.makedirs(args.output_dir, exist_ok=True)
    classes = _classes(args, splits)
    boxes = read_boxes(args.bounding_boxes) if args.bounding_boxes else {}
    class_text = read_class_text(args.class_text)
    plan = {}
    for split in splits:
        items = _list_items(args, split, classes)
        for item in items:
            item.boxes = tuple(boxes.get(os.path.basename(item.path), ()))
        shards = getattr(args, f"{split}_shards", None) or \
            DEFAULT_SHARDS.get(split, 1)
        plan[split] = (items, shards)
    manifest = {"format": 1, "layout": args.layout, "classes": list(classes),
                "splits": {s: {"images": len(items), "shards": shards,
                               "seed": args.seed}
                           for s, (items, shards) in plan.items()}}
    _check_manifest(args.output_dir, manifest)
    manifest = _start_manifest(args.output_dir, manifest)
    write_text_atomic(os.path.join(args.output_dir, LABELS_FILE),
                      "".join(c + "\n" for c in classes))
    log(f"{len(classes)} classes -> {os.path.join(args.output_dir, LABELS_FILE)}"
        f" (label i = line i, 1-based)")
    if not pillow_available():
        log("Pillow is not installed: TensorFlow converts the images (JPEG, "
            "PNG, GIF, BMP, WebP); TIFF and PPM/PGM need "
            f"{INSTALL_HINT}")
    # TensorFlow writes the shards: import it now, not when the first
    # shard is done, or the workers would finish while this process imports.
    from official_bench.runtime.keras_setup import tf  # noqa: F401
    workers = max(1, args.num_workers)
    slots = SPAWN.RawArray("q", max(shards for _, shards in plan.values()))
    with WorkerPool(workers, initializer=_init_progress,
                    initargs=(slots,)) as pool:
        for split, (items, shards) in plan.items():
            log(f"[{split}] {len(items)} images -> {shards} shard(s), "
                f"{workers} worker(s)")
            written, kept, bad = build_split(
                split, items, shards, args.output_dir, pool, slots,
                class_text, args.quality, args.seed, log=log)
            log(f"[{split}] wrote {written} shard(s), {kept} already there, "
                f"{len(bad)} image(s) skipped")
    all_bad = finish(args.output_dir, manifest, log=log)
    if all_bad:
        log(f"WARNING: {len(all_bad)} unreadable image(s) were skipped; "
            f"listed in {os.path.join(args.output_dir, SKIPPED_FILE)}")
        for image, why in all_bad[:10]:
            log(f"  skipped {image}: {why}")
    return exit_status.OK


class Interrupted(BaseException):
    """SIGTERM/SIGINT reached the builder (BaseException: nothing on the
    way up may swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stop_on_signals():
    """Turns SIGTERM/SIGINT into Interrupted in the main thread, so the
    pool is stopped on the way out; restores the old handlers after."""
    def handler(signum, frame):
        raise Interrupted(signum)
    old = {}
    try:
        for signum in (signal.SIGTERM, signal.SIGINT):
            old[signum] = signal.signal(signum, handler)
    except ValueError:  # not the main thread: leave signals alone
        pass
    try:
        yield
    finally:
        for signum, previous in old.items():
            signal.signal(signum, previous)


def main(argv: Optional[Sequence[str]] = None, log=print) -> int:
    args = _parser().parse_args(argv)
    try:
        with _stop_on_signals():
            has_input = bool(args.input_dir or args.train_dir or
                             args.validation_dir)
            if not has_input and not args.verify:
                raise BuildError("give --input_dir (or --train_dir / "
                                 "--validation_dir), or --verify to check "
                                 "existing shards")
            if has_input:
                build(BuildOptions.from_namespace(args), log=log)
            if args.verify:
                return _verify_cli(args, log)
    except Interrupted as e:
        name = signal.Signals(e.signum).name
        print(f"build_records: stopped by {name}; finished shards are kept, "
              "re-run the same command to build the rest", file=sys.stderr)
        return exit_status.by_signal(e.signum)
    except (BuildError, NeedsPillow) as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.CONFIG
    except WorkerLost as e:
        print(f"error: build_records: {e}", file=sys.stderr)
        return exit_status.FAILED
    return exit_status.OK


def _verify_cli(args, log) -> int:
    manifest = _read_manifest(args.output_dir)
    expected, expected_shards, num_classes = None, None, None
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    if manifest:
        num_classes = len(manifest.get("classes") or []) or None
        infos = manifest.get("splits", {})
        expected = {s: info["records"] for s, info in infos.items()
                    if info.get("records") is not None}
        expected_shards = {s: info["shards"] for s, info in infos.items()}
        for split in splits:
            if split in infos and split not in expected:
                log(f"verify [{split}]: {MANIFEST} has no record count (the "
                    "build did not finish, or an older builder made it); "
                    "record count not compared")
        skipped = sum(info.get("skipped") or 0 for info in infos.values())
        if skipped:
            log(f"verify: {skipped} source image(s) were skipped when "
                f"building ({SKIPPED_FILE}); expected counts exclude them")
    elif os.path.exists(os.path.join(args.output_dir, LABELS_FILE)):
        num_classes = len(_read_lines(os.path.join(args.output_dir,
                                                   LABELS_FILE)))
    problems = verify(args.output_dir, splits, num_classes, expected, log=log,
                      expected_shards=expected_shards)
    log("verify: OK" if not problems else f"verify: {problems} problem(s)")
    return 1 if problems else 0


def run_main() -> None:
    """Console-script entry (official-bench-build-records)."""
    sys.exit(main())


if __name__ == "__main__":
    run_main()
