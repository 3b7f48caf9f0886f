"""trainer.stops, around every run (the API's and the CLI's): a SIGTERM or
a Ctrl-C outside the training steps unwinds, running the `finally`s on
its way (the feeds' close), and is raised as RunStopped (a RuntimeError)
or RunInterrupted (a KeyboardInterrupt) naming the stage it came in; the
SIGTERM handler before the run (a notebook kernel's) comes back."""

import os
import signal

import pytest

from official_bench import trainer
from official_bench.measure.stages import Stage
from official_bench.runtime import stop_signals

pytestmark = pytest.mark.usefixtures("python_sigint")


def _kernels_handler(signum, frame):
    """A notebook kernel's own SIGTERM handler."""


@pytest.fixture
def notebook(monkeypatch):
    """A process that is not the trainer's own, with a handler of its own
    for SIGTERM (put back after the test)."""
    monkeypatch.setattr(stop_signals, "_OWNS_PROCESS", False)
    old = signal.signal(signal.SIGTERM, _kernels_handler)
    yield
    signal.signal(signal.SIGTERM, old)


def _spin():
    """Bytecodes for a pending handler to run between."""
    for _ in range(1000):
        pass


def _stopped_in(stage, signum):
    closed = []
    with pytest.raises(stop_signals.STOPS) as e:
        with trainer.stops():
            with Stage(stage, heartbeat=0, log=lambda line: None):
                try:
                    os.kill(os.getpid(), signum)
                    _spin()
                    closed.append("not reached")
                finally:
                    closed.append("closed")  # the feeds' close()
    assert closed == ["closed"]
    return e.value


def test_a_sigterm_is_run_stopped_naming_the_stage(notebook):
    e = _stopped_in("building the model", signal.SIGTERM)
    assert type(e) is stop_signals.RunStopped and isinstance(e, RuntimeError)
    assert str(e) == ("official_bench: stopped by SIGTERM while building the "
                      "model; no result written")
    assert (e.step, e.stage, e.outside_the_steps, e.exit_status) == (
        None, "building the model", True, 143)
    assert isinstance(e.__cause__, stop_signals.Terminated)
    # the kernel's handler is back: a later SIGTERM is the kernel's again
    assert signal.getsignal(signal.SIGTERM) is _kernels_handler


def test_a_ctrl_c_is_run_interrupted_naming_the_stage(notebook):
    wait = "waiting for the first batch of train_dataset (2 input worker(s))"
    e = _stopped_in(wait, signal.SIGINT)
    assert type(e) is stop_signals.RunInterrupted
    assert isinstance(e, KeyboardInterrupt) and not isinstance(e, Exception)
    assert str(e) == (f"official_bench: stopped by SIGINT while {wait}; no "
                      "result written")
    assert (e.step, e.exit_status) == (None, 130)
    assert signal.getsignal(signal.SIGTERM) is _kernels_handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_stage_it_says_outside_the_training_steps(notebook):
    with pytest.raises(stop_signals.RunStopped) as e:
        with trainer.stops():
            os.kill(os.getpid(), signal.SIGTERM)
            _spin()
    assert str(e.value) == ("official_bench: stopped by SIGTERM outside the "
                            "training steps")


def test_a_stop_during_the_steps_passes_as_it_is(notebook):
    inside = stop_signals.run_stopped(signal.SIGINT, 3, 10)
    with pytest.raises(stop_signals.RunInterrupted) as e:
        with trainer.stops():
            raise inside
    assert e.value is inside
    assert str(e.value) == ("official_bench: stopped by SIGINT at step 3 of "
                            "10; no result written")
    assert not e.value.outside_the_steps


def test_a_run_without_a_stop_puts_the_handler_back(notebook):
    with trainer.stops():
        assert signal.getsignal(signal.SIGTERM) is not _kernels_handler
    assert signal.getsignal(signal.SIGTERM) is _kernels_handler


def test_the_trainers_own_process_keeps_its_handler_after_a_stop(
        notebook, monkeypatch):
    """The CLI's process is ending after a stop: `timeout`'s copy of the
    signal must not kill it before its last line."""
    monkeypatch.setattr(stop_signals, "_OWNS_PROCESS", True)
    _stopped_in("loading JAX", signal.SIGTERM)
    assert isinstance(signal.getsignal(signal.SIGTERM),
                      stop_signals._RaiseOnSigterm)
