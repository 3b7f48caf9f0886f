"""The JAX trainer awaits its first training batch in a stage of its own,
named for what it waits on, before it compiles the train step: a stalled
input (a dead mount) reads as a wait for the input workers, not as a slow
XLA compile, and a Ctrl-C there names that stage (no JAX run: a feed that
blocks until an Event, and a stand-in step)."""

import functools
import signal
import threading
from types import SimpleNamespace

import pytest

from official_bench.contracts import stage_line as sl
from official_bench.measure import stages

pytest.importorskip("jax")
from official_bench.jax_backend import trainer  # noqa: E402

WAIT = "waiting for the first batch of train_dataset (3 input worker(s))"
RECORDS = SimpleNamespace(builder="records")


class _BlockedFeed:
    """A records feed whose first batch comes once `release` is set."""

    def __init__(self):
        self.info = {"builder": "records", "num_workers": 3}
        self.waiting, self.release = threading.Event(), threading.Event()

    def next(self):
        """Polls, as the real feed does: a lock wait is not woken by a
        signal here, so a Ctrl-C is taken between the short waits."""
        self.waiting.set()
        for _ in range(1200):  # a minute, then a stop that never came
            if self.release.wait(0.05):
                return "images", "labels"
        raise AssertionError("the first batch was never released")


class _Step:
    """steps.train.lower(...).compile(), recording what it compiled for."""

    def __init__(self, log):
        self.log = log

    def lower(self, state, images, labels):
        self.log.append(f"lowered for {images}, {labels}")
        return self

    def compile(self):
        return "compiled"


@pytest.fixture
def lines(monkeypatch):
    """The trainer's stage lines, with a heartbeat every 0.05 s."""
    said = []
    monkeypatch.setattr(trainer, "Stage", functools.partial(
        stages.Stage, heartbeat=0.05, log=said.append))
    return said


def _read(lines):
    return [sl.parse_line(x) if x.startswith(sl.STAGE_MARK) else x
            for x in lines]


def _until(condition, seconds=30):
    finished = threading.Event()
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        finished.wait(0.02)
    raise AssertionError("condition not met")


def test_the_wait_is_its_own_stage_before_the_compile(lines):
    feed = _BlockedFeed()
    steps = SimpleNamespace(train=_Step(lines), state={})
    run = SimpleNamespace(platform="cpu")
    plan = SimpleNamespace(num_replicas=1)
    done = threading.Thread(target=lambda: trainer._compile(
        steps, trainer._first_batch(feed, RECORDS), run, plan))
    done.start()
    try:
        _until(lambda: any(x.state == sl.RUNNING for x in _read(lines)
                           if isinstance(x, sl.StageLine)))
        # while it waits, the heartbeat names the wait, never the compile
        assert {x.what for x in _read(lines)} == {WAIT}, lines
    finally:
        feed.release.set()
        done.join(30)
    read = _read(lines)
    assert read[0] == sl.StageLine(WAIT, sl.START)
    ends = [i for i, x in enumerate(read) if x == "lowered for images, labels"]
    waited = [i for i, x in enumerate(read) if isinstance(x, sl.StageLine)
              and x.what == WAIT and x.state == sl.DONE]
    assert waited and ends and waited[0] < ends[0], lines
    compiling = "compiling the train step (XLA, 1 replica(s) on cpu)"
    assert sl.StageLine(compiling, sl.START) in read[waited[0]:ends[0]]
    assert steps.train == "compiled"


def test_a_ctrl_c_while_it_waits_names_the_wait(lines):
    # Python's handler, SIGINT not blocked in this thread, and the signal
    # sent to this thread: a process-wide kill may land on another thread,
    # which cannot wake a lock wait here (this test then hung a pytest
    # worker).
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    feed, main = _BlockedFeed(), threading.main_thread().ident
    sender = threading.Thread(target=lambda: (
        feed.waiting.wait(30), signal.pthread_kill(main, signal.SIGINT)))
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            trainer._first_batch(feed, RECORDS)
    finally:
        feed.release.set()
        sender.join(30)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, old)
    assert stages.stage_of(e.value) == WAIT
    from official_bench import classifier_trainer
    assert classifier_trainer._outside_the_steps("SIGINT", e.value) == (
        f"official_bench: stopped by SIGINT while {WAIT}; no result written")


def test_synthetic_batches_have_no_wait_stage(lines):
    feed = SimpleNamespace(next=lambda: ("images", "labels"))
    assert trainer._first_batch(feed, SimpleNamespace(
        builder="synthetic")) == ("images", "labels")
    assert lines == []


def test_a_python_source_is_named():
    feed = SimpleNamespace(info={"builder": "python"})
    ds = SimpleNamespace(builder="python", python_source="mysrc:batches")
    assert trainer._first_batch_wait(feed, ds) == (
        "waiting for the first batch of train_dataset (python_source "
        "mysrc:batches)")
