"""SIGTERM and SIGINT stop a run at the next step boundary, in bounded time.

Under multi_worker_mirrored TensorFlow's preemption notifier (and JAX's, in
jax.distributed) installs its own SIGTERM handler and trains on to exit 0, so
Slurm, Kubernetes and `timeout` could not stop a worker. Ours are put back
once the workers joined (`reclaim_handlers`), installed for the steps, and:

- a wake-up fd lets a watcher thread see the signal at once, even while the
  main thread is inside a TensorFlow call;
- a Keras callback (runtime/stop_callback.py) ends `fit` after the running
  step (or loop); the JAX loop asks `requested` between steps itself;
- `grace_seconds` after the signal, or at a second signal (not a repeat of
  the first within SAME_STOP_SECONDS: `timeout` sends two copies), the
  watcher ends the process with 128+signal where it is the trainer's own
  (the CLI calls `own_process`), else (a notebook's kernel) raises
  KeyboardInterrupt in the main thread.

The trainer raises RunInterrupted (SIGINT; a KeyboardInterrupt) or
RunStopped (SIGTERM; a RuntimeError): `run_stopped`. Outside the steps,
under `sigterm_raises` (trainer.train_and_evaluate: the API and the CLI),
a SIGTERM is `Terminated`, a Ctrl-C a KeyboardInterrupt; the feeds close
on the way out and the trainer raises either as `stopped_outside`,
naming the stage. `ctrl_c_deferred` holds both while the backend loads
(raised inside TensorFlow's import one was swallowed or crashed it).
"""

from __future__ import annotations

import _thread
import contextlib
import os
import select
import signal
import sys
import threading
import time
from typing import Callable, Iterator, List, Optional

from official_bench.contracts import exit_status

SIGNALS = (signal.SIGTERM, signal.SIGINT)
# A repeat of the first signal this soon is the same stop: GNU `timeout`
# sends its SIGTERM to the command and then to the process group, and the
# command gets both when the first was handled before the second came.
SAME_STOP_SECONDS = 1.0


class _Stop:
    """What a stop by a signal says: signum, step, `exit_status` (128 +
    signal) and the message. A stop outside the training steps
    (`stopped_outside`) has step None, `outside_the_steps` True and the
    `stage` it came in (None where no stage was under way)."""

    def __init__(self, signum: int, step: Optional[int],
                 total: Optional[int], *, stage: Optional[str] = None,
                 outside_the_steps: bool = False):
        self.signum, self.step, self.stage = signum, step, stage
        self.outside_the_steps = outside_the_steps
        name = signal.Signals(signum).name
        if outside_the_steps:
            super().__init__(outside_message(name, stage))
            return
        where = f"at step {step} of {total}" if step is not None else \
            "before training started"
        super().__init__(
            f"official_bench: stopped by {name} {where}; no result written")

    @property
    def exit_status(self) -> int:
        return exit_status.by_signal(self.signum)


class RunStopped(_Stop, RuntimeError):
    """The run was stopped by SIGTERM (a scheduler, `timeout`)."""


class RunInterrupted(_Stop, KeyboardInterrupt):
    """The run was stopped by SIGINT (Ctrl-C, a notebook's stop button):
    a KeyboardInterrupt, so a notebook's `except Exception` around a run
    does not take it for a failed run and go on to the next."""


STOPS = (RunStopped, RunInterrupted)


class Terminated(BaseException):
    """SIGTERM outside the training steps, raised in the main thread where
    `sigterm_raises` is active. A BaseException, like KeyboardInterrupt:
    no `except Exception` on its way takes it for a failure to report."""

    signum = signal.SIGTERM

    @property
    def exit_status(self) -> int:
        return exit_status.by_signal(self.signum)


def run_stopped(signum: int, step: Optional[int], total: int) -> _Stop:
    """The exception for a run `signum` stopped at `step` of `total`."""
    kind = RunInterrupted if signum == signal.SIGINT else RunStopped
    return kind(signum, step, total)


def outside_message(signal_name: str, stage: Optional[str]) -> str:
    """What a SIGINT or SIGTERM outside the training steps says, naming
    the stage it came in (the CLI's last line, after "error: ")."""
    if stage is None:
        return (f"official_bench: stopped by {signal_name} outside the "
                "training steps")
    return (f"official_bench: stopped by {signal_name} while {stage}; no "
            "result written")


