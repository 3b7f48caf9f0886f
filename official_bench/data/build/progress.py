"""The builder's progress: a bar on a terminal, a line every few seconds
otherwise."""

from __future__ import annotations

import sys
import time


class Progress:
    """A progress bar on a terminal, a line every few seconds otherwise."""

    def __init__(self, label: str, total: int, stream=None,
                 every_seconds: float = 10.0):
        self.label, self.total = label, total
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every = 0.2 if self.tty else every_seconds
        self.start = time.monotonic()
        self.last = 0.0

    def update(self, done: int, force: bool = False) -> None:
        """A line for `done` images; `force`: the split's last one. The
        workers count the last images before their shards are reported
        written, so a line at the total waits for that last one (it was
        printed twice)."""
        now = time.monotonic()
        if not force and (now - self.last < self.every or
                          done >= self.total):
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        pct = 100.0 * done / self.total if self.total else 100.0
        eta = (self.total - done) / rate if rate > 0 else 0.0
        width = 30
        filled = int(width * pct / 100)
        line = (f"[{self.label}] [{'#' * filled}{'.' * (width - filled)}] "
                f"{done}/{self.total} images ({pct:5.1f}%) {rate:7.1f} img/s "
                f"ETA {time.strftime('%H:%M:%S', time.gmtime(eta))}")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if force else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

