"""runtime.backend jax across processes for real, on 127.0.0.1 ports, with
TensorFlow blocked (support.helpers.without_module_env): the run scripts'
two-node sweep (BACKEND=jax, two launchers on one machine) trains two JAX
processes together through jax.distributed, and the extractor reads the
1n1g and 2n1g rows; a worker whose peer never comes ends with the timeout
line. One two-process JAX run in the suite: the sweep's run is also the
check that both processes end with the same loss and weights.
"""

import importlib.util
import json
import os
import re
import signal
import subprocess
import time

import pytest

from official_bench.contracts import exit_status
from support.helpers import (
    REPO,
    LiveProcess,
    free_ports,
    kill_all,
    loopback_hosts,
    trainer_cmd,
    without_module_env,
)
from support.launch_cli import run_together
from support.run_scripts import PY, clean_env, failures

pytestmark = [
    pytest.mark.multiworker,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("jax", "keras")),
        reason="the jax backend needs jax and keras (pip install -e .[jax])"),
]

TIME_HISTORY = re.compile(r"TimeHistory: ([0-9.]+) seconds, ([0-9.]+) "
                          r"examples/second between steps (\d+) and (\d+)")
RUN = "rn50_b4_fp32_1"


def no_tensorflow(tmp_path, env):
    """`env` whose Pythons cannot import tensorflow, as on a GPU image."""
    blocked = without_module_env(tmp_path, "tensorflow")
    return dict(env, PYTHONPATH=blocked["PYTHONPATH"])


def launcher(tmp_path, script, *knob_sets):
    """argv and environment of one run script (BACKEND=jax, batch 4, fp32,
    one run), wrapped in timeout(1) so a stuck launcher ends."""
    knobs = dict(BACKEND="jax")
    for k in knob_sets:
        knobs.update(k)
    return (["timeout", "-k", "10", "240", "bash",
             os.path.join(REPO, script), "4", "fp32", "1"],
            no_tensorflow(tmp_path, clean_env(tmp_path, **knobs)))


def result(record, name):
    """The result file `name` in the model_dir a launcher's copy names."""
    with open(os.path.join(record["config"]["model_dir"], name)) as f:
        return json.load(f)


