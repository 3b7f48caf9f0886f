"""All-reduce bandwidth as nccl-tests defines it, and its log line.

algbw = bytes / time; busbw = algbw x 2(n-1)/n for an all-reduce over n
ranks (the bytes each link carries in a ring, so numbers for different n
compare with the hardware's link speed). TensorFlow-free: the benchmark
writes the line, the extractor can read it back.
"""

from __future__ import annotations

import dataclasses
import re

LINE_FORMAT = ("AllReduce: {nbytes} bytes {dtype} over {ranks} replicas: "
               "{ms:.3f} ms, algbw {algbw:.3f} GB/s, busbw {busbw:.3f} GB/s")
LINE_RE = re.compile(
    r"AllReduce: (?P<nbytes>\d+) bytes (?P<dtype>\w+) over (?P<ranks>\d+) "
    r"replicas: (?P<ms>[\d.]+) ms, algbw (?P<algbw>[\d.]+) GB/s, busbw "
    r"(?P<busbw>[\d.]+) GB/s")


@dataclasses.dataclass
class AllReduceResult:
    """One all-reduce measurement: buffer size, dtype, ranks and seconds
    per all-reduce; its algorithm and bus bandwidths and its log line."""
    nbytes: int
    dtype: str
    ranks: int
    seconds: float  # per all-reduce

    @property
    def algbw(self) -> float:
        """GB/s (1e9 bytes) of the buffer."""
        return self.nbytes / self.seconds / 1e9

    @property
    def busbw(self) -> float:
        return self.algbw * bus_factor(self.ranks)

    def line(self) -> str:
        return LINE_FORMAT.format(nbytes=self.nbytes, dtype=self.dtype,
                                  ranks=self.ranks, ms=self.seconds * 1e3,
                                  algbw=self.algbw, busbw=self.busbw)

    def as_dict(self):
        return dict(dataclasses.asdict(self), algbw_gbps=self.algbw,
                    busbw_gbps=self.busbw)


def bus_factor(ranks: int) -> float:
    """2(n-1)/n; 0 for one rank (nothing crosses a link)."""
    return 2.0 * (ranks - 1) / ranks if ranks > 0 else 0.0


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """'64K' / '16M' / '1G' / '4096' -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)B?\s*", text.upper())
    if not m:
        raise ValueError(f"size {text!r} is not a number of bytes with an "
                         "optional K, M or G suffix")
    size = int(m.group(1)) * _UNITS[m.group(2)]
    if size <= 0:
        raise ValueError(f"size {text!r} is 0 bytes; the smallest is one "
                         "element (2 or 4 bytes)")
    return size
