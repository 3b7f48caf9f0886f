"""parameter_server for real: chief, two workers and a ps on 127.0.0.1."""

import json
import subprocess
import sys
import time

import pytest

from official_bench.contracts import exit_status
from support.helpers import REPO, TINY_OVERRIDE, cli_env, free_ports

pytestmark = pytest.mark.multiworker


def _start(role, index, model_dir, hosts, log, extra="train.steps=8"):
    cmd = [sys.executable, "-m", "official_bench.classifier_trainer",
           "--mode=train", f"--model_dir={model_dir}",
           f"--params_override={TINY_OVERRIDE},{hosts},"
           f"runtime.task_type={role},runtime.task_index={index},{extra}"]
    return subprocess.Popen(cmd, cwd=REPO, env=cli_env(), stdout=log,
                            stderr=subprocess.STDOUT, text=True)


def _hosts(chief, workers, ps, timeout):
    return (f"runtime.distribution_strategy=parameter_server,"
            f"runtime.chief_host=127.0.0.1:{chief},"
            f"runtime.worker_hosts='"
            + ",".join(f"127.0.0.1:{p}" for p in workers) + "',"
            f"runtime.ps_hosts=127.0.0.1:{ps},"
            f"runtime.peer_timeout_seconds={timeout}")


def _wait(proc, timeout):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"process did not finish in {timeout} s")


@pytest.mark.slow
def test_chief_two_workers_one_ps_train(tmp_path):
    c, w0, w1, ps = free_ports(4)
    hosts = _hosts(c, [w0, w1], ps, 120)
    logs = {n: open(tmp_path / f"{n}.log", "w+")
            for n in ("ps0", "worker0", "worker1", "chief")}
    procs = {"ps0": _start("ps", 0, tmp_path / "ps", hosts, logs["ps0"]),
             "worker0": _start("worker", 0, tmp_path / "w0", hosts,
                               logs["worker0"]),
             "worker1": _start("worker", 1, tmp_path / "w1", hosts,
                               logs["worker1"]),
             "chief": _start("chief", 0, tmp_path / "chief", hosts,
                             logs["chief"])}
    codes = {n: _wait(p, 300) for n, p in reversed(list(procs.items()))}
    text = {}
    for n, f in logs.items():
        f.seek(0)
        text[n] = f.read()
    assert codes == {n: 0 for n in procs}, {n: t[-2000:]
                                            for n, t in text.items()}
    th = [l for l in text["chief"].splitlines() if "TimeHistory: " in l]
    assert len(th) == 4  # 8 steps, log_steps 2
    result = json.load(open(tmp_path / "chief" / "result.json"))
    assert result["environment"]["strategy"] == "parameter_server"
    assert result["stats"]["total_steps"] == 8
    # The servers stopped by themselves once the chief was gone, knowing
    # that it had finished the run.
    for n in ("ps0", "worker0", "worker1"):
        assert "finished the run and is gone;" in text[n]


@pytest.mark.slow
def test_ps_killed_mid_run_no_task_exits_0(tmp_path):
    """kill -9 of the ps: the chief names the ps, and the worker, whose
    chief then goes away without reporting a finished run, exits non-zero
    saying so (it used to exit 0)."""
    c, w0, ps = free_ports(3)
    hosts = _hosts(c, [w0], ps, 120)
    logs = {n: open(tmp_path / f"{n}.log", "w+")
            for n in ("ps0", "worker0", "chief")}
    override = ("train.steps=100000,train.time_history.log_steps=10,"
                "train.time_history.progress_seconds=1")
    procs = {"ps0": _start("ps", 0, tmp_path / "ps", hosts, logs["ps0"],
                           override),
             "worker0": _start("worker", 0, tmp_path / "w0", hosts,
                               logs["worker0"], override),
             "chief": _start("chief", 0, tmp_path / "chief", hosts,
                             logs["chief"], override)}
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            logs["chief"].seek(0)
            if "between steps 10 and 20" in logs["chief"].read():
                break
            time.sleep(0.5)
        procs["ps0"].kill()
        codes = {n: _wait(procs[n], 120) for n in ("chief", "worker0")}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    text = {}
    for n, f in logs.items():
        f.seek(0)
        text[n] = f.read()
    assert codes["chief"] != 0, text["chief"][-2000:]
    assert f"ps 0 at 127.0.0.1:{ps}" in text["chief"], text["chief"][-2000:]
    assert codes["worker0"] == exit_status.PEER_LOST, text["worker0"][-2000:]
    last = [l for l in text["worker0"].splitlines() if l.strip()][-1]
    assert last.startswith(f"error: official_bench: chief 0 at 127.0.0.1:{c} "
                           "went away before it reported a finished run; "
                           f"also gone: ps 0 at 127.0.0.1:{ps}"), last


def test_ps_that_never_comes_up_is_named(tmp_path):
    c, w0, ps = free_ports(3)
    hosts = _hosts(c, [w0], ps, 1)
    log = open(tmp_path / "chief.log", "w+")
    start = time.monotonic()
    chief = _start("chief", 0, tmp_path, hosts, log)
    code = _wait(chief, 120)
    log.seek(0)
    out = log.read()
    assert code == 3, out[-2000:]
    assert "official_bench: timeout: chief 0 waited 1 s" in out
    assert f"ps 0 at 127.0.0.1:{ps}" in out
    assert f"worker 0 at 127.0.0.1:{w0}" in out
    assert time.monotonic() - start < 90
