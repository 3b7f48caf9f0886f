"""Every record file's framing checked whole, however far training reads.

A truncated shard is otherwise found only when the reader reaches the cut
(record_reader.py), and its report then waits in the shuffle buffer: a
short run may end first and say nothing. `FileCheck` walks each file's
TFRecord frames (length, the length's masked CRC-32C, data, data CRC) in a
thread beside training, reading 12 bytes per record, not the data: ~1 s
of CPU for ImageNet's 1.28 M records. The data CRCs are not read; a
record whose bytes are damaged but whose frame is whole is still found
only when it is decoded (or by `official-bench-build-records --verify`).
TensorFlow-free: files that are not local are opened with the `opener`
the caller passes (tf.io.gfile.GFile). `frame` writes a frame (the
builder's shards).
"""

from __future__ import annotations

import dataclasses
import os
import struct
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from official_bench.data.records.checksum import masked_crc32c
from official_bench.data.records.record_problems import (
    GONE,
    GONE_SIZE,
    TRUNCATED,
    message_line,
)

HEADER = 12  # uint64 length + uint32 masked CRC-32C of the length
FRAME = 16  # header + uint32 masked CRC-32C of the data


def frame(data: bytes) -> bytes:
    """One TFRecord frame: what tf.io.TFRecordWriter writes for `data`."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked_crc32c(length)) + data +
            struct.pack("<I", masked_crc32c(data)))


@dataclasses.dataclass(frozen=True)
class Problem:
    """The first record of a file that cannot be framed, and why."""
    filename: str
    index: int  # records before it that were whole
    detail: str

    def line(self) -> str:
        """The bad-record line the input pipelines print for it."""
        return message_line(self.filename, self.index, self.detail)


def _truncated(index: int, offset: int, size: int) -> str:
    # The reader's words for the same file (record_reader.read_file).
    return TRUNCATED.format(index, offset, size)


def walk(read_at: Callable[[int, int], bytes], size: int,
         filename: str) -> Optional[Problem]:
    """The file's first framing problem, or None when its frames end
    exactly at `size`. `read_at(offset, n)` returns up to n bytes."""
    return _frames(read_at, size, filename)[1]


def count_records(path: str, opener: Optional[Callable] = None) -> int:
    """The whole records at the start of a file (all of them when its
    framing is sound): 16 bytes read per record. A local file is read with
    os.pread, others with what `opener(path, "rb")` opens (seek + read)."""
    return frames_of(path, opener)[0]


def frames_of(path: str, opener: Optional[Callable] = None
              ) -> Tuple[int, Optional[Problem]]:
    """(the whole records at the start of a file, its first framing
    problem or None): count_records and walk in one pass."""
    return _walk_path(path, None, opener)


def _walk_path(path: str, size: Optional[int], opener: Optional[Callable]
               ) -> Tuple[int, Optional[Problem]]:
    """_frames over a local file (os.pread) or one `opener(path, "rb")`
    opens (seek + read), up to `size` bytes (None: its size now)."""
    if opener is not None:
        with opener(path, "rb") as f:
            def read_at(offset, n):
                f.seek(offset)
                return f.read(n)
            return _frames(read_at, f.size() if size is None else size, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        return _frames(lambda off, n: os.pread(fd, n, off),
                       os.fstat(fd).st_size if size is None else size, path)
    finally:
        os.close(fd)


def _frames(read_at: Callable[[int, int], bytes], size: int,
            filename: str) -> Tuple[int, Optional[Problem]]:
    """(whole records before the first problem, that problem or None)."""
    index = offset = 0
    while offset < size:
        header = read_at(offset, HEADER) if size - offset >= HEADER else b""
        if len(header) < HEADER:
            return index, Problem(filename, index,
                                  _truncated(index, offset, size))
        length, crc = struct.unpack("<QI", header)
        if masked_crc32c(header[:8]) != crc:
            return index, Problem(
                filename, index, _truncated(index, offset, size) +
                f"; the length of record {index} fails its checksum")
        if offset + FRAME + length > size:
            return index, Problem(filename, index,
                                  _truncated(index, offset, size))
        offset += FRAME + length
        index += 1
    return index, None


def check_file(path: str, size: int,
               opener: Optional[Callable] = None) -> Optional[Problem]:
    """walk() over a local file (os.pread) or one `opener(path, "rb")`
    opens (seek + read)."""
    return _walk_path(path, size, opener)[1]


class FileCheck:
    """Checks files in a daemon thread, started at once; `problems` fills
    in as files are checked, `counts` with each file's whole records. A
    file that cannot be opened is a problem too (the reader reports it
    the same way). `key` (train_dataset) names the files' config in the
    callers' lines."""

    def __init__(self, files: Sequence[str], sizes: Sequence[int],
                 opener: Optional[Callable] = None, key: str = ""):
        self.files = list(files)
        self.sizes = list(sizes)
        self.key = key
        self._opener = opener
        self.problems: List[Problem] = []
        self.counts: Dict[str, int] = {}
        self.checked = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="official_bench-file-check")
        self._thread.start()

    def _run(self) -> None:
        try:
            for path, size in zip(self.files, self.sizes):
                local = self._opener is None or "://" not in path
                try:
                    if size == GONE_SIZE:
                        problem = Problem(path, 0, GONE)
                    else:
                        self.counts[path], problem = _walk_path(
                            path, size, None if local else self._opener)
                except OSError as e:
                    problem = Problem(path, 0, "the file cannot be read "
                                      f"({e.strerror or e})")
                if problem is not None:
                    self.problems.append(problem)
                self.checked += 1
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, progress: Optional[Callable[[str], None]] = None,
             every: float = 5.0) -> List[Problem]:
        """Blocks until every file is checked; says how far it got every
        `every` seconds through `progress`. Returns the problems."""
        start = time.monotonic()
        while not self._done.wait(every):
            if progress is not None:
                progress(f"checking record files: {self.checked} of "
                         f"{len(self.files)} checked, "
                         f"{time.monotonic() - start:.0f} s")
        return list(self.problems)
