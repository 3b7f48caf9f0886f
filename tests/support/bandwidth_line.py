"""Reading the all-reduce bandwidth line back, as a tool reading the logs
would (the package writes it: allreduce/bandwidth.py)."""

from typing import Optional

from official_bench.allreduce.bandwidth import LINE_RE, AllReduceResult


def parse_line(line: str) -> Optional[AllReduceResult]:
    """The result a bandwidth line reports; None for any other line."""
    m = LINE_RE.search(line)
    if not m:
        return None
    return AllReduceResult(int(m["nbytes"]), m["dtype"], int(m["ranks"]),
                           float(m["ms"]) / 1e3)
