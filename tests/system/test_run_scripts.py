"""run_single_node.sh (also with LAUNCHER=horovod) and run_two_node.sh end to
end on CPU with a tiny model,
and the extractor on the log trees they write (issue 5: log trees produced by
the project's own scripts). Only 127.0.0.1 is used.
"""

import json
import os
import re
import subprocess
import time

import pytest

from official_bench.extract import allreduce_logs
from support.helpers import (
    consecutive_free_port,
    extract_tables,
    free_ports,
    horovod_venv,
)
from support.run_scripts import PY, TINY, clean_env, failures

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DLPERF_REGEX = re.compile(r", (\d+.\d+) examples/second ")
FINISH = "official_bench: run finished"






def check_run(log):
    """A complete run: TimeHistory lines, the finish line, the result JSON."""
    text = log.read_text()
    lines = [l for l in text.splitlines() if "TimeHistory" in l]
    assert len(lines) == 3, (log, text[-2000:])  # steps 0-2, 2-4, 4-6
    assert all(DLPERF_REGEX.search(l) for l in lines)
    assert FINISH in text
    assert re.search(r"^# official_bench.launch: .* ok \(exit 0\)$", text,
                     re.M)
    record = json.loads(log.with_suffix(".json").read_text())
    assert len(record["stats"]["intervals"]) == 3
    return record


def _broadcast_digests(output):
    """{rank: (before, after)} from broadcast_initial_state's log lines."""
    found = re.findall(r"^\[(\d)\].*Horovod rank \d: broadcast .* sha256 "
                       r"(\w+) before, (\w+) after", output, re.M)
    return {int(r): (b, a) for r, b, a in found}


def extract(tmp_path, log_dir):
    return extract_tables(tmp_path, log_dir, PY)[0]


@pytest.mark.slow
def test_single_node_end_to_end_and_extractor(tmp_path):
    """1 and 2 (logical CPU) devices, one run each (repeated runs are in the
    two-node test): the whole log tree, then the extractor on it."""
    start = time.monotonic()
    out = subprocess.run(
        ["bash", os.path.join(REPO, "run_single_node.sh"), "4", "fp32", "1"],
        cwd=tmp_path, env=clean_env(tmp_path, CPU_DEVICES="1,2",
                                    PYTHON_CHECK_TIMEOUT="300"),
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, failures(tmp_path, out.stdout + out.stderr)
    assert "done: 2 of 2 run(s) ok" in out.stdout
    # the interpreter check ran (the other launcher tests turn it off)
    assert "not checked: PYTHON_CHECK_TIMEOUT=0" not in out.stdout
    root = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4"
    tree = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file())
    assert tree == [f"{case}/rn50_b4_fp32_{i}.{ext}"
                    for case in ("1n1g", "1n2g") for i in (1,)
                    for ext in ("json", "log", "log.status.json")]
    assert json.loads((root / "1n1g" / "rn50_b4_fp32_1.log.status.json")
                      .read_text())["status"] == "ok"
    model_dirs = set()
    for case, replicas in (("1n1g", 1), ("1n2g", 2)):
        record = check_run(root / case / "rn50_b4_fp32_1.log")
        assert record["stats"]["num_replicas"] == replicas
        assert record["stats"]["global_batch_size"] == 4 * replicas
        model_dirs.add(record["config"]["model_dir"])
    assert len(model_dirs) == 2  # a fresh model_dir per run

    rn50 = extract(tmp_path, root)
    assert sorted(rn50) == ["1n1g", "1n2g"]
    for case in rn50.values():
        assert case["num_runs"] == 1 and case["excluded"] == []
        assert case["batch_size_per_device"] == 4
        assert all(r["source"] == "result_json" for r in case["run_details"])
    assert rn50["1n1g"]["speedup"] == 1.0
    print(f"single node: {time.monotonic() - start:.0f} s")


@pytest.mark.slow
@pytest.mark.multiworker
def test_two_node_on_one_machine(tmp_path):
    """Two launchers on 127.0.0.1 with TASK_INDEX 0 and 1; node 1 starts
    late, the barrier pairs run i with run i; logs land in 2n1g."""
    w0, w1, b = free_ports(3)
    common = dict(NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}", BARRIER_PORT=b,
                  BARRIER_TIMEOUT=60, PEER_TIMEOUT=120)
    procs = []
    for index in (0, 1):
        if index:
            time.sleep(3)
        procs.append(subprocess.Popen(
            ["timeout", "-k", "10", "400", "bash",
             os.path.join(REPO, "run_two_node.sh"), "4", "fp32", "2"],
            cwd=tmp_path, env=clean_env(tmp_path, TASK_INDEX=index, **common),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=420)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], \
        failures(tmp_path, "\n".join(outs))
    for out in outs:
        assert "done: 2 of 2 run(s) ok on every node" in out
        assert "2n1g run 2: node 0 ok, node 1 ok" in out
    root = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4"
    model_dirs = set()
    for i in (1, 2):
        chief = check_run(root / "2n1g" / f"rn50_b4_fp32_{i}.log")
        worker = check_run(root / "2n1g" / "node1" / f"rn50_b4_fp32_{i}.log")
        assert chief["environment"]["num_workers"] == 2
        assert chief["stats"]["global_batch_size"] == 8
        assert chief["task"]["index"] == 0 and worker["task"]["index"] == 1
        # The same run on both nodes: same losses.
        assert chief["history"]["loss"] == worker["history"]["loss"]
        model_dirs |= {chief["config"]["model_dir"],
                       worker["config"]["model_dir"]}
    assert len(model_dirs) == 4  # fresh per run and node
    rn50 = extract(tmp_path, root)
    assert list(rn50) == ["2n1g"] and rn50["2n1g"]["num_runs"] == 2


