"""Listing the source images of a build: ImageFolder splits, ImageNet's
flat validation folder with its label file, bounding boxes and class text.
Every bad input raises BuildError naming the file."""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Sequence, Tuple

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff",
                    ".webp", ".ppm", ".pgm")


class BuildError(Exception):
    """Bad arguments or inputs; the message says which."""


@dataclasses.dataclass
class Item:
    """One source image: its path, 1-based label, synset and bounding
    boxes (fractions of the image)."""
    path: str
    label: int  # 1-based
    synset: str
    boxes: Tuple[Tuple[float, float, float, float], ...] = ()


def _images_in(directory: str) -> List[str]:
    """The image files of `directory`; a symbolic link to nothing is
    listed too, so the build reports it as skipped (encode_shard) instead
    of leaving it out in silence."""
    return sorted(
        os.path.join(directory, f) for f in os.listdir(directory)
        if not f.startswith(".") and f.lower().endswith(IMAGE_EXTENSIONS)
        and _file_or_broken_link(os.path.join(directory, f)))


def _file_or_broken_link(path: str) -> bool:
    return os.path.isfile(path) or (os.path.islink(path)
                                    and not os.path.exists(path))


def shown(path: str) -> str:
    """`path` printable: bytes of a name that is not UTF-8 as \\xNN."""
    return path.encode("utf-8", "surrogateescape").decode(
        "utf-8", "backslashreplace")


def class_folders(directory: str) -> List[str]:
    """Sorted sub-folder names: the class order of an ImageFolder tree.
    A name that is not UTF-8 cannot be a class (labels.txt is text)."""
    names = sorted(d for d in os.listdir(directory) if not d.startswith(".")
                   and os.path.isdir(os.path.join(directory, d)))
    for name in names:
        if shown(name) != name:
            raise BuildError(f"{shown(os.path.join(directory, name))}: a "
                             "class folder name must be UTF-8 (it goes "
                             "into labels.txt); rename it")
    return names


def list_folder_split(directory: str, classes: Sequence[str]) -> List[Item]:
    """An ImageFolder split: <directory>/<class>/<image>."""
    index = {c: i + 1 for i, c in enumerate(classes)}
    items = []
    for name in class_folders(directory):
        if name not in index:
            raise BuildError(f"{os.path.join(directory, name)}: class "
                             f"{name!r} is not a train class (not in the "
                             "class list)")
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
            raise BuildError(f"--validation_labels {path}: {len(lines)} "
                             f"labels for {len(names)} validation images")
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


def read_lines(path: str) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]
