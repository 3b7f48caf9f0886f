"""Record files read without TensorFlow: each frame's length and its
masked CRC-32C, the data and its CRC, both checked as TensorFlow's reader
checks them (checksum.py computes them in C).

A file read whole yields its records. Where TensorFlow's reader would stop
(a cut frame, a failed checksum, a file that cannot be opened), the file
ends with a framing.Problem in the TensorFlow pipeline's words
(record_reader.read_file): "corrupt or truncated TFRecord data: only the
first N record(s) (X of Y bytes) could be read", or "the file cannot be
read ..." when not even the first record could. `interleave` reads several
files at once, a record from each in turn, as the pipeline's interleave
does. TensorFlow-free.
"""

from __future__ import annotations

import struct
from typing import Callable, Iterator, List, Sequence, Tuple, Union

from official_bench.data.records.checksum import masked_crc32c
from official_bench.data.records.framing import FRAME, HEADER, Problem
from official_bench.data.records.record_problems import (
    GONE,
    GONE_SIZE,
    TRUNCATED,
    UNREADABLE,
)

READ_BUFFER = 1 << 20  # bytes buffered per open file
INTERLEAVE_CYCLE = 10  # files read at once (record_reader.INTERLEAVE_CYCLE)

Record = Tuple[str, int, bytes]  # filename, index in the file, bytes
Item = Union[Record, Problem]


def _problem(path: str, index: int, offset: int, size: int) -> Problem:
    if size == GONE_SIZE:
        return Problem(path, index, GONE)
    detail = UNREADABLE.format(size) if offset == 0 else \
        TRUNCATED.format(index, offset, size)
    return Problem(path, index, detail)


def _frames(f, size: int) -> Iterator[bytes]:
    """The records of an open file; stops at the first frame that is cut
    or fails a checksum (the caller compares the bytes read with
    `size`)."""
    offset = 0
    while offset < size:
        header = f.read(HEADER)
        if len(header) < HEADER:
            return
        length, crc = struct.unpack("<QI", header)
        if masked_crc32c(header[:8]) != crc or \
                offset + FRAME + length > size:
            return
        data = f.read(length)
        footer = f.read(4)
        if len(footer) < 4 or \
                masked_crc32c(data) != struct.unpack("<I", footer)[0]:
            return
        offset += FRAME + length
        yield data


def read_file(path: str, size: int) -> Iterator[Item]:
    """(path, index, bytes) of each whole record of a file of `size`
    bytes, then a Problem when the frames did not end at `size`."""
    index = offset = 0
    try:
        with open(path, "rb", buffering=READ_BUFFER) as f:
            for data in _frames(f, size):
                yield path, index, data
                index += 1
                offset += FRAME + len(data)
    except OSError:
        pass  # reported below, as TensorFlow's reader ends the file
    if offset != size:
        yield _problem(path, index, offset, size)


def interleave(files: Sequence[str], sizes: Sequence[int],
               cycle: int = INTERLEAVE_CYCLE,
               reader: Callable[[str, int], Iterator[Item]] = read_file
               ) -> Iterator[Item]:
    """Records of up to `cycle` files at once, one from each in turn; a
    finished file's place goes to the next file."""
    pending = iter(list(zip(files, sizes)))
    open_now: List[Iterator[Item]] = []
    for path, size in pending:
        open_now.append(reader(path, size))
        if len(open_now) >= cycle:
            break
    while open_now:
        i = 0
        while i < len(open_now):
            item = next(open_now[i], None)
            if item is None:
                nxt = next(pending, None)
                if nxt is None:
                    del open_now[i]
                else:
                    open_now[i] = reader(*nxt)
                continue
            yield item
            i += 1