@pytest.mark.slow
@pytest.mark.multiworker
def test_single_node_horovod_end_to_end(tmp_path):
    """LAUNCHER=horovod: one horovodrun -np 2 --gloo of the trainer's CLI on
    CPU (CPU_DEVICES=2 processes), with enable_xla, an fp16 all-reduce and a
    fusion threshold through PARAMS_OVERRIDE. This is the suite's one
    horovodrun of the trainer with XLA (its forward and backward pass
    compiled; test_data_sources_strategies.py's run without): the plain
    run's assertions hold here too. Rank 0 alone logs throughput; the ranks
    start from different weights, from rank 0's after the broadcast, and
    end equal; rank 0's result.json lies next to the log; the extractor
    reads the tree."""
    venv = horovod_venv()
    start = time.monotonic()
    out = subprocess.run(
        ["bash", os.path.join(REPO, "run_single_node.sh"), "4", "fp32", "1"],
        cwd=tmp_path, env=clean_env(
            tmp_path, LAUNCHER="horovod", HOROVOD_VENV=venv, CPU_DEVICES="2",
            PARAMS_OVERRIDE=TINY + ",runtime.enable_xla=true,"
            "runtime.horovod.fp16_allreduce=true,"
            "runtime.horovod.fusion_threshold_mb=32"),
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, failures(tmp_path, out.stdout + out.stderr)
    assert "done: 1 of 1 run(s) ok" in out.stdout
    root = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4"
    tree = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file())
    assert tree == ["1n2g/rn50_b4_fp32_1.json", "1n2g/rn50_b4_fp32_1.log",
                    "1n2g/rn50_b4_fp32_1.log.status.json"]
    log = root / "1n2g" / "rn50_b4_fp32_1.log"
    text = log.read_text()
    assert f"{venv}/bin/horovodrun -np 2 -H localhost:2 --gloo " \
        f"{venv}/bin/python -m official_bench.classifier_trainer" in text
    # Exactly one TimeHistory line per interval, all from rank 0.
    record = check_run(log)
    assert all(l.startswith("[0]") for l in text.splitlines()
               if "TimeHistory" in l)
    assert "forward and backward pass are compiled with XLA" in text
    assert record["environment"]["strategy"] == "horovod"
    assert record["environment"]["horovod"]["size"] == 2
    assert record["environment"]["tensorflow"].startswith("2.18")
    assert record["stats"]["global_batch_size"] == 8
    assert record["task"]["tag"] == "rank0"
    assert record["config"]["runtime"]["horovod"]["fp16_allreduce"] is True
    assert record["config"]["runtime"]["enable_xla"] is True
    # Ranks start from different random weights (no seed) and from rank 0's
    # after the broadcast, before the first step.
    digests = _broadcast_digests(text)
    assert sorted(digests) == [0, 1], text[-3000:]
    assert digests[0][0] != digests[1][0]
    assert digests[0][1] == digests[1][1] == digests[0][0]
    # Both ranks end with the same weights and the same averaged metrics.
    model_dir = record["config"]["model_dir"]
    other = json.load(open(os.path.join(model_dir, "result_rank1.json")))
    assert record["model"]["trainable_weights_sha256"] == \
        other["model"]["trainable_weights_sha256"]
    assert record["history"]["loss"] == \
        pytest.approx(other["history"]["loss"])
    assert other["stats"] is None  # rank 1 does not time

    rn50 = extract(tmp_path, root)
    assert list(rn50) == ["1n2g"]
    case = rn50["1n2g"]
    assert case["num_runs"] == 1 and case["excluded"] == []
    assert case["global_batch_size"] == 8
    assert case["run_details"][0]["source"] == "result_json"
    print(f"horovod single node: {time.monotonic() - start:.0f} s")


