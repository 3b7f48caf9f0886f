"""stop_signals.sigterm_raises: outside the training steps a SIGTERM
raises Terminated in the main thread (as a Ctrl-C raises
KeyboardInterrupt), so the run unwinds through its feeds' close() to the
entry point's one line; `timeout`'s copy to the process group is the same
stop; while the backend loads (ctrl_c_deferred) it is held until the load
returns."""

import os
import signal

import pytest

from official_bench.runtime import stop_signals
from official_bench.runtime.stop_signals import (
    Terminated,
    ctrl_c_deferred,
    sigterm_raises,
)

pytestmark = pytest.mark.usefixtures("python_sigint")


@pytest.fixture(autouse=True)
def sigterm_put_back():
    """SIGTERM's handler as it was before the test (sigterm_raises keeps
    its own once it raised)."""
    old = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, old)


def _spin():
    """Bytecodes for a pending handler to run between."""
    for _ in range(1000):
        pass


def test_a_sigterm_raises_terminated_and_its_copy_is_the_same_stop(
        monkeypatch):
    monkeypatch.setattr(stop_signals, "_OWNS_PROCESS", True)  # the CLI's
    closed = []
    with pytest.raises(Terminated) as e:
        with sigterm_raises():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                _spin()
                closed.append("not reached")
            finally:
                # the feeds close on the way out; the group's copy (GNU
                # timeout) comes meanwhile and must not break that
                os.kill(os.getpid(), signal.SIGTERM)
                _spin()
                closed.append("closed")
    assert closed == ["closed"]
    assert e.value.exit_status == 143
    assert not isinstance(e.value, Exception)  # no `except Exception` takes it
    # The process is ending: a late copy must not kill it before its line.
    assert isinstance(signal.getsignal(signal.SIGTERM),
                      stop_signals._RaiseOnSigterm)


def test_in_a_notebook_the_old_handler_is_back_after_a_stop(monkeypatch):
    """A kernel goes on after the stop: its own SIGTERM handler comes
    back."""
    monkeypatch.setattr(stop_signals, "_OWNS_PROCESS", False)
    def kernels(signum, frame):
        pass

    signal.signal(signal.SIGTERM, kernels)
    with pytest.raises(Terminated):
        with sigterm_raises():
            os.kill(os.getpid(), signal.SIGTERM)
            _spin()
    assert signal.getsignal(signal.SIGTERM) is kernels


def test_without_a_signal_the_old_handler_is_back():
    before = signal.getsignal(signal.SIGTERM)
    with sigterm_raises():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_steps_handler_takes_it_over_and_gives_it_back():
    with sigterm_raises():
        ours = signal.getsignal(signal.SIGTERM)
        with stop_signals.StopOnSignal(grace_seconds=30, log=lambda m: None,
                                       hard_exit=lambda status: None) as s:
            os.kill(os.getpid(), signal.SIGTERM)
            _spin()
        assert s.signum == signal.SIGTERM  # a stop at a step boundary
        assert signal.getsignal(signal.SIGTERM) is ours


def test_held_while_the_backend_loads_then_raised(capfd):
    loaded = []
    with pytest.raises(Terminated):
        with sigterm_raises():
            with ctrl_c_deferred("loading TensorFlow"):
                try:  # what a bare `except:` around an import does
                    os.kill(os.getpid(), signal.SIGTERM)
                    _spin()
                except:  # noqa: E722
                    pass
                loaded.append(True)
    assert loaded == [True]
    assert capfd.readouterr().err == (
        "official_bench: SIGTERM: stopping once loading TensorFlow is done "
        "(a second SIGTERM stops at once)\n")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