def extractor_rows(tmp_path, log_root):
    """The extractor, without TensorFlow, on node 0's log tree: its rows."""
    out = subprocess.run(
        [PY, os.path.join(REPO, "extract_tensorflow_logs.py"),
         "--log_dir", str(log_root), "--warmup_batches", "2",
         "--train_batches", "6", "--output_dir", str(tmp_path / "result"),
         "--no_plot"],
        cwd=tmp_path, env=no_tensorflow(tmp_path, dict(os.environ)),
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    result = tmp_path / "result"
    table = json.loads((result / f"{log_root.name}_result.json").read_text())
    return table["rn50"], (result / f"{log_root.name}_result.md").read_text()


@pytest.mark.slow
def test_run_scripts_one_and_two_nodes_and_extractor(tmp_path):
    """BACKEND=jax: run_single_node.sh (1n1g, the interpreter check on),
    then run_two_node.sh from two launchers on 127.0.0.1 (2n1g): both
    processes of the 2-node run end with the same loss and weights, the
    chief records 2 workers and 2 replicas, its TimeHistory lines count
    the global batch (8 = 4 x 2); the extractor prints both rows."""
    start = time.monotonic()
    argv, env = launcher(tmp_path, "run_single_node.sh",
                         dict(PYTHON_CHECK_TIMEOUT="120"))
    (rc,), (out,) = run_together([(argv, env)], tmp_path, 260)
    assert rc == 0, failures(tmp_path, out)
    assert "done: 1 of 1 run(s) ok" in out
    # the JAX run's stage lines reach the launcher's console (issue 40)
    for stage in ("loading JAX ...", "building the model ...",
                  "compiling the train step (XLA, 1 replica(s) on cpu) ..."):
        assert f"[1n1g run 1/1] {stage}\n" in out, out
    single_s = time.monotonic() - start

    w0, w1, barrier = free_ports(3)
    nodes = dict(NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}", BARRIER_PORT=barrier,
                 BARRIER_TIMEOUT=60, PEER_TIMEOUT=120)
    rcs, outs = run_together(
        [launcher(tmp_path, "run_two_node.sh", nodes, dict(TASK_INDEX=i))
         for i in (0, 1)], tmp_path, 260)
    assert rcs == [0, 0], failures(tmp_path, "\n".join(outs))
    for out in outs:
        assert "done: 1 of 1 run(s) ok on every node" in out, out

    root = tmp_path / "logs" / "jax" / "resnet50" / "bz4"
    assert not (tmp_path / "logs" / "tensorflow").exists()
    one = json.loads((root / "1n1g" / f"{RUN}.json").read_text())
    assert one["environment"]["backend"] == "jax"
    assert one["environment"]["num_workers"] == 1
    chief_log = root / "2n1g" / f"{RUN}.log"
    chief = json.loads(chief_log.with_suffix(".json").read_text())
    other = json.loads((root / "2n1g" / "node1" / f"{RUN}.json").read_text())
    env = chief["environment"]
    assert (env["backend"], env["num_workers"], env["num_replicas"]) == \
        ("jax", 2, 2)
    assert sorted(d["process"] for d in env["jax_devices"]) == [0, 1]
    assert chief["stats"]["global_batch_size"] == 8
    assert (chief["task"]["index"], other["task"]["index"]) == (0, 1)
    # The two processes' own result files, in their model_dirs: each
    # trained on its own batches, so the same weights mean the gradients
    # were averaged across the processes.
    mine, theirs = result(chief, "result.json"), \
        result(other, "result_worker1.json")
    assert chief["config"]["model_dir"] != other["config"]["model_dir"]
    assert mine["model"]["trainable_weights_sha256"] == \
        theirs["model"]["trainable_weights_sha256"]
    assert mine["history"]["loss"] == theirs["history"]["loss"]
    # TimeHistory counts the global batch: images = 8 per step.
    for iv in mine["stats"]["intervals"]:
        steps = iv["end_step"] - iv["start_step"]
        assert iv["examples_per_second"] * iv["seconds"] == \
            pytest.approx(8 * steps, rel=1e-3), iv
    lines = TIME_HISTORY.findall(chief_log.read_text())
    assert [(int(a), int(b)) for _, _, a, b in lines] == \
        [(0, 2), (2, 4), (4, 6)]

    rows, markdown = extractor_rows(tmp_path, root)
    assert sorted(rows) == ["1n1g", "2n1g"]
    assert rows["2n1g"]["global_batch_size"] == 8
    assert all(r["num_runs"] == 1 and r["excluded"] == []
               for r in rows.values())
    # The throughput table's rows: node_num | gpu_num | ...
    table = markdown.split("| node_num | gpu_num |", 1)[1].split("\n\n")[0]
    assert [l.split(" | ")[:2] for l in table.splitlines()[2:]] == \
        [["| 1", "1"], ["| 2", "2"]], markdown
    assert re.search(r"Keras 3\.\S+ on JAX ", markdown), markdown
    print(f"jax run scripts: single node {single_s:.0f} s, all "
          f"{time.monotonic() - start:.0f} s")


def test_missing_peer_is_one_timeout_line(tmp_path):
    """Worker 0 alone (its cluster from TF_CONFIG; the run scripts pass
    worker_hosts + task_index): after runtime.peer_timeout_seconds one
    line names the wait (jax.distributed at worker 0's address) and the
    missing worker, and the process is SIGKILLed: exit 137, the status the
    exit table gives a multi-worker peer that never arrived (as on
    TensorFlow). jax.distributed alone would abort it (134) without it."""
    p0, p1 = free_ports(2)
    tf_config = json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{p0}", f"127.0.0.1:{p1}"]},
        "task": {"type": "worker", "index": 0}})
    override = ",".join([
        "runtime.backend=jax", "runtime.num_gpus=0",
        "runtime.distribution_strategy=multi_worker_mirrored",
        "runtime.peer_timeout_seconds=8",
        "model.name=resnet_cifar", "model.model_params.depth=8",
        "train_dataset.builder=synthetic", "train_dataset.image_size=16",
        "train_dataset.num_classes=10", "train_dataset.batch_size=4",
        "train.steps=12", "evaluation.skip_eval=true"])
    argv = trainer_cmd(str(tmp_path), override)
    start = time.monotonic()
    (rc,), (out,) = run_together(
        [(argv, no_tensorflow(tmp_path, dict(
            os.environ, PYTHONUNBUFFERED="1", TF_CONFIG=tf_config)))],
        REPO, 90)
    took = time.monotonic() - start
    assert exit_status.lookup(rc).code == exit_status.KILLED, out[-3000:]
    timeouts = [l for l in out.splitlines() if "official_bench: timeout:" in l]
    assert timeouts == [
        "error: official_bench: timeout: worker 0 waited 8 s (runtime.peer_"
        f"timeout_seconds) for jax.distributed at 127.0.0.1:{p0}; not "
        f"reachable: worker 1 at 127.0.0.1:{p1}"], out[-3000:]
    assert took < 60, took
    assert not (tmp_path / "result.json").exists()