def stopped_outside(signum: int, stage: Optional[str]) -> _Stop:
    """The exception for a run `signum` stopped outside the training steps
    while `stage` (measure/stages.stage_of names it): RunInterrupted or
    RunStopped with step None."""
    kind = RunInterrupted if signum == signal.SIGINT else RunStopped
    return kind(signum, None, None, stage=stage, outside_the_steps=True)


# Whether this process is the trainer's own (its CLI: entry points call
# own_process). Where it is not (a notebook's kernel), a second signal or
# a stop past its grace interrupts the main thread instead of ending the
# process with everything the notebook holds.
_OWNS_PROCESS = False


def own_process() -> None:
    """Called by an entry point: the process is the trainer's own, and a
    second signal may end it at once."""
    global _OWNS_PROCESS
    _OWNS_PROCESS = True


class _RaiseOnSigterm:
    """sigterm_raises' handler: the first SIGTERM raises Terminated (or,
    while `held` names what is under way, is kept for ctrl_c_deferred to
    raise); a copy within SAME_STOP_SECONDS is the same stop; a later one
    ends the trainer's own process at once (elsewhere raises again)."""

    def __init__(self):
        self.first: Optional[float] = None
        self.held: Optional[str] = None
        self.pending = False

    def __call__(self, signum, frame):
        now = time.monotonic()
        if self.first is not None:
            if now < self.first + SAME_STOP_SECONDS:
                return  # `timeout`'s copy to the process group
            _say("official_bench: second SIGTERM; exiting now")
            if _OWNS_PROCESS:
                os._exit(exit_status.by_signal(signal.SIGTERM))
            raise Terminated
        self.first = now
        if self.held is not None:
            self.pending = True
            _say(f"official_bench: SIGTERM: stopping once {self.held} is "
                 "done (a second SIGTERM stops at once)")
            return
        raise Terminated


def _say(line: str) -> None:
    # os.write: print() from a handler can meet the main thread's own
    # write to the same stream.
    os.write(sys.stderr.fileno(), (line + "\n").encode())


def reclaim_handlers() -> None:
    """Puts Python's SIGTERM and SIGINT handlers back at the OS level. The
    preemption notifier that jax.distributed (XLA) and a multi_worker_
    mirrored strategy (TensorFlow) install as they join replaces the
    handler in C, where signal.getsignal does not show it, and catches
    SIGTERM: the run would train on to exit 0. runtime/watchdog.py calls
    this once the join is over. Main thread only; a handler Python did not
    install (getsignal None) is left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in SIGNALS:
        handler = signal.getsignal(sig)
        if handler is not None:
            signal.signal(sig, handler)


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While active, SIGTERM raises Terminated in the main thread, as
    Python's default SIGINT raises KeyboardInterrupt: a stop outside the
    training steps (StopOnSignal takes SIGTERM over during them and gives
    it back) unwinds, closing the input feeds, to the entry point. The
    handler before is put back at the end, except in the trainer's own
    process (`own_process`) once one was raised: that process is ending,
    and a copy of the signal must not kill it before its last line. A
    notebook's kernel gets its own handler back. Does nothing outside the
    main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = _RaiseOnSigterm()
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        if handler.first is None or not _OWNS_PROCESS:
            signal.signal(signal.SIGTERM,
                          old if old is not None else signal.SIG_DFL)


@contextlib.contextmanager
def ctrl_c_deferred(what: str) -> Iterator[None]:
    """A first SIGINT inside the block is held (one line on stderr says so)
    and raised as KeyboardInterrupt when the block ends; a second one is
    raised at once. Where SIGINT is not Python's default handler (ignored,
    as in a background job, or someone else's) it is left alone. A
    SIGTERM under `sigterm_raises` is held the same way and raised as
    Terminated. Does nothing outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    term = signal.getsignal(signal.SIGTERM)
    term = term if isinstance(term, _RaiseOnSigterm) and \
        term.first is None else None
    ours = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    seen: List[int] = []

    def on_sigint(signum, frame):
        seen.append(signum)
        if len(seen) > 1:
            raise KeyboardInterrupt
        _say(f"official_bench: SIGINT: stopping once {what} is done "
             "(Ctrl-C again to stop at once)")

    if ours:
        signal.signal(signal.SIGINT, on_sigint)
    if term is not None:
        term.held = what
    try:
        yield
    finally:
        if ours:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if term is not None:
            term.held = None
    if term is not None and term.pending:
        raise Terminated
    if seen:
        raise KeyboardInterrupt