@pytest.mark.multiworker
def test_single_node_horovod_allreduce_bench(tmp_path):
    """LAUNCHER=horovod with BENCH=allreduce: horovodrun -np 2 runs the
    all-reduce benchmark; rank 0's allreduce.json lands beside the log with
    both ranks' compute after a wait (gathered with hvd.allgather), and the
    extractor's table has it. (The one test of the benchmark under Horovod.)"""
    venv = horovod_venv()
    out = subprocess.run(
        ["bash", os.path.join(REPO, "run_single_node.sh"), "4", "fp32", "1"],
        cwd=tmp_path, env=clean_env(
            tmp_path, LAUNCHER="horovod", HOROVOD_VENV=venv, CPU_DEVICES="2",
            BENCH="allreduce", ALLREDUCE_ARGS="--sizes=model,64K "
            "--dtypes=float32 --iters=3 --compute_wait_cycles=3"),
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, failures(tmp_path, out.stdout + out.stderr)
    root = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4"
    data = json.loads((root / "1n2g" / "allreduce_fp32_1.json").read_text())
    assert data["strategy"] == "horovod" and data["replicas"] == 2
    assert [(r["model"], r.get("latency", False)) for r in data["results"]] \
        == [(True, False), (False, False), (False, True)]
    gradient, _, latency = data["results"]
    assert gradient["seconds"] > 0
    # Horovod's step is not traced: no count of small collectives, so the
    # wait is the gradient's all-reduce alone, timed between compute steps
    # on both ranks.
    assert latency["per_step"] is None
    wait = data["compute_after_wait"]
    in_step = wait["communication_in_step"]
    assert (in_step["small_collectives"], in_step["small_seconds"],
            in_step["processes"]) == (0, 0.0, 2)
    assert wait["gap_seconds"] == pytest.approx(in_step["gradient_seconds"])
    assert wait["processes"] == 2 and wait["cycles"] == 3
    assert wait["after_wait_seconds"] >= max(
        r["after_wait_seconds"] for r in wait["per_process"])
    rank1 = os.path.join(data["config"]["model_dir"], "allreduce_rank1.json")
    assert os.path.isfile(rank1), rank1
    text = (root / "1n2g" / "allreduce_fp32_1.log").read_text()
    assert "-m official_bench.allreduce.bench" in text
    assert "Compute after wait: " in text
    assert "(the slowest of 2 processes)" in text
    table, warnings = allreduce_logs.collect(str(root))
    assert warnings == [] and [r["ranks"] for r in table["1n2g"]] == [2] * 3


@pytest.mark.slow
@pytest.mark.multiworker
def test_single_node_two_workers_per_node(tmp_path):
    """WORKERS_PER_NODE=2 on CPU: two multi_worker_mirrored workers with one
    CPU device each train together; the chief's log is the 1n2g case log,
    worker 1's sits beside it (.local1) and the extractor ignores it."""
    port = consecutive_free_port(2)
    out = subprocess.run(
        ["bash", os.path.join(REPO, "run_single_node.sh"), "4", "fp32", "1"],
        cwd=tmp_path, env=clean_env(tmp_path, WORKERS_PER_NODE=2,
                                    WORKER_PORT=port, PEER_TIMEOUT=120),
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, failures(tmp_path, out.stdout + out.stderr)
    assert "done: 1 of 1 run(s) ok" in out.stdout
    root = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4"
    tree = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file())
    assert tree == ["1n2g/rn50_b4_fp32_1.json",
                    "1n2g/rn50_b4_fp32_1.json.local1",
                    "1n2g/rn50_b4_fp32_1.log",
                    "1n2g/rn50_b4_fp32_1.log.local1",
                    "1n2g/rn50_b4_fp32_1.log.local1.status.json",
                    "1n2g/rn50_b4_fp32_1.log.status.json"]
    chief = check_run(root / "1n2g" / "rn50_b4_fp32_1.log")
    worker_log = root / "1n2g" / "rn50_b4_fp32_1.log.local1"
    text = worker_log.read_text()
    assert len([l for l in text.splitlines() if "TimeHistory" in l]) == 3
    assert " ok (exit 0)" in text
    worker = json.loads((root / "1n2g" /
                         "rn50_b4_fp32_1.json.local1").read_text())
    assert chief["environment"]["num_workers"] == 2
    assert chief["stats"]["num_replicas"] == 2
    assert chief["stats"]["global_batch_size"] == 8
    assert chief["task"]["index"] == 0 and worker["task"]["index"] == 1
    assert chief["history"]["loss"] == worker["history"]["loss"]
    assert chief["config"]["model_dir"] != worker["config"]["model_dir"]

    ext = subprocess.run(
        [PY, os.path.join(REPO, "extract_tensorflow_logs.py"),
         "--log_dir", str(root), "--warmup_batches", "2",
         "--train_batches", "6", "--output_dir", str(tmp_path / "result"),
         "--no_plot"], cwd=tmp_path, capture_output=True, text=True,
        timeout=120)
    assert ext.returncode == 0, ext.stderr
    assert "local1" not in ext.stdout + ext.stderr  # not even "skipped"
    rn50 = json.loads((tmp_path / "result" /
                       f"{root.name}_result.json").read_text())["rn50"]
    assert list(rn50) == ["1n2g"]
    case = rn50["1n2g"]
    assert case["num_runs"] == 1 and case["excluded"] == []
    assert case["global_batch_size"] == 8
    assert case["run_details"][0]["source"] == "result_json"
