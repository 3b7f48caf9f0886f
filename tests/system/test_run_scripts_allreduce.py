"""BENCH=allreduce through the run scripts (issue 14 §3): two launchers on
127.0.0.1 (TASK_INDEX 0 and 1) run the all-reduce benchmark over two
multi_worker_mirrored workers exactly as they would train, into the same
log tree, and the extractor prints the bandwidth table."""

import json
import os
import subprocess

import pytest

from support.helpers import free_ports
from support.run_scripts import PY, REPO, clean_env, failures

ARGS = "--sizes=model,256K --dtypes=float32 --iters=3 --warmup=1"


@pytest.mark.slow
@pytest.mark.multiworker
def test_two_node_allreduce_mode_and_extractor(tmp_path):
    w0, w1, b = free_ports(3)
    common = dict(NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}", BARRIER_PORT=b,
                  BARRIER_TIMEOUT=60, PEER_TIMEOUT=120, BENCH="allreduce",
                  ALLREDUCE_ARGS=ARGS)
    procs = [subprocess.Popen(
        ["timeout", "-k", "10", "400", "bash",
         os.path.join(REPO, "run_two_node.sh"), "4", "fp32", "1"],
        cwd=tmp_path, env=clean_env(tmp_path, TASK_INDEX=index, **common),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for index in (0, 1)]
    outs = [p.communicate(timeout=420)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], \
        failures(tmp_path, "\n".join(outs))
    for out in outs:
        assert "BENCH=allreduce: each run is python -m official_bench." \
            "allreduce.bench" in out
        assert "2n1g run 1: node 0 ok, node 1 ok" in out
    root = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                   if p.is_file())
    assert files == [
        "2n1g/allreduce_fp32_1.json", "2n1g/allreduce_fp32_1.log",
        "2n1g/allreduce_fp32_1.log.status.json",
        "2n1g/node1/allreduce_fp32_1.json", "2n1g/node1/allreduce_fp32_1.log",
        "2n1g/node1/allreduce_fp32_1.log.status.json"]
    chief = json.loads((root / "2n1g" / "allreduce_fp32_1.json").read_text())
    worker = json.loads((root / "2n1g" / "node1" /
                         "allreduce_fp32_1.json").read_text())
    assert chief["is_chief"] and not worker["is_chief"]
    assert chief["replicas"] == 2 and chief["workers"] == 2
    assert chief["strategy"] == "multi_worker_mirrored"
    # resnet_cifar depth 8, 10 classes: 78,042 parameters.
    sizes = [(r["nbytes"], r["model"], r.get("latency"))
             for r in chief["results"]]
    assert sizes == [(4 * 78042, True, None), (262144, False, None),
                     (4, False, True)]  # then the latency row
    assert chief["results"][-1]["per_step"] == 6
    assert all(r["seconds"] > 0 and r["busbw_gbps"] > 0
               for r in chief["results"])

    ext = subprocess.run(
        [PY, os.path.join(REPO, "extract_tensorflow_logs.py"),
         "--log_dir", str(root), "--output_dir", str(tmp_path / "result"),
         "--json_only"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ext.returncode == 0, ext.stderr
    assert json.loads(ext.stdout) == {}  # no training runs in this tree
    rows = [l for l in ext.stderr.splitlines() if l.startswith("| 2n1g |")]
    assert [r.split(" | ")[1:4] for r in rows] == [  # by size
        ["4 B (latency, 6 per step)", "float32", "2"],
        ["256 KiB", "float32", "2"], ["304.9 KiB (model)", "float32", "2"]]
    for row, r in zip(rows, sorted(chief["results"],
                                   key=lambda r: r["nbytes"])):
        ms = float(row.split(" | ")[4])
        assert ms == pytest.approx(r["seconds"] * 1e3, abs=1e-3)
    md = (tmp_path / "result" / "bz4_result.md").read_text()
    assert "## All-reduce bandwidth" in md
