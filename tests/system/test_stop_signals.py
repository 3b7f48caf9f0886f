"""SIGTERM / SIGINT stop a run at the next step, for one process and for
two multi_worker_mirrored workers on 127.0.0.1 (whose TensorFlow would
otherwise catch SIGTERM and train on); a Ctrl-C before the steps is one
line naming the stage it came in."""

import os
import re
import signal
import time

import pytest

from official_bench.contracts import exit_status
from official_bench.runtime import stop_signals
from support.helpers import (
    TINY_OVERRIDE,
    LiveProcess,
    kill_all,
    loopback_hosts,
    trainer_cmd,
)


def test_signal_is_seen_and_grace_is_enforced():
    exits = []
    with stop_signals.StopOnSignal(grace_seconds=0.5, log=lambda m: None,
                                   hard_exit=exits.append) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not exits and time.monotonic() < deadline:
            time.sleep(0.05)
    assert stop.signum == signal.SIGTERM
    assert exits == [143]  # grace over: 128 + SIGTERM
    # Handlers are back: SIGTERM is no longer ours.
    assert signal.getsignal(signal.SIGTERM) is not stop._on_signal


def test_a_repeat_within_a_second_is_the_same_stop_a_later_one_not():
    """GNU timeout sends SIGTERM to the command, then to its group: two
    copies of one stop. A second signal later (or another one) is a
    user's 'exit now'."""
    exits, lines = [], []
    with stop_signals.StopOnSignal(grace_seconds=30, log=lines.append,
                                   hard_exit=exits.append):
        os.kill(os.getpid(), signal.SIGTERM)
        _until(lambda: lines)
        os.kill(os.getpid(), signal.SIGTERM)  # the group's copy
        time.sleep(0.3)
        assert exits == [] and len(lines) == 1, lines
        time.sleep(stop_signals.SAME_STOP_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)
        _until(lambda: exits)
    assert exits == [143], lines
    assert "second SIGTERM; exiting now" in lines[-1]


def _until(condition, seconds=5):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_stopped_error_names_signal_and_step():
    e = stop_signals.RunStopped(signal.SIGINT, 40, 300)
    assert str(e) == ("official_bench: stopped by SIGINT at step 40 of 300; "
                      "no result written")
    assert e.exit_status == 130


LONG = (f"{TINY_OVERRIDE},train.steps=100000,train.time_history.log_steps=10,"
        "runtime.stop_grace_seconds=20")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_one_device_run_stops_with_128_plus_signal(tmp_path, sig):
    w = LiveProcess(trainer_cmd(
        tmp_path, f"{LONG},runtime.distribution_strategy=one_device"))
    w.wait_for_step(20)
    w.proc.send_signal(sig)
    sent = time.monotonic()
    rc = w.finish(60)
    assert time.monotonic() - sent < 30
    assert rc == exit_status.by_signal(sig), w.output[-3000:]
    assert rc == (exit_status.TERMINATED if sig == signal.SIGTERM
                  else exit_status.INTERRUPTED)
    name = signal.Signals(sig).name
    assert re.search(rf"error: official_bench: stopped by {name} at step "
                     r"\d+ of 100000; no result written", w.output)
    assert not (tmp_path / "result.json").exists()


def test_ctrl_c_before_the_steps_is_one_line_naming_the_stage(tmp_path):
    w = LiveProcess(trainer_cmd(tmp_path, TINY_OVERRIDE))
    _until(lambda: "loading TensorFlow ..." in w.output or
           w.proc.poll() is not None, seconds=120)
    w.proc.send_signal(signal.SIGINT)  # TensorFlow's import takes seconds
    assert w.finish(60) == exit_status.INTERRUPTED, w.output[-3000:]
    assert w.last_line == ("error: official_bench: stopped by SIGINT while "
                           "loading TensorFlow; no result written"), \
        w.output[-3000:]
    assert "Traceback" not in w.output
    assert not (tmp_path / "result.json").exists()


@pytest.mark.slow
def test_sigterm_stops_both_multi_worker_workers(tmp_path):
    _, hosts = loopback_hosts(2)
    common = (f"{LONG},runtime.distribution_strategy=multi_worker_mirrored,"
              "runtime.all_reduce_alg=ring,"
              f"runtime.peer_timeout_seconds=120,runtime.worker_hosts='{hosts}'")
    workers = [LiveProcess(trainer_cmd(tmp_path,
                                       f"{common},runtime.task_index={i}"))
               for i in (0, 1)]
    try:
        workers[0].wait_for_step(40)
        workers[1].proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        codes = [w.finish(60) for w in (workers[1], workers[0])]
        took = time.monotonic() - sent
    finally:
        kill_all(workers)
    assert took < 30, took
    assert codes[0] == 143, workers[1].output[-3000:]
    assert codes[1] not in (0, None), workers[0].output[-3000:]
    assert "stopped by SIGTERM at step" in workers[1].output
    # TensorFlow's own handler did not get to swallow it.
    assert not (tmp_path / "result.json").exists()
