"""The build: typed options (the CLI's flags, so a notebook or a test
builds without argparse), the inputs they name, and the run over the
splits: manifest, labels, shards in worker processes, the final merge."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import List, Optional, Sequence

from official_bench.contracts import exit_status, record_names
from official_bench.data.build import manifest as manifest_lib
from official_bench.data.build.image_codec import (
    INSTALL_HINT,
    pillow_available,
)
from official_bench.data.build.manifest import LABELS_FILE, SKIPPED_FILE
from official_bench.data.build.shards import (
    build_split,
    check_shard_count,
    init_progress,
)
from official_bench.data.build.sources import (
    IMAGE_EXTENSIONS,
    BuildError,
    Item,
    class_folders,
    list_flat_split,
    list_folder_split,
    read_boxes,
    read_class_text,
    read_lines,
    shown,
)
from official_bench.data.build.worker_pool import SPAWN, WorkerPool
from official_bench.host.atomic import write_text_atomic
from official_bench.host.write_errors import writing

DEFAULT_SHARDS = {"train": 1024, "validation": 128}
SPLIT_DIRS = record_names.IMAGE_SPLIT_DIRS


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


def _classes(args: BuildOptions, splits: Sequence[str]) -> List[str]:
    if args.class_names:
        return read_lines(args.class_names)
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
        items = list_flat_split(directory, args.validation_labels, classes)
        where = directory
    else:
        items = list_folder_split(directory, classes)
        where = os.path.join(directory, "<class>")
    if not items:
        raise BuildError(f"split {split}: no images found in {where} "
                         f"(looked for {' '.join(IMAGE_EXTENSIONS)})")
    return items


def _shard_count(args: BuildOptions, split: str, images: int) -> int:
    """The split's --<split>_shards (its default when not given), checked
    against its image count before anything is written: a bad count must
    not leave a manifest that a corrected re-run would be refused by."""
    shards = getattr(args, f"{split}_shards", None)
    if shards is None:
        shards = DEFAULT_SHARDS.get(split, 1)
    check_shard_count(split, images, shards)
    return shards


def _check_output_dir(args: BuildOptions, splits: Sequence[str]) -> None:
    """Refuses an --output_dir inside a split's folder: it would be listed
    as a class folder (an extra class, labels of the others shifted)."""
    out = os.path.realpath(args.output_dir)
    for split in splits:
        directory = _split_dir(args, split)
        if not directory:
            continue
        inside = os.path.realpath(directory)
        if out == inside or out.startswith(inside.rstrip(os.sep) + os.sep):
            raise BuildError(
                f"--output_dir {args.output_dir} is inside the {split} "
                f"folder {directory}, where it would be read as a class "
                "folder; choose an --output_dir outside it")


def _check_options(args: BuildOptions) -> None:
    if not 0 <= args.quality <= 100:
        raise BuildError(f"--quality {args.quality}: must be 0..100 (JPEG "
                         "quality)")


def _warn_empty_classes(classes: Sequence[str], items: Sequence[Item],
                        log) -> None:
    """A class folder without images still holds its label (the order is
    the folder names'), so num_classes counts it: say so."""
    present = {item.synset for item in items}
    empty = [c for c in classes if c not in present]
    if empty:
        log(f"WARNING: [train] {len(empty)} of {len(classes)} class(es) have "
            f"no images ({', '.join(empty[:5])}"
            f"{', ...' if len(empty) > 5 else ''}); they keep their labels "
            f"in {LABELS_FILE}, so num_classes is {len(classes)}")


def build(args: BuildOptions, log=print) -> int:
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    if not splits:
        raise BuildError(f"--splits {args.splits!r} names no split (e.g. "
                         "train,validation)")
    _check_options(args)
    _check_output_dir(args, splits)
    classes = _classes(args, splits)
    boxes = read_boxes(args.bounding_boxes) if args.bounding_boxes else {}
    class_text = read_class_text(args.class_text)
    listed = {split: _list_items(args, split, classes) for split in splits}
    plan = {}
    for split, items in listed.items():
        for item in items:
            item.boxes = tuple(boxes.get(os.path.basename(item.path), ()))
        plan[split] = (items, _shard_count(args, split, len(items)))
    if "train" in plan:
        _warn_empty_classes(classes, plan["train"][0], log)
    with writing(args.output_dir, "the TFRecord shards"):
        os.makedirs(args.output_dir, exist_ok=True)
    manifest = {"format": 1, "layout": args.layout, "classes": list(classes),
                "splits": {s: {"images": len(items), "shards": shards,
                               "seed": args.seed}
                           for s, (items, shards) in plan.items()}}
    manifest_lib.check_manifest(args.output_dir, manifest)
    manifest = manifest_lib.start_manifest(args.output_dir, manifest)
    labels = os.path.join(args.output_dir, LABELS_FILE)
    with writing(labels, "the class list"):
        write_text_atomic(labels, "".join(c + "\n" for c in classes))
    log(f"{len(classes)} classes -> "
        f"{os.path.join(args.output_dir, LABELS_FILE)}"
        f" (label i = line i, 1-based)")
    if not pillow_available():
        log("Pillow is not installed: TensorFlow converts the images (JPEG, "
            "PNG, GIF, BMP, WebP); TIFF and PPM/PGM need "
            f"{INSTALL_HINT}")
    workers = max(1, args.num_workers)
    slots = SPAWN.RawArray("q", max(shards for _, shards in plan.values()))
    with WorkerPool(workers, initializer=init_progress,
                    initargs=(slots,)) as pool:
        for split, (items, shards) in plan.items():
            log(f"[{split}] {len(items)} images -> {shards} shard(s), "
                f"{workers} worker(s)")
            written, kept, bad = build_split(
                split, items, shards, args.output_dir, pool, slots,
                class_text, args.quality, args.seed, log=log)
            log(f"[{split}] wrote {written} shard(s), {kept} already there, "
                f"{len(bad)} image(s) skipped")
    all_bad = manifest_lib.finish(args.output_dir, manifest, log=log)
    if all_bad:
        log(f"WARNING: {len(all_bad)} unreadable image(s) were skipped; "
            f"listed in {os.path.join(args.output_dir, SKIPPED_FILE)}")
        for image, why in all_bad[:10]:
            log(f"  skipped {shown(image)}: {why}")
    return exit_status.OK
