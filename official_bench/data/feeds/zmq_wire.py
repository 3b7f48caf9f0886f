"""The ZMQ batch wire format, shared by producer and trainer (no TensorFlow).

One batch is one ZMQ multipart message of three frames:

1. header: the 4 bytes b"OBB1" then UTF-8 JSON
   {"producer": "<name>", "seq": <int>,
    "images": {"dtype": "<numpy dtype name>", "shape": [b, h, w, c]},
    "labels": {"dtype": "int32" | "int64", "shape": [b]}}
2. the images' raw bytes, C order, little-endian
3. the labels' raw bytes, C order, little-endian

No pickle: a frame is only ever read as bytes of the declared dtype and
shape, so a peer cannot make the trainer run code. `producer` names the
sender in every error; `seq` counts its batches from 0.
"""

from __future__ import annotations

import json
from typing import List, Tuple

import numpy as np

from official_bench.data.feeds.batch_spec import BadBatch, numpy_dtype

MAGIC = b"OBB1"
WIRE_DTYPES = ("float32", "float16", "bfloat16", "uint8", "int32", "int64")


def encode(images: np.ndarray, labels: np.ndarray, producer: str,
           seq: int) -> List[bytes]:
    """The three frames of one batch."""
    header = {"producer": producer, "seq": seq,
              "images": {"dtype": images.dtype.name,
                         "shape": list(images.shape)},
              "labels": {"dtype": labels.dtype.name,
                         "shape": list(labels.shape)}}
    return [MAGIC + json.dumps(header).encode(),
            _little_endian(images).tobytes(),
            _little_endian(labels).tobytes()]


def _little_endian(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.byteswap().view(a.dtype.newbyteorder("<")) \
        if a.dtype.byteorder == ">" else a


def _array(field: dict, frame: bytes, name: str, origin: str) -> np.ndarray:
    if not isinstance(field, dict):
        raise BadBatch(f"{origin}: header field {name!r} must be an object "
                       "with dtype and shape")
    dtype_name, shape = field.get("dtype"), field.get("shape")
    if dtype_name not in WIRE_DTYPES:
        raise BadBatch(f"{origin}: {name} dtype {dtype_name!r} is not one of "
                       f"{', '.join(WIRE_DTYPES)}")
    if not isinstance(shape, list) or not all(
            isinstance(d, int) and d >= 0 for d in shape):
        raise BadBatch(f"{origin}: {name} shape {shape!r} is not a list of "
                       "non-negative integers")
    dtype = numpy_dtype(dtype_name).newbyteorder("<")
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(frame) != expected:
        raise BadBatch(f"{origin}: {name} frame has {len(frame)} bytes, the "
                       f"header's {dtype_name} {shape} needs {expected}")
    return np.frombuffer(frame, dtype).reshape(shape)


def decode(frames: List[bytes], endpoint: str
           ) -> Tuple[np.ndarray, np.ndarray, str, int]:
    """(images, labels, producer, seq) or BadBatch naming what is wrong.

    `endpoint` names where the message came in, for messages from a peer
    whose header cannot be read.
    """
    origin = f"message on {endpoint}"
    if len(frames) != 3:
        raise BadBatch(f"{origin}: {len(frames)} frames, expected 3 "
                       "(header, images, labels); is the sender an "
                       "official_bench producer?")
    header = frames[0]
    if not header.startswith(MAGIC):
        raise BadBatch(f"{origin}: header does not start with {MAGIC!r}; "
                       "not an official_bench batch")
    try:
        meta = json.loads(header[len(MAGIC):].decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise BadBatch(f"{origin}: header is not JSON: {e}") from None
    if not isinstance(meta, dict):
        raise BadBatch(f"{origin}: header must be a JSON object")
    producer = str(meta.get("producer", "?"))
    seq = meta.get("seq", -1)
    origin = f"producer {producer!r} batch {seq} on {endpoint}"
    images = _array(meta.get("images"), frames[1], "images", origin)
    labels = _array(meta.get("labels"), frames[2], "labels", origin)
    return images, labels, producer, seq


def bind_warning(endpoint: str, what: str) -> str:
    """The warning each end logs for an endpoint it binds (listens on):
    ZMQ here has no CURVE authentication, so anyone who can reach the
    port can `what` (send batches to a trainer, take a producer's)."""
    return (f"listening on {endpoint} with no authentication (ZMQ "
            f"without CURVE): anyone who can reach it can {what}; bind to a "
            "trusted network's address only (docs/data.md, 'builder: zmq')")
