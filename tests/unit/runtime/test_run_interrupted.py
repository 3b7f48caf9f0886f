"""A run stopped by SIGINT is a KeyboardInterrupt (a notebook's `except
Exception` does not take it for a failed run), and where the process is
not the trainer's own (a notebook's kernel) a second signal interrupts
the main thread instead of ending the process."""

import os
import signal
import time

import pytest

from official_bench.runtime import stop_signals

# Python's own SIGINT handler, whatever an earlier test left (conftest.py).
pytestmark = pytest.mark.usefixtures("python_sigint")


def test_a_sigint_stop_is_a_keyboard_interrupt_a_sigterm_stop_an_error():
    e = stop_signals.run_stopped(signal.SIGINT, 40, 300)
    assert isinstance(e, KeyboardInterrupt) and not isinstance(e, Exception)
    assert isinstance(e, stop_signals.STOPS)
    assert (e.exit_status, e.step) == (130, 40)
    assert str(e) == ("official_bench: stopped by SIGINT at step 40 of 300; "
                      "no result written")
    t = stop_signals.run_stopped(signal.SIGTERM, None, 300)
    assert isinstance(t, RuntimeError) and t.exit_status == 143
    assert str(t) == ("official_bench: stopped by SIGTERM before training "
                      "started; no result written")


def test_a_second_sigint_in_a_notebook_interrupts_the_main_thread(
        monkeypatch):
    monkeypatch.setattr(stop_signals, "_OWNS_PROCESS", False)
    said = []
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with stop_signals.StopOnSignal(grace_seconds=60,
                                       log=said.append) as stop:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(stop_signals.SAME_STOP_SECONDS + 0.3)
            assert stop.requested  # the first one: stop after the step
            os.kill(os.getpid(), signal.SIGINT)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                time.sleep(0.02)
            reached.append(True)
    assert reached == []  # interrupted, and this process goes on
    assert said[-1].startswith("official_bench: second SIGINT; ")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
