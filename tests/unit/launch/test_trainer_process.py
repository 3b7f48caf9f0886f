"""launch/trainer_process.py: a stop the launcher starts (a peer node's
failure, a sibling worker's, Ctrl-C) reaches the trainer once (sent to the
trainer, not to its `timeout`'s group), so the trainer's own stop
(runtime/stop_signals.py) ends it after the current step. The stand-in
trainer is a real process with that stop under the launcher's real
`timeout -k`; no TensorFlow."""

import os
import sys
import time

from official_bench.contracts import exit_status as es
from official_bench.launch import one_run
from official_bench.launch.outcome import Status
from support import launch_stand_in

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
# Steps until a stop is requested, then ends as the trainer does (143).
GRACEFUL = f"""
import sys, time
sys.path.insert(0, {REPO!r})
from official_bench.runtime.stop_signals import StopOnSignal
with StopOnSignal(grace_seconds=30) as stop:
    print("stand-in trainer stepping", flush=True)
    step = 0
    while not stop.requested:
        step += 1
        stop.step = step
        time.sleep(0.1)
    time.sleep(0.5)  # the current step ends
    print(f"stand-in trainer stopped after step {{step}}", flush=True)
sys.exit(143)
"""


def test_a_peer_failure_stops_the_trainer_after_its_step(plan_of, tmp_path,
                                                          monkeypatch):
    script = tmp_path / "graceful.py"
    script.write_text(GRACEFUL)
    monkeypatch.setitem(launch_stand_in.STAND_IN, "graceful",
                        f"exec {sys.executable} {script}\n")
    plan = plan_of("graceful", kill_after=20)
    run = plan.runs[0]

    def peer_failure():  # once the trainer steps
        log = open(run.log_path, encoding="utf-8").read()
        if "stepping" in log:
            return "stopped because node 1 failed this run (exit 1)"
        return None
    began = time.monotonic()
    o = one_run.OneRun(plan, run, peer_failure).execute()
    log = open(run.log_path, encoding="utf-8").read()
    assert "SIGTERM received at step" in log
    assert "second SIGTERM" not in log  # killpg's copy, then timeout's
    assert "stand-in trainer stopped after step" in log
    assert (o.status, o.rc) == (Status.ABORTED, es.TERMINATED)
    assert time.monotonic() - began < 15  # not the SIGKILL after the grace
