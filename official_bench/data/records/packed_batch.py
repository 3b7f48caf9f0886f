"""`decode: gpu_trainer`'s batch as a worker hands it over: the JPEG bytes
of its colour crops, undecoded, in the slot that would carry its pixels.

A packed batch of n items fills the n * S bytes (S = H * W * C) of its
images: a header (MAGIC, count, one ITEM record each), then each item's
bytes: a pending crop's JPEG (window, flip, JPEG header: a
host_decode.Pending), a ready item's S pixels. `plan` keeps S bytes in
reserve for every item not yet placed, so a JPEG that would eat into it
is decoded by the worker instead, as is a share of the JPEGs picked
evenly (`worker_takes`: worker_decode_share); a batch where no JPEG
travels goes plain (its pixels, no header). PACKED, set on the first
label, tells the two apart. TensorFlow-free.
"""

from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from official_bench.data.records.host_decode import Pending

MAGIC = b"OBPB"
PACKED = 1 << 30  # on a packed batch's first label (labels < 2^20)
_HEAD = np.dtype([("magic", "S4"), ("count", "<u4"), ("size", "<u4"),
                  ("channels", "<u4")])
ITEM = np.dtype([("pending", "u1"), ("flip", "u1"), ("dct", "u1"),
                 ("components", "u1"), ("adobe", "u1"), ("pad", "u1", 3),
                 ("offset", "<u8"), ("length", "<u8"),
                 ("window", "<u4", 4), ("shape", "<u4", 2),
                 ("file", "<u4"), ("record", "<u8")])


class PackError(ValueError):
    """A slot's bytes are not a packed batch this module wrote."""


class Tag(NamedTuple):
    """Where an item came from: its file (an index into the source's
    files) and its record index, for a decode failure's line."""
    file: int
    record: int


Item = Union[np.ndarray, Pending]


def header_bytes(count: int) -> int:
    return _HEAD.itemsize + count * ITEM.itemsize


def worker_takes(k: int, share: float) -> bool:
    """Whether the k-th Pending item of a batch (from 0) is decoded by the
    worker under `share` in [0, 1): spread evenly, floor(k * share) items
    of the first k (0.5: items 1, 3, 5 ...; 0: none)."""
    return math.floor((k + 1) * share) > math.floor(k * share)


def plan(items: Sequence[Item], slot: int, share: float = 0.0
         ) -> Optional[List[bool]]:
    """Which Pending items travel as JPEG bytes (True) in a batch of
    len(items) slots of `slot` bytes: each one not taken by the worker
    (`worker_takes` under `share`) whose bytes leave `slot` bytes for
    every later item; the others are decoded by the worker. None: none
    travels (the batch goes plain, every item decoded)."""
    budget = len(items) * slot - header_bytes(len(items))
    used, keep, pending = 0, [], 0
    for j, item in enumerate(items):
        later = slot * (len(items) - j - 1)
        fits = isinstance(item, Pending) and \
            not worker_takes(pending, share) and \
            used + len(item.data) + later <= budget
        pending += isinstance(item, Pending)
        keep.append(fits)
        used += len(item.data) if fits else slot
    return keep if any(keep) else None


def pack(items: Sequence[Item], tags: Sequence[Tag],
         shape: Tuple[int, int, int]) -> np.ndarray:
    """uint8 [n, H, W, C]: `items` (pixels [H, W, C] or Pending, as `plan`
    allowed) packed; raises PackError where they do not fit."""
    slot = int(np.prod(shape))
    out = np.zeros(len(items) * slot, np.uint8)
    records = np.zeros(len(items), ITEM)
    pos = header_bytes(len(items))
    for k, (item, tag) in enumerate(zip(items, tags)):
        r = records[k]
        if isinstance(item, Pending):
            data = np.frombuffer(item.data, np.uint8)
            r["pending"], r["flip"], r["dct"] = 1, item.flip, \
                item.dct_scaling
            r["shape"] = item.header[:2]
            r["components"], r["adobe"] = item.header[2], item.header[3]
            r["window"] = item.window
        else:
            data = np.ascontiguousarray(item, np.uint8).reshape(-1)
            if data.size != slot:
                raise PackError(f"item {k}: {item.shape} is not {shape}")
        if pos + data.size > out.size:
            raise PackError(f"{len(items)} items need more than the "
                            f"{out.size} bytes of their slots")
        r["offset"], r["length"] = pos, data.size
        r["file"], r["record"] = tag
        out[pos:pos + data.size] = data
        pos += data.size
    head = np.array([(MAGIC, len(items), shape[0], shape[2])], _HEAD)
    out[:_HEAD.itemsize] = head.view(np.uint8)
    out[_HEAD.itemsize:header_bytes(len(items))] = records.view(np.uint8)
    return out.reshape((len(items),) + tuple(shape))


def unpack(images: np.ndarray, out: Optional[np.ndarray] = None
           ) -> Tuple[List[Item], List[Tag]]:
    """A packed batch's items (ready pixels copied out: into out[k], an
    array shaped as `images`, where given; Pending with its JPEG's bytes)
    and tags; raises PackError naming what is wrong."""
    n, h, w, c = images.shape
    flat = images.reshape(-1)
    if flat.size < _HEAD.itemsize:
        raise PackError(f"a slot of {flat.size} bytes holds no header")
    head = flat[:_HEAD.itemsize].view(_HEAD)[0]
    if head["magic"] != MAGIC or head["count"] != n or \
            head["size"] != h or head["channels"] != c or \
            header_bytes(n) > flat.size:
        raise PackError(f"no packed batch of {n} items of {h}x{w}x{c} "
                        f"(header {bytes(flat[:_HEAD.itemsize])!r})")
    records = flat[_HEAD.itemsize:header_bytes(n)].view(ITEM)
    items: List[Item] = []
    for k, r in enumerate(records):
        start, length = int(r["offset"]), int(r["length"])
        if start < header_bytes(n) or start + length > flat.size or \
                (not r["pending"] and length != h * w * c):
            raise PackError(f"item {k}: bytes {start}..{start + length} "
                            f"do not fit a batch of {flat.size}")
        data = flat[start:start + length]
        if r["pending"]:
            height, width = (int(v) for v in r["shape"])
            items.append(Pending(
                data.tobytes(), (height, width, int(r["components"]),
                                 bool(r["adobe"])),
                tuple(int(v) for v in r["window"]), h, bool(r["flip"]),
                bool(r["dct"])))
        elif out is None:
            items.append(data.reshape(h, w, c).copy())
        else:
            out[k] = data.reshape(h, w, c)
            items.append(out[k])
    return items, [Tag(int(r["file"]), int(r["record"])) for r in records]
