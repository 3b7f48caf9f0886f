"""A JAX worker whose coordinator (worker 0) is killed: JAX's coordination
client aborts it at once (SIGABRT) and nothing of ours runs, so the
launcher names the coordinator from the worker's log (launch/outcome.py).
Two real processes joined through jax.distributed on 127.0.0.1 (~3 s),
idle after the join; worker 0 is SIGKILLed."""

import importlib.util
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from official_bench.contracts import exit_status as es
from official_bench.launch import outcome
from support.helpers import REPO, free_ports

# find_spec, not importorskip: JAX imported in this pytest worker would make
# every later fork in it warn (the children import it themselves).
pytestmark = [pytest.mark.multiworker,
              pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                 reason="JAX is not installed")]

CHILD = r"""
import sys, time
from absl import logging
logging.set_verbosity(logging.INFO)
import jax
from official_bench.jax_backend import devices
from official_bench.runtime.cluster import Cluster
devices._join(jax, Cluster(workers=sys.argv[1].split(","),
                           task_index=int(sys.argv[2])), 30, "cpu")
print("joined", flush=True)
time.sleep(120)
"""


def _joined(logs):
    return all("joined" in log.read_text() for log in logs)


def test_a_worker_whose_coordinator_is_killed_names_it(tmp_path):
    workers = ",".join(f"127.0.0.1:{p}" for p in free_ports(2))
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    logs = [tmp_path / f"worker{i}.log" for i in range(2)]
    procs = []
    try:
        for i, log in enumerate(logs):
            with open(log, "w") as f:
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", CHILD, workers, str(i)], cwd=REPO,
                    env=env, stdout=f, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60
        while not _joined(logs) and time.monotonic() < deadline and \
                all(p.poll() is None for p in procs):
            time.sleep(0.05)
        assert _joined(logs), logs[1].read_text()[-2000:]
        procs[0].kill()
        rc = procs[1].wait(30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    assert rc == -signal.SIGABRT, logs[1].read_text()[-2000:]
    coordinator = workers.split(",")[0]
    line = ("worker 1 stopped: the JAX coordinator (worker 0, "
            f"{coordinator}) went away or stopped answering; see worker "
            "0's log")
    assert outcome.last_error_line(str(logs[1])) == line
    judged = outcome.judge(
        SimpleNamespace(log_path=str(logs[1])),
        SimpleNamespace(rc=es.by_signal(-rc), stopped_because="",
                        elapsed=3.0), SimpleNamespace(run_timeout=600.0))
    assert (judged.rc, judged.reason) == (
        es.PEER_LOST, line + " (JAX aborted it: SIGABRT, exit 134)")
