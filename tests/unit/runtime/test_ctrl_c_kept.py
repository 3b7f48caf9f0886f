"""stop_signals.ctrl_c_kept: a Ctrl-C that a library swallows (TensorFlow's
import does, now and then) still stops the run at the block's end."""

import os
import signal

import pytest

from official_bench.runtime.stop_signals import ctrl_c_kept


def _swallowing_import():
    """What a bare `except:` around an optional import does."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
    except:  # noqa: E722 - the library's habit this guards against
        pass


def test_a_swallowed_ctrl_c_is_raised_at_the_blocks_end():
    reached_end = []
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_kept():
            _swallowing_import()
            reached_end.append(True)
    assert reached_end == [True]  # the block ran on, then it was raised
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_that_is_not_swallowed_raises_once_where_it_lands():
    after = []
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_kept():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
            after.append(True)
    assert after == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_signal_no_interrupt():
    with ctrl_c_kept():
        value = 1
    assert value == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_sigint_stays_ignored():
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with ctrl_c_kept():
            os.kill(os.getpid(), signal.SIGINT)
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)
