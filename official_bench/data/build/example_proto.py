"""tf.train.Example, encoded by hand: the conversion workers need no
TensorFlow. `classic_example` is one record in the classic ImageNet schema
(build_imagenet_data.py's keys, 1-based labels); tests and benchmarks write
their records with it too."""

from __future__ import annotations

import os
import struct
from typing import Dict, Sequence, Tuple


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
        # The name's bytes as on disk: a name that is not UTF-8 (it reaches
        # Python with surrogate escapes) is stored, not a crash.
        "image/class/text": text, "image/filename": os.fsencode(filename),
        "image/height": int(height), "image/width": int(width),
        "image/colorspace": "RGB", "image/channels": 3,
    }
    if boxes:
        for i, side in enumerate(("xmin", "ymin", "xmax", "ymax")):
            features[f"image/object/bbox/{side}"] = [float(b[i])
                                                     for b in boxes]
        features["image/object/bbox/label"] = [int(label)] * len(boxes)
    return example_bytes(features)
