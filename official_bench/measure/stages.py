"""A run's start-up stages said as they happen, with seconds.

`Stage` logs the stage's start line, a heartbeat line every
HEARTBEAT_SECONDS while it lasts (from a thread, so an import or a trace
that holds the main thread is still covered) and its done line with the
seconds it took; the lines' format is contracts/stage_line.py's.
TensorFlow-free, so both backends and the entry point use it.

    with Stage("building the model"):
        model = build(...)

    first = Stage("compiling the first step").start()
    ... first.end()   # from the first step's callback; idempotent

A stage that ends in an exception logs no done line: the error's own line
says what happened. `stage_of(error)` names the innermost stage an error
was raised in (the entry point's line for a Ctrl-C outside the training
steps).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, List, Optional

from absl import logging

from official_bench.contracts import stage_line

HEARTBEAT_SECONDS = 5.0
_RUNNING: List["Stage"] = []  # started, not ended, innermost last


_RAISED_IN = "official_bench_stage"  # set on an error a `with` stage ends


def stage_of(error: BaseException) -> Optional[str]:
    """The innermost stage `error` was raised in: the `with` stage it
    ended, else the stage still under way (started, never ended), or
    None."""
    return getattr(error, _RAISED_IN, None) or \
        (_RUNNING[-1].what if _RUNNING else None)


class Stage:
    """One stage: start line, heartbeats while it runs, done line."""

    def __init__(self, what: str, heartbeat: float = HEARTBEAT_SECONDS,
                 log: Callable[[str], None] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.what = what
        self.heartbeat = heartbeat
        self._log = log or (lambda text: logging.info("%s", text))
        self._clock = clock
        self._started: Optional[float] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self.seconds: Optional[float] = None  # set once ended

    def start(self) -> "Stage":
        """Log the start line and start the heartbeat."""
        self._started = self._clock()
        _RUNNING.append(self)
        with self._lock:  # no heartbeat line before the start line
            if self.heartbeat > 0:
                # Started before the start line: a Ctrl-C prompted by the
                # line must not land inside Thread.start (its lock then
                # fails with "release unlocked lock", not KeyboardInterrupt).
                self._thread = threading.Thread(
                    target=self._beat, name=f"stage: {self.what}",
                    daemon=True)
                self._thread.start()
            self._say(stage_line.START)
        return self

    def end(self, ok: bool = True) -> None:
        """Stop the heartbeat; log the done line when ``ok``. Only the
        first call counts."""
        with self._lock:
            if self._started is None or self.seconds is not None:
                return
            self.seconds = self._clock() - self._started
            self._stop.set()
            if self in _RUNNING:
                _RUNNING.remove(self)
        if self._thread is not None and \
                self._thread is not threading.current_thread():
            self._thread.join()
        if ok:
            self._say(stage_line.DONE, self.seconds)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            with self._lock:
                if self.seconds is not None:
                    return
                self._say(stage_line.RUNNING, self._clock() - self._started)

    def _say(self, state: str, seconds: Optional[float] = None) -> None:
        self._log(stage_line.format_line(
            stage_line.StageLine(self.what, state, seconds)))

    def __enter__(self) -> "Stage":
        return self.start()

    def __exit__(self, kind, value, traceback) -> None:
        if value is not None and not hasattr(value, _RAISED_IN):
            try:
                setattr(value, _RAISED_IN, self.what)
            except AttributeError:  # an exception type without a __dict__
                pass
        self.end(ok=kind is None)
