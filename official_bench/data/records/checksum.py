"""TFRecord's masked CRC-32C, computed by a compiled CRC-32C.

Both CRCs of every frame are checked where TensorFlow's reader checks them
(data/records/host_reader.py), so the checksum runs over every record's
bytes: google-crc32c (the `jax` and `test` extras; Apache-2.0, wheels for
CPython 3.11 and 3.12 on manylinux x86_64) takes ~7 us per 110 KB record,
the pure-Python table ~10 ms. Without the wheel (or with its own
pure-Python build) the table is used and one warning line says so.
TensorFlow-free.
"""

from __future__ import annotations

import warnings
from typing import Callable, List

MASK_DELTA = 0xA282EAD8


def _table() -> List[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def python_crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) in pure Python: the slow fallback."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _compiled() -> Callable[[bytes], int]:
    """google_crc32c.value when its C extension is there, else the table
    (with one warning)."""
    try:
        import google_crc32c
    except ImportError:
        why = "google-crc32c is not installed"
    else:
        if google_crc32c.implementation == "c":
            return google_crc32c.value
        why = "google-crc32c has no compiled extension here"
    warnings.warn(f"official_bench: {why}; record checksums use pure Python "
                  "(~10 ms per 110 KB record): pip install google-crc32c",
                  RuntimeWarning, stacklevel=2)
    return python_crc32c


crc32c = _compiled()
COMPILED = crc32c is not python_crc32c


def mask(crc: int) -> int:
    """TFRecord's rotation and offset of a CRC-32C."""
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C a TFRecord frame stores for `data`."""
    return mask(crc32c(data))
