"""stop_signals.ctrl_c_deferred: a Ctrl-C while the backend loads is held
until the load returns (raised inside TensorFlow's import it was swallowed
by a bare except there, printed "Exception ignored" tracebacks or crashed
the import); a second one stops at once."""

import os
import signal

import pytest

from official_bench.runtime.stop_signals import ctrl_c_deferred

# Python's own SIGINT handler, whatever an earlier test left (conftest.py).
pytestmark = pytest.mark.usefixtures("python_sigint")


def _swallowing_import():
    """What a bare `except:` around an optional import does."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
    except:  # noqa: E722 - the library's habit this guards against
        pass


def test_a_ctrl_c_is_raised_when_the_block_ends(capfd):
    reached_end = []
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_deferred("loading TensorFlow"):
            _swallowing_import()
            reached_end.append(True)
    assert reached_end == [True]  # the block ran on, then it was raised
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert capfd.readouterr().err == (
        "official_bench: SIGINT: stopping once loading TensorFlow is done "
        "(Ctrl-C again to stop at once)\n")


def test_a_second_ctrl_c_raises_at_once():
    after = []
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_deferred("x"):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
            after.append(1)  # the first is held
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
            after.append(2)
    assert after == [1]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_signal_no_interrupt():
    with ctrl_c_deferred("x"):
        value = 1
    assert value == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_sigint_stays_ignored():
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with ctrl_c_deferred("x"):
            os.kill(os.getpid(), signal.SIGINT)
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)