JAX_TINY = ",".join([
    "runtime.backend=jax", "runtime.num_gpus=0",
    "runtime.distribution_strategy=multi_worker_mirrored",
    "model.name=resnet_cifar", "model.model_params.depth=8",
    "train_dataset.builder=synthetic", "train_dataset.image_size=16",
    "train_dataset.num_classes=10", "train_dataset.batch_size=4",
    "train.steps=2000", "evaluation.skip_eval=true"])


def _until_output(w, text, seconds=120):
    deadline = time.monotonic() + seconds
    while text not in w.output and w.proc.poll() is None and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    assert text in w.output, w.output[-3000:]


def test_ctrl_c_while_waiting_for_the_peer_ends_at_once(tmp_path):
    """Worker 1 alone waits for worker 0 inside jax.distributed (C++,
    where no Python handler runs): a Ctrl-C still ends it at once, not at
    runtime.peer_timeout_seconds, with the line naming the wait and 130
    (the start-up watchdog sees it through the wake-up fd)."""
    p0, p1 = free_ports(2)
    tf_config = json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{p0}", f"127.0.0.1:{p1}"]},
        "task": {"type": "worker", "index": 1}})
    w = LiveProcess(
        trainer_cmd(str(tmp_path), JAX_TINY + ",runtime.peer_timeout_"
                    "seconds=120"),
        env=no_tensorflow(tmp_path, dict(TF_CONFIG=tf_config)))
    try:
        _until_output(w, "joins 2 process(es)")
        time.sleep(1)  # inside client.connect()
        w.proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        rc = w.finish(30)
    finally:
        kill_all([w])
    assert rc == exit_status.INTERRUPTED, w.output[-3000:]
    assert time.monotonic() - sent < 10
    assert w.last_line == (
        "error: official_bench: stopped by SIGINT while waiting for "
        f"jax.distributed at 127.0.0.1:{p0}; no result written"), \
        w.output[-3000:]
    assert not list(tmp_path.glob("result*.json"))


def test_sigterm_while_two_processes_compile_stops_both(tmp_path):
    """jax.distributed's preemption notifier (XLA's, in C) took SIGTERM
    over from the join to the steps: the worker trained on to exit 0. A
    SIGTERM to worker 1 while it compiles ends it as on one process (the
    stage line, 143, nothing written); worker 0 ends with its own error
    line."""
    _, hosts = loopback_hosts(2)
    common = (f"{JAX_TINY},runtime.peer_timeout_seconds=60,"
              f"runtime.worker_hosts='{hosts}'")
    env = no_tensorflow(tmp_path, {})
    workers = [LiveProcess(trainer_cmd(str(tmp_path / f"w{i}"),
                                       f"{common},runtime.task_index={i}"),
                           env=env) for i in (0, 1)]
    try:
        _until_output(workers[1], "stage: compiling the train step")
        workers[1].proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        codes = [w.finish(60) for w in workers[::-1]]
        took = time.monotonic() - sent
    finally:
        kill_all(workers)
    stopped, peer = workers[1], workers[0]
    assert codes[0] == exit_status.TERMINATED, stopped.output[-3000:]
    assert stopped.last_line == (
        "error: official_bench: stopped by SIGTERM while compiling the "
        "train step (XLA, 2 replica(s) on cpu); no result written"), \
        stopped.output[-3000:]
    assert codes[1] not in (0, None), peer.output[-3000:]
    assert peer.last_line.startswith("error: official_bench: "), \
        peer.output[-3000:]
    assert took < 40, took
    assert not list(tmp_path.glob("w*/result*.json"))
