"""multi_worker_mirrored for real: two CLI processes on 127.0.0.1 ports."""

import json
import math
import re
import socket
import time

import pytest

from official_bench.contracts import exit_status
from support.helpers import (
    TINY_OVERRIDE,
    LiveProcess,
    free_ports,
    kill_all,
    loopback_hosts,
    thread_count,
    trainer_cmd,
)
from support.multiworker import (
    TWO_NODE,
    finish,
    start_worker,
)

pytestmark = pytest.mark.multiworker


def test_missing_worker_is_a_clear_timeout(tmp_path):
    p0, p1 = free_ports(2)
    start = time.monotonic()
    w0 = start_worker(tmp_path, (
        f"{TINY_OVERRIDE},runtime.all_reduce_alg=ring,"
        f"runtime.worker_hosts='127.0.0.1:{p0},127.0.0.1:{p1}',"
        "runtime.task_index=0,runtime.peer_timeout_seconds=1"))
    rc, out = finish(w0, 120)
    # TensorFlow ignores SIGTERM there: the watchdog has to SIGKILL it.
    assert exit_status.by_signal(-rc) == exit_status.KILLED, out[-3000:]
    # The last line, an error line as every failure's is.
    last = out.strip().splitlines()[-1]
    assert last.startswith("error: official_bench: timeout: worker 0 "
                           "waited 1 s"), out[-3000:]
    assert f"worker 1 at 127.0.0.1:{p1}" in last
    assert time.monotonic() - start < 100
    assert not (tmp_path / "result.json").exists()


def test_own_port_in_use_is_reported(tmp_path):
    p0, p1 = free_ports(2)
    holder = socket.socket()
    holder.bind(("0.0.0.0", p0))
    holder.listen(1)
    try:
        w0 = start_worker(tmp_path, (
            f"{TINY_OVERRIDE},runtime.all_reduce_alg=ring,"
            f"runtime.worker_hosts='127.0.0.1:{p0},127.0.0.1:{p1}',"
            "runtime.task_index=0,runtime.peer_timeout_seconds=8"))
        rc, out = finish(w0, 120)
    finally:
        holder.close()
    assert rc == exit_status.CLUSTER, out[-3000:]
    assert f"cannot listen on port {p0} for worker 0" in out


def test_task_index_out_of_range(tmp_path):
    p0, p1 = free_ports(2)
    w = start_worker(tmp_path, (
        f"{TINY_OVERRIDE},runtime.worker_hosts='127.0.0.1:{p0},"
        f"127.0.0.1:{p1}',runtime.task_index=2"))
    rc, out = finish(w, 120)
    assert rc == 2
    assert "runtime.task_index 2 is not a valid index" in out


def _sampling_workers(tmp_path, override, steps, which=(0, 1),
                      tf_config=False):
    """Two loopback workers; for those in `which`, their thread count at
    the TimeHistory lines of `steps`. With `tf_config`, worker 1 is
    configured by TF_CONFIG (which must win over the YAML's worker_hosts
    and task_index), worker 0 by worker_hosts + task_index."""
    ports, hosts = loopback_hosts(2)
    common = (f"{TINY_OVERRIDE},runtime.all_reduce_alg=ring,"
              f"runtime.peer_timeout_seconds=120,{override}")
    workers, threads = [], []
    for i in (0, 1):
        seen = {}
        threads.append(seen)

        def sample(step, seen=seen, workers=workers, i=i):
            if i in which and step in steps:
                try:
                    seen[step] = thread_count(workers[i].proc.pid)
                except (OSError, AssertionError):
                    pass
        own, env = (f"runtime.worker_hosts='{hosts}',"
                    f"runtime.task_index={i}"), None
        if tf_config and i == 1:
            own, env = "", {"TF_CONFIG": json.dumps({
                "cluster": {"worker": hosts.split(",")},
                "task": {"type": "worker", "index": 1}})}
        workers.append(LiveProcess(trainer_cmd(
            tmp_path, f"{common},{own}".rstrip(","),
            f"--config_file={TWO_NODE}", "--num_gpus=0"), on_step=sample,
            env=env))
    return ports, workers, threads


