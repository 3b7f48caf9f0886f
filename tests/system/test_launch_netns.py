"""Automatic task index on a real two-host network: two network namespaces
joined by a veth pair (10.200.0.1/24 and 10.200.0.2/24), run_two_node.sh
started once in each with the same node list and no TASK_INDEX. Each
launcher must find its own index from its interface addresses, and the two
must train together. Needs root and iproute2 (`ip`); skipped otherwise. The
same with WORKERS_PER_NODE=2: four workers on two hosts.
Only the addresses inside the namespaces created here are used.
"""

import json
import os
import re

import pytest

from support.launch_cli import run_together
from support.netns import ADDRS, PORT, env_for

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))








def start_both(tmp_path, two_hosts, **knobs):
    """run_two_node.sh in each namespace; their outputs (killed on exit)."""
    return run_together(
        [(["ip", "netns", "exec", ns, "timeout", "-k", "10", "400", "bash",
           os.path.join(REPO, "run_two_node.sh"), "4", "fp32", "1"],
          env_for(tmp_path, ns, **knobs)) for ns in two_hosts],
        tmp_path, timeout=420)


@pytest.mark.slow
@pytest.mark.multiworker
def test_task_index_found_on_two_hosts(tmp_path, two_hosts):
    rcs, outs = start_both(tmp_path, two_hosts)
    assert rcs == [0, 0], "\n".join(outs)
    for index, (ns, out) in enumerate(zip(two_hosts, outs)):
        addr = ADDRS[index]
        assert (f"this node: index {index} = {addr}:{PORT} (matched this "
                f"machine: {addr} is local address {addr})") in out, out
        assert "2n1g run 1: node 0 ok, node 1 ok" in out
        case = tmp_path / ns / "logs/tensorflow/resnet50/bz4/2n1g"
        log = case / ("node1" if index else "") / "rn50_b4_fp32_1.log"
        text = log.read_text()
        assert len(re.findall(r"TimeHistory: .* examples/second between "
                              r"steps \d+ and \d+", text)) == 3
        record = json.loads(log.with_suffix(".json").read_text())
        assert record["task"]["index"] == index
        assert record["environment"]["num_workers"] == 2


@pytest.mark.slow
@pytest.mark.multiworker
def test_two_hosts_two_workers_each(tmp_path, two_hosts):
    """WORKERS_PER_NODE=2 on two hosts: 4 multi_worker_mirrored tasks (host
    k runs tasks 2k and 2k+1 on PORT and PORT+1, one CPU device each); the
    2n2g case log is host 0's worker 0 (the chief), the others' logs sit
    beside their node's log with a .local1 suffix."""
    rcs, outs = start_both(tmp_path, two_hosts, WORKERS_PER_NODE=2)
    assert rcs == [0, 0], "\n".join(outs)
    cluster = ",".join(f"{a}:{PORT + l}" for a in ADDRS for l in (0, 1))
    records = {}
    for index, (ns, out) in enumerate(zip(two_hosts, outs)):
        assert f"multi_worker_mirrored over 4 tasks: {cluster}" in out, out
        assert "2n2g run 1: node 0 ok, node 1 ok" in out
        case = tmp_path / ns / "logs/tensorflow/resnet50/bz4/2n2g"
        folder = case / ("node1" if index else "")
        assert sorted(p.name for p in folder.iterdir() if p.is_file()) == [
            "rn50_b4_fp32_1.json", "rn50_b4_fp32_1.json.local1",
            "rn50_b4_fp32_1.log", "rn50_b4_fp32_1.log.local1",
            "rn50_b4_fp32_1.log.local1.status.json",
            "rn50_b4_fp32_1.log.status.json"]
        for local, suffix in ((0, ""), (1, ".local1")):
            text = (folder / f"rn50_b4_fp32_1.log{suffix}").read_text()
            assert len(re.findall(r"TimeHistory: .* examples/second between "
                                  r"steps \d+ and \d+", text)) == 3
            record = json.loads(
                (folder / f"rn50_b4_fp32_1.json{suffix}").read_text())
            records[2 * index + local] = record
    assert sorted(records) == [0, 1, 2, 3]
    for task, record in records.items():
        assert record["task"]["index"] == task
        assert record["environment"]["num_workers"] == 4
        assert record["stats"]["global_batch_size"] == 16
        assert record["history"]["loss"] == records[0]["history"]["loss"]
