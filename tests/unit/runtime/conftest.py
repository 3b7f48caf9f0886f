"""Fixtures of the runtime tests."""

import signal

import pytest


@pytest.fixture
def python_sigint():
    """The test starts with Python's own SIGINT handler, whatever an
    earlier test in this pytest worker left, and that is put back after
    (the SIGINT tests: stop_signals' handlers act only on Python's)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)
