"""--dry-run is the plan preview and works from a login node or a laptop:
a machine that is not in the node list shows node 0's plan (with a note
naming TASK_INDEX), node 0's host that does not resolve here is a note,
and GPUs asked for on a machine without one are assumed, with a note that
a real run stops (exit 2). Real runs keep their errors."""

import pytest

from official_bench.contracts import exit_status
from official_bench.launch import plan as plan_lib, settings as settings_lib
from official_bench.launch.identity import Identity
from official_bench.launch.node_list import NodeError
from support.launch_cli import fake_smi, script

GPU_NODES = "gpu1:11111,gpu2:11111"


def resolver(table):
    return lambda host: table.get(host, [])


def plan(tmp_path, table, dry_run=True, **env):
    environ = dict(DEVICE="cpu", TEST_NUM="1", LOG_DIR=str(tmp_path / "l"),
                   MODEL_DIR=str(tmp_path / "m"), NODES=GPU_NODES, **env)
    argv = ["two", "8"] + (["--dry-run"] if dry_run else [])
    settings = settings_lib.parse(argv, environ)
    return plan_lib.make_plan(
        settings, "20260101-000000", resolver=resolver(table),
        identity_fn=lambda: Identity("login1", {"10.9.9.9"}, "test"))


KNOWN = {"gpu1": ["10.0.0.1"], "gpu2": ["10.0.0.2"]}


def test_a_machine_not_in_the_list_previews_node_0(tmp_path):
    p = plan(tmp_path, KNOWN)
    assert p.index == 0
    assert p.nodeset.index_from.startswith("node 0, shown by this dry run")
    (note,) = [n for n in p.notes if "is not in NODES" in n]
    assert note == (
        "this machine (login1) is not in NODES (env NODES) and no TASK_INDEX "
        "says which node it is, so this dry run shows node 0's plan "
        "(gpu1:11111; TASK_INDEX=k, 0..1, shows node k's); a real run stops "
        "here (exit 3)")
    with pytest.raises(NodeError, match="this machine is not in NODES"):
        plan(tmp_path, KNOWN, dry_run=False)


def test_node_0s_host_unknown_here_is_a_note(tmp_path):
    p = plan(tmp_path, {}, TASK_INDEX="0")
    assert p.index == 0 and p.barrier_bind is None
    # sweep_start.py notes every host that does not resolve: not twice.
    assert "host 'gpu1' does not resolve" in p.nodeset.unresolved[0]
    assert not any("barrier" in n for n in p.notes)
    p = plan(tmp_path, {"gpu2": ["10.0.0.2"], "gpu1": ["127.0.0.1"]},
             TASK_INDEX="0")
    (note,) = [n for n in p.notes if "a real run stops here" in n]
    assert note.startswith("node 0's host 'gpu1' resolves here to "
                           "127.0.0.1 (loopback)")
    assert note.endswith("; a real run stops here (exit 3)")
    with pytest.raises(NodeError, match="does not resolve on this machine"):
        plan(tmp_path, {"gpu2": ["10.0.0.2"]}, dry_run=False, TASK_INDEX="0")


def test_the_readme_example_previews_from_here(tmp_path):
    out = script("two", tmp_path, "256", "fp16", "--dry-run",
                 NODES="10.11.0.2:11111,10.11.0.3:11111")
    assert out.returncode == exit_status.OK, out.stderr
    assert "this dry run shows node 0's plan (10.11.0.2:11111;" in out.stdout
    out = script("two", tmp_path, "256", "fp16", "--dry-run", TASK_INDEX=0,
                 NODES="gpu-no-such-host1,gpu-no-such-host2")
    assert out.returncode == exit_status.OK, out.stderr


@pytest.mark.parametrize("args, knobs, cases, words", [
    (["--gpus", "8"], {}, "1n8g", "GPUS=8 (command line) asks for GPUs, "
     "but no GPU is visible"),
    ([], {"DEVICE": "gpu"}, "1n1g, 1n2g, 1n4g, 1n8g",
     "DEVICE=gpu but no GPU is visible"),
])
def test_gpus_asked_for_on_a_machine_without_one(tmp_path, args, knobs,
                                                 cases, words):
    path = fake_smi(tmp_path, 0)
    out = script("single", tmp_path, "128", "fp32", "1", *args,
                 "--dry-run", PATH=path, **knobs)
    assert out.returncode == exit_status.OK, out.stderr
    assert f"1 run(s) of each of {cases}\n" in out.stdout
    assert "gpu.yaml" in out.stdout
    assert f"note: {words}" in out.stdout
    assert "this dry run plans as if 8 GPU(s) were visible; a real run " \
           "stops here (exit 2)" in out.stdout
    real = script("single", tmp_path, "128", "fp32", "1", *args, PATH=path,
                  **knobs)
    assert real.returncode == exit_status.CONFIG
    assert words in real.stderr


def test_horovod_commands_before_the_venv_is_built(tmp_path):
    """LAUNCHER=horovod without its venv: the dry run shows the horovodrun
    commands and notes `make horovod`; a real run stops (exit 2)."""
    knobs = dict(LAUNCHER="horovod", HOROVOD_VENV=str(tmp_path / "nohvd"),
                 NODES="gpu-no-such-host1,gpu-no-such-host2", TASK_INDEX=0,
                 TEST_NUM=1)
    out = script("two", tmp_path, "8", "fp32", "--dry-run", **knobs)
    assert out.returncode == exit_status.OK, out.stderr
    assert f"{tmp_path}/nohvd/bin/horovodrun -np 2 -H gpu-no-such-host1:1," \
        "gpu-no-such-host2:1" in out.stdout
    (note,) = [line for line in out.stdout.splitlines()
               if "LAUNCHER=horovod needs horovodrun" in line]
    assert "run `make horovod`" in note
    assert note.endswith("; a real run stops here (exit 2)")
    real = script("two", tmp_path, "8", "fp32", **knobs)
    assert real.returncode == exit_status.CONFIG
    assert "LAUNCHER=horovod needs horovodrun" in real.stderr