class StopOnSignal:
    """Context manager: while active, SIGTERM/SIGINT request a stop.

    Does nothing outside the main thread (signal handlers can only be set
    there), e.g. a run started from a worker thread of a notebook server.
    """

    def __init__(self, grace_seconds: float = 60.0,
                 log: Callable[[str], None] = None,
                 hard_exit: Optional[Callable[[int], None]] = None):
        self.grace_seconds = grace_seconds
        self.signum: Optional[int] = None
        self.step: Optional[int] = None  # last step seen by the callback
        self._log = log or (lambda m: print(m, file=sys.stderr, flush=True))
        self._hard_exit = hard_exit or self._exit_or_interrupt
        self._interrupt = False  # the main thread's handler raises
        self._old = {}
        self._old_wakeup = -1
        self._fds = None
        self._thread = None
        self._active = False

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self
        self._fds = os.pipe()
        os.set_blocking(self._fds[1], False)
        for sig in SIGNALS:
            self._old[sig] = signal.signal(sig, self._on_signal)
        self._old_wakeup = signal.set_wakeup_fd(self._fds[1],
                                                warn_on_full_buffer=False)
        self._active = True
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name="official_bench-stop")
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if not self._active:
            return False
        self._active = False
        signal.set_wakeup_fd(self._old_wakeup)
        for sig, old in self._old.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        os.close(self._fds[1])  # ends the watcher's read
        self._thread.join(timeout=5)
        os.close(self._fds[0])
        return False

    def _on_signal(self, signum, frame):
        """Main-thread handler: records (the watcher already knows); raises
        KeyboardInterrupt once the watcher asked for it
        (_exit_or_interrupt)."""
        if self._interrupt:
            self._interrupt = False
            raise KeyboardInterrupt
        self._request(signum)

    def _exit_or_interrupt(self, status: int) -> None:
        """The hard stop: the process's end with `status` where it is the
        trainer's own; else (a notebook's kernel) a KeyboardInterrupt in
        the main thread, through _on_signal."""
        if _OWNS_PROCESS:
            # The last line, as every stop's: a step that never ends (a
            # first batch that never comes) has no other.
            name = signal.Signals(self.signum).name
            where = f"at step {self.step}" if self.step else \
                "before the first step ended"
            _say(f"error: official_bench: stopped by {name} {where} (it "
                 "did not stop in time); no result written")
            os._exit(status)
        self._interrupt = True
        _thread.interrupt_main(signal.SIGINT)

    def _request(self, signum: int) -> bool:
        if self.signum is not None:
            return False
        self.signum = signum
        return True

    def _watch(self) -> None:
        """Sees the signal through the wake-up fd; enforces the grace."""
        read_fd = self._fds[0]
        deadline, first = None, 0.0
        while True:
            timeout = None if deadline is None else \
                max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([read_fd], [], [], timeout)
            if not ready:  # grace over
                name = signal.Signals(self.signum).name
                self._log(f"official_bench: stopped by {name}: the run did "
                          f"not end within {self.grace_seconds:g} s "
                          "(runtime.stop_grace_seconds) after the signal, "
                          f"at step {self.step}; exiting now")
                self._hard_exit(exit_status.by_signal(self.signum))
                return
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return  # __exit__ closed the pipe
            for signum in data:
                if signum in SIGNALS and deadline is not None:
                    if signum == self.signum and time.monotonic() < \
                            first + SAME_STOP_SECONDS:
                        continue  # one sender's copies, not a second stop
                    self._log(f"official_bench: second "
                              f"{signal.Signals(signum).name}; exiting now "
                              f"at step {self.step}")
                    self._hard_exit(exit_status.by_signal(self.signum))
                    return
                if signum in SIGNALS:
                    self._request(signum)
                    name = signal.Signals(signum).name
                    self._log(f"official_bench: {name} received at step "
                              f"{self.step}; stopping after the current "
                              f"step (at most {self.grace_seconds:g} s)")
                    first = time.monotonic()
                    deadline = first + self.grace_seconds
