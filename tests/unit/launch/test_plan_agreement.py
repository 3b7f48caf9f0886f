"""What the nodes of a two/multi-node sweep must agree on (plan.py's
Plan.digest), checked at the first barrier field by field: STEPS,
LOG_STEPS, PARAMS_OVERRIDE, the config file's content, LAUNCHER,
RESUME/OVERWRITE differing is one line naming the fields, exit 3 on
every node; DATA_DIR, PYTHON and the timeouts may differ. And the "did
not answer" line says which barrier port this node tried and why."""

import subprocess
import time

import pytest

from official_bench.launch import (
    node_link,
    plan as plan_lib,
    settings as settings_lib,
)
from official_bench.launch.barrier import BarrierError, Client, plan_difference
from official_bench.measure import host_env
from support.helpers import free_ports
from support.launch_cli import SCRIPTS, clean_env

NODES = "127.0.0.1:5000,127.0.0.1:5002"


def digest(tmp_path, index=0, **env):
    environ = dict(DEVICE="cpu", TEST_NUM="1", NODES=NODES,
                   TASK_INDEX=str(index), LOG_DIR=str(tmp_path / "l"),
                   MODEL_DIR=str(tmp_path / "m"), **env)
    settings = settings_lib.parse(["two", "8", "fp32", "--dry-run"],
                                  environ)
    return plan_lib.make_plan(settings, "20260101-000000")


def differing(a, b):
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


@pytest.mark.parametrize("env1, fields", [
    ({"STEPS": "20"}, ["trainer's train.steps (STEPS / PARAMS_OVERRIDE)"]),
    ({"LOG_STEPS": "5"},
     ["trainer's train.time_history.log_steps (LOG_STEPS / PARAMS_OVERRIDE)"]),
    ({"PARAMS_OVERRIDE": "train.epochs=2"}, ["trainer's train.epochs"]),
    ({"RESUME": "1"}, ["RESUME/OVERWRITE"]),
    ({"OVERWRITE": "1"}, ["RESUME/OVERWRITE"]),
    ({"ON_FAILURE": "stop"}, ["ON_FAILURE"]),
    ({"PARAMS_OVERRIDE": "runtime.task_index=1"}, []),
])
def test_what_the_trainers_need_to_join_is_in_the_digest(tmp_path, env1,
                                                         fields):
    ours = digest(tmp_path, 0, STEPS="10").digest()
    theirs = digest(tmp_path, 1, **{"STEPS": "10", **env1}).digest()
    assert differing(ours, theirs) == sorted(fields)


def test_the_config_files_content_counts_not_its_path(tmp_path):
    source = plan_lib.DEFAULT_CONFIG_DIR + "/cpu_smoke.yaml"
    text = open(source).read()
    (tmp_path / "a.yaml").write_text(text)
    (tmp_path / "b.yaml").write_text(text)
    (tmp_path / "c.yaml").write_text(text.replace("steps:", "steps: 7 #", 1))
    a, b, c = (digest(tmp_path, CONFIG_FILE=str(tmp_path / n)).digest()
               for n in ("a.yaml", "b.yaml", "c.yaml"))
    assert a == b
    assert "config file content" in differing(a, c)


def test_another_checkout_of_the_suite_is_named(tmp_path, monkeypatch):
    """A node whose checkout was not pulled runs other code: refused at the
    first barrier, the field naming the suite (measure/host_env.suite)."""
    ours = digest(tmp_path, 0).digest()
    assert ours["official_bench"] == host_env.suite()
    monkeypatch.setattr(host_env, "suite", lambda: "0.1.0 (git 0000000)")
    theirs = digest(tmp_path, 1).digest()
    assert differing(ours, theirs) == ["official_bench"]


def test_what_may_differ_per_node_is_left_out(tmp_path):
    (tmp_path / "d0").mkdir()
    (tmp_path / "d1").mkdir()
    ours = digest(tmp_path, 0, DATA_DIR=str(tmp_path / "d0"),
                  PEER_TIMEOUT="20", RUN_TIMEOUT="100").digest()
    theirs = digest(tmp_path, 1, DATA_DIR=str(tmp_path / "d1"),
                    PEER_TIMEOUT="30", BARRIER_TIMEOUT="9",
                    PYTHON="/usr/bin/python3").digest()
    assert ours == theirs


def test_the_refusal_names_the_fields_that_differ():
    text = plan_difference({"BATCH": "8", "STEPS": "10"},
                           {"BATCH": "8", "STEPS": "20", "X": "1"},
                           "node 1 (h:1)")
    assert text == "STEPS: node 0 10, node 1 20; X: node 0 (unset), node 1 1"
    assert plan_difference("a", "b", "node 1") == "node 0: a; node 1: b"


def test_the_unanswered_line_says_which_port_and_why(tmp_path):
    plan = digest(tmp_path, 1)
    assert node_link.port_from(plan) == (
        "This node looked on port 5003, the default BARRIER_PORT: 1 + the "
        "highest worker port on node 0's host (5002 with "
        "WORKERS_PER_NODE=1); node 0 decides its own from its settings, so "
        "a node started with another BARRIER_PORT or WORKERS_PER_NODE "
        "listens elsewhere.")
    plan = digest(tmp_path, 1, BARRIER_PORT="7000")
    assert node_link.port_from(plan).startswith(
        "This node looked on port 7000, BARRIER_PORT=7000 (env "
        "BARRIER_PORT);")
    (port,) = free_ports(1)
    client = Client("127.0.0.1", port, 1, "i", {}, port_from="HOW.")
    with pytest.raises(BarrierError) as e:
        client.meet("hello", {}, 0.5)
    assert str(e.value).endswith("is the script running there? HOW.")


def _pair(tmp_path, knobs1):
    w0, w1, b = free_ports(3)
    common = dict(NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}", BARRIER_PORT=b,
                  BARRIER_TIMEOUT=20, DEVICE="cpu", TEST_NUM=1, STEPS=10)
    procs = [subprocess.Popen(
        ["timeout", "-k", "10", "100", "bash", SCRIPTS["two"], "8", "fp32"],
        cwd=tmp_path, env=clean_env(tmp_path, TASK_INDEX=i,
                                    **{**common, **knobs}),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for i, knobs in enumerate(({}, knobs1))]
    return [(p.wait(110), p.stdout.read()) for p in procs], w1


@pytest.mark.multiworker
@pytest.mark.parametrize("knobs1, words", [
    ({"STEPS": 20}, "trainer's train.steps (STEPS / PARAMS_OVERRIDE): "
                    "node 0 10, node 1 20"),
    ({"RESUME": 1}, "RESUME/OVERWRITE: node 0 neither, node 1 RESUME=1"),
])
def test_both_nodes_stop_at_the_first_meeting(tmp_path, knobs1, words):
    start = time.monotonic()
    ((rc0, out0), (rc1, out1)), w1 = _pair(tmp_path, knobs1)
    assert (rc0, rc1) == (3, 3), (out0, out1)
    for out in (out0, out1):
        assert f"node 1 (127.0.0.1:{w1}) runs a different plan than node " \
               f"0: {words}; start every node" in out, out
    assert time.monotonic() - start < 30