@pytest.mark.slow
def test_two_workers_train_together_identically_without_leaking_threads(
        tmp_path):
    """Two workers, one configured by TF_CONFIG, train 100 steps together
    on batches resident on each replica's device
    (train_dataset.synthetic_location=device) with the same weights and
    the global step losses; with the default
    config no per-collective timeout threads pile up (with the old 300 s
    default, runtime.collective_timeout_seconds=300, each worker grows ~14
    threads per step: 1,120 between the two samples, measured, against
    < 30 allowed; with the default its count is flat from step 10 on)."""
    _, workers, threads = _sampling_workers(
        tmp_path, "runtime.seed=7,train.steps=100,"
        "train.time_history.log_steps=20,"
        "train_dataset.synthetic_location=device", (20, 100), tf_config=True)
    try:
        codes = [w.finish(600) for w in workers]
    finally:
        kill_all(workers)
    outs = [w.output for w in workers]
    for w, code, seen in zip(workers, codes, threads):
        assert code == 0, w.output[-3000:]
        assert set(seen) == {20, 100}, w.output[-2000:]
        assert seen[100] - seen[20] < 30, (seen, w.output[-2000:])
    chief = json.loads((tmp_path / "result.json").read_text())
    other = json.loads((tmp_path / "result_worker1.json").read_text())
    assert chief["environment"]["num_workers"] == 2
    assert chief["config"]["train_dataset"]["synthetic_location"] == "device"
    assert chief["history"]["loss"] == pytest.approx(other["history"]["loss"])
    assert "Using TF_CONFIG from the environment" in outs[1]
    assert chief["stats"]["num_replicas"] == 2
    assert chief["stats"]["global_batch_size"] == 8  # 4 per replica x 2
    assert chief["model"]["trainable_weights_sha256"] == \
        other["model"]["trainable_weights_sha256"]
    assert chief["task"]["is_chief"] and not other["task"]["is_chief"]
    # The strategy's own devices are recorded: one CPU replica per worker.
    assert chief["environment"]["devices"] == [
        "/job:worker/replica:0/task:0/device:CPU:0"]
    assert other["environment"]["devices"] == [
        "/job:worker/replica:0/task:1/device:CPU:0"]
    assert chief["environment"]["replicas_per_worker"] == 1
    # The step logs are the global values, not their sum over the 2
    # workers (tf_keras' "auto" reduction doubled them): with 10 classes
    # the loss is near ln 10 = 2.3 or below, a doubled one near 4.6.
    for out in outs:
        losses = [float(v) for v in re.findall(
            r"official_bench: step \d+/\d+ .*, loss ([0-9.]+)", out)]
        assert losses and all(
            0 < v < 1.5 * math.log(10) for v in losses), losses
        assert ("TimeHistory: " in out
                and "examples/second between steps" in out)


def test_collective_timeout_warns_about_its_threads():
    from official_bench import config as C
    from official_bench.runtime import distribute
    rt = C.load_config(params_override=(
        "runtime.distribution_strategy=multi_worker_mirrored,"
        "runtime.collective_timeout_seconds=5")).runtime
    from unittest import mock
    with mock.patch.object(distribute.logging, "warning") as warning:
        options = distribute._communication_options(rt)
    seen = [call.args[0] % call.args[1:] for call in warning.call_args_list]
    assert options.timeout_seconds == 5
    assert any("thread" in m and "collective" in m for m in seen), seen
    default = C.load_config().runtime
    assert default.collective_timeout_seconds is None
    assert distribute._communication_options(default).timeout_seconds is None


@pytest.mark.slow
@pytest.mark.parametrize("killed", [1, 0])
def test_peer_killed_mid_run_ends_the_survivor(tmp_path, killed):
    """Without a collective timeout a lost peer still ends the other worker,
    non-zero (4) and in bounded time, with one line of ours naming the lost
    worker, its address and the step."""
    ports, workers, _ = _sampling_workers(
        tmp_path, "train.steps=100000,train.time_history.log_steps=20", ())
    survivor = workers[1 - killed]
    try:
        survivor.wait_for_step(40)
        workers[killed].proc.kill()
        killed_at = time.monotonic()
        code = survivor.finish(120)
        ended = time.monotonic() - killed_at
    finally:
        kill_all(workers)
    assert code == exit_status.PEER_LOST, survivor.output[-3000:]
    assert ended < 60, ended
    assert re.fullmatch(
        rf"error: official_bench: lost worker {killed} at "
        rf"127\.0\.0\.1:{ports[killed]} at step \d+ of 100000 \(worker "
        rf"{1 - killed} saw .*\); see that task's log .*",
        survivor.last_line), survivor.last_line
    assert not (tmp_path / "result.json").exists()
