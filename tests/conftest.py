"""Shared test set-up (helpers live in tests/support/, importable as
`support` through setup.cfg's pytest `pythonpath`).

TensorFlow fixes its device list at the first op, so the session splits the
CPU into two logical devices before anything else runs: mirrored tests then
have two replicas, and every other test uses the first device. XLA's CPU
compiler skips LLVM's optimisations in every process (support.helpers.
FAST_COMPILE). Test files run longest first (support/file_order.py).
Temporary files of the tests' processes go under pytest's own temporary
folder, which pytest prunes, instead of the system's /tmp.
"""

import logging
import os
import tempfile

import pytest

from support import file_order, helpers


def pytest_configure(config):
    if _runs_tests(config):
        from official_bench.runtime import devices
        devices.ensure_cpu_devices(2)
    # Every process the tests start compiles XLA programs quickly.
    os.environ["XLA_FLAGS"] = helpers.xla_flags()
    # xdist hands out files in collection order, which the hook below sets
    # (its own reordering, by test count, would undo it).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _runs_tests(config):
    """False in xdist's controller, which only hands tests out (and need
    not spend seconds importing TensorFlow)."""
    return hasattr(config, "workerinput") or \
        not getattr(config.option, "numprocesses", None)


def pytest_collection_modifyitems(config, items):
    file_order.longest_first(items, file_order.load())


@pytest.fixture(scope="session", autouse=True)
def session_tmpdir(tmp_path_factory):
    """TMPDIR for this process and every process the tests start.

    TensorFlow's autograph writes a source file per converted function
    (removed at a normal exit only) and TFDS an empty folder per builder;
    the tests kill many processes, so /tmp kept ~35 of them per run. Here
    they land under pytest's numbered base folder (the last 3 are kept).
    """
    folder = str(tmp_path_factory.mktemp("tmp", numbered=False))
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = folder
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    yield folder
    if saved is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved
    tempfile.tempdir = None


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def absl_messages():
    """What the trainer logs through absl, whatever earlier tests did to
    logging (absl's handler, verbosity, propagation)."""
    logger = logging.getLogger("absl")
    handler, level = _Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.messages
    logger.removeHandler(handler)
    logger.setLevel(level)
