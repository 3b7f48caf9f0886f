"""The run scripts' command line: knobs, --help, --dry-run, bad input.

Everything here runs without TensorFlow (the launcher never imports it),
except the last test, which starts one real trainer that gets stopped.
Addresses: 127.0.0.1 and 10.200.0.0/24 literals that are never contacted.
"""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from official_bench.contracts import exit_status
from official_bench.launch import settings as settings_lib
from support.helpers import free_ports
from support.launch_cli import (
    PY,
    SCRIPTS,
    clean_env,
    fake_smi,
    hide_gpus,
    script,
)

REPO = os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
@pytest.fixture(autouse=True)
def no_gpu_here(tmp_path_factory, monkeypatch):
    hide_gpus(tmp_path_factory.mktemp("no_gpu"), monkeypatch)


# -- settings -----------------------------------------------------------------


def test_precedence_command_line_env_default():
    s = settings_lib.parse(["256", "--test-num", "3"],
                           environ={"BATCH": "64", "DTYPE": "fp16",
                                    "TEST_NUM": "9"}, mode="single")
    assert (s.batch, s.dtype, s.test_num) == (256, "fp16", 3)
    assert s.source("batch") == "command line"
    assert s.source("dtype") == "env DTYPE"
    assert s.source("sleep_seconds") == "default" and s.sleep_seconds == 5.0


def test_dtype_aliases_and_lists():
    s = settings_lib.parse(["--dtype", "bfloat16", "--gpus", "1, 2,4"],
                           environ={}, mode="single")
    assert s.dtype == "bf16" and s.gpus == [1, 2, 4]


@pytest.mark.parametrize("env, words", [
    ({"TEST_NUM": "five"}, "TEST_NUM='five' (env TEST_NUM) is not a positive"),
    ({"BATCH": "0"}, "BATCH='0'"),
    ({"DTYPE": "fp8"}, "not one of: fp32, fp16, bf16"),
    ({"DTYPE": "fp31"}, "not one of: fp32, fp16, bf16 (did you mean fp32?)"),
    ({"GPUS": "1,x"}, "comma-separated list"),
    ({"WORKER_PORT": "70000"}, "not a port"),
    ({"TASK_INDEX": "-1"}, "an integer >= 0"),
    ({"ON_FAILURE": "retry"}, "continue, stop"),
    ({"DRY_RUN": "maybe"}, "not a boolean"),
    ({"BARRIER_TIMEOUT": "inf"}, "BARRIER_TIMEOUT='inf' (env "
     "BARRIER_TIMEOUT) is not a number of seconds from 0 to 1000000000"),
    ({"SLEEP_SECONDS": "Infinity"}, "SLEEP_SECONDS='Infinity'"),
    ({"RUN_TIMEOUT": "nan"}, "RUN_TIMEOUT='nan'"),
    ({"RUN_TIMEOUT": "0"}, "RUN_TIMEOUT='0' (env RUN_TIMEOUT) is not a "
     "number of seconds above 0, up to 1000000000"),
    ({"RUN_TIMEOUT": "0.0"}, "RUN_TIMEOUT='0.0' (env RUN_TIMEOUT) is not a "
     "number of seconds above 0, up to 1000000000"),
    ({"KILL_AFTER": "1e10"}, "KILL_AFTER='1e10' (env KILL_AFTER) is not a "
     "number of seconds"),
    ({"PEER_TIMEOUT": "-1"}, "PEER_TIMEOUT='-1'"),
])
def test_bad_knob_values(env, words):
    with pytest.raises(settings_lib.SettingsError, match=re.escape(words)):
        settings_lib.parse([], environ=env, mode="two")


@pytest.mark.parametrize("value", ["-1", "abc", "1.0"])
def test_a_malformed_task_index_is_the_node_index_status(tmp_path, value):
    """Exit 3, as an index out of range, with the script's name."""
    out = script("two", tmp_path, "--dry-run", TASK_INDEX=value,
                 NODES="10.200.0.1:1,10.200.0.2:1")
    assert out.returncode == exit_status.CLUSTER, out.stderr
    assert out.stderr == (f"error: run_two_node.sh: TASK_INDEX={value!r} "
                          "(env TASK_INDEX) is not an integer >= 0\n")
    out = script("two", tmp_path, "--dry-run", TEST_NUM="x")
    assert out.returncode == exit_status.CONFIG


def test_only_settings_reads_the_environment():
    """Environment variables are read in one place: settings.py."""
    folder = os.path.join(REPO, "official_bench", "launch")
    offenders = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and name != "settings.py":
            with open(os.path.join(folder, name)) as f:
                text = f.read()
            if re.search(r"os\.environ|getenv|environ\.get", text):
                offenders.append(name)
    assert offenders == []


def test_help_lists_every_knob_without_tensorflow(tmp_path):
    """Each script's --help lists the knobs it uses (single-node: no node
    list); docs/run_scripts.md has every one (test_help.py)."""
    for mode in SCRIPTS:
        out = script(mode, tmp_path, "--help")
        assert out.returncode == 0, out.stderr
        text = " ".join(out.stdout.split())
        assert f"bash run_{mode}_node.sh [BATCH] [DTYPE] [TEST_NUM]" in text
        for knob in settings_lib.KNOBS:
            if not settings_lib.shown_in_help(knob, mode):
                continue
            if knob.positional:
                assert knob.env in text, knob.env
            else:
                assert f"{knob.flag} " in text, knob.flag
    probe = subprocess.run(
        [PY, "-c", "import sys; from official_bench.launch.__main__ import "
         "main; main(['single', '--dry-run', '--device', 'cpu']); "
         "print('TF', 'tensorflow' in sys.modules)"],
        cwd=REPO, env=clean_env(tmp_path), capture_output=True, text=True,
        timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert "TF False" in probe.stdout


# -- dry runs -----------------------------------------------------------------


def _no_files_written(tmp_path):
    """No run, so no file in the log tree (log, status, claim). The
    folders too are removed by the launcher that ends last
    (test_log_claims.py); not checked here: one made just before the
    other launcher looked, with no claim in it yet, may stay."""
    assert [p for p in (tmp_path / "logs").rglob("*") if not p.is_dir()] \
        == []


def test_single_node_dry_run_on_cpu(tmp_path):
    out = script("single", tmp_path, "8", "fp32", "2", "--dry-run",
                 CPU_DEVICES="1,2", STEPS=30, DEVICE="cpu")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "cpu_smoke.yaml" in text and "1n1g, 1n2g" in text
    for case in ("1n1g", "1n2g"):
        for i in (1, 2):
            assert f"bz8/{case}/rn50_b8_fp32_{i}.log" in text
            assert f"bz8/{case}/rn50_b8_fp32_{i}.json" in text
    assert text.count("timeout -k 30s 3600s") == 4
    assert '"cpu_devices": 2' in text and '"steps": 30' in text
    assert "dry run: nothing was started" in text
    _no_files_written(tmp_path)


def test_data_note_names_the_builder_params_override_chose(tmp_path):
    """Without DATA_DIR the plan says synthetic data only when it is."""
    plain = script("single", tmp_path, "8", "fp32", "1", "--dry-run",
                   DEVICE="cpu")
    assert plain.returncode == 0, plain.stderr
    assert "no DATA_DIR: synthetic data" in plain.stdout
    zmq = script("single", tmp_path, "8", "fp32", "1", "--dry-run",
                 DEVICE="cpu", PARAMS_OVERRIDE="train_dataset.builder=zmq,"
                 "train_dataset.zmq_endpoints=[tcp://127.0.0.1:5555]")
    assert zmq.returncode == 0, zmq.stderr
    assert "no DATA_DIR: train_dataset.builder zmq from PARAMS_OVERRIDE" \
        in zmq.stdout
    assert "synthetic data" not in zmq.stdout


def test_host_that_does_not_resolve_stops_a_run_but_not_a_dry_run(tmp_path):
    """A run refuses at once with exit 3 naming the node (it used to wait
    for the barrier and end 75); a dry run, perhaps on a login node that
    does not know the compute nodes, notes it. '.invalid' never resolves
    (RFC 2606)."""
    knobs = dict(NODES="nosuchhost.invalid:5000,127.0.0.1:5001",
                 TASK_INDEX=1, DEVICE="cpu", BARRIER_TIMEOUT=600)
    dry = script("two", tmp_path, "8", "fp32", "1", "--dry-run", **knobs)
    assert dry.returncode == 0, dry.stderr
    assert "host 'nosuchhost.invalid' does not resolve on this machine" \
        in dry.stdout and "a real run stops here (exit 3)" in dry.stdout
    start = time.monotonic()
    real = script("two", tmp_path, "8", "fp32", "1", **knobs)
    assert real.returncode == exit_status.CLUSTER, real.stderr
    assert "node 0 of NODES" in real.stderr and \
        "nosuchhost.invalid:5000: host 'nosuchhost.invalid' does not " \
        "resolve" in real.stderr
    assert time.monotonic() - start < 60
    _no_files_written(tmp_path)


def test_launchers_sharing_a_machine_split_its_gpus(tmp_path):
    """Two node-list entries on one machine (srun --ntasks-per-node=2, or
    NODES naming it twice) are two launchers that each see all 4 GPUs:
    each takes its own half. Planned on CPU with GPU_IDS standing for the
    visible GPUs."""
    nodes = "127.0.0.1:5000,127.0.0.1:5001"
    for index, ids in ((0, "0,1"), (1, "2,3")):
        out = script("two", tmp_path, "8", "fp32", "1", "--dry-run",
                     NODES=nodes, TASK_INDEX=index, GPU_IDS="0,1,2,3",
                     DEVICE="gpu")
        assert out.returncode == 0, out.stderr
        assert f"env:       CUDA_VISIBLE_DEVICES={ids}" in out.stdout
        assert f"this launcher (#{index}) uses GPU(s) {ids} of the 4 " \
            "visible" in out.stdout
        assert "bz8/2n2g/" in out.stdout and '"num_gpus": 2' in out.stdout
    odd = script("two", tmp_path, "8", "fp32", "1", "--dry-run", NODES=nodes,
                 TASK_INDEX=0, GPU_IDS="0,1,2", DEVICE="gpu")
    assert odd.returncode == exit_status.CONFIG
    assert "2 entries of NODES (env NODES) on this machine share its 3 " \
        "visible GPU(s)" in odd.stderr and "--gpus-per-task" in odd.stderr
    # Slurm bound GPUs per task: what this task sees is its own.
    bound = script("two", tmp_path, "8", "fp32", "1", "--dry-run",
                   NODES=nodes, TASK_INDEX=1, GPU_IDS="6,7", DEVICE="gpu",
                   SLURM_GPUS_PER_TASK="2")
    assert bound.returncode == 0, bound.stderr
    assert "env:       CUDA_VISIBLE_DEVICES=6,7" in bound.stdout
    assert "SLURM_GPUS_PER_TASK=2, so the 2 GPU(s) this task sees are its " \
        "own" in bound.stdout


def test_gpu_planning_without_gpus_via_gpu_ids(tmp_path):
    """GPU_IDS stands in for nvidia-smi: 4 GPUs -> 1, 2, 4 (8 skipped)."""
    out = script("single", tmp_path, "256", "fp16", "1", "--dry-run",
                 DEVICE="gpu", GPU_IDS="0,1,2,3", DATA_DIR="/data/imagenet",
                 NCCL_SOCKET_IFNAME="ib0")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "gpu_fp16.yaml" in text and "1n1g, 1n2g, 1n4g" in text
    assert "skipping 8 GPUs (only 4 visible)" in text
    assert "--data_dir=/data/imagenet" in text
    assert ("CUDA_VISIBLE_DEVICES=0,1,2,3" in text
            and "NCCL_SOCKET_IFNAME=ib0" in text)
    assert '"num_gpus": 4' in text
    bf16 = script("two", tmp_path, "256", "bf16", "--dry-run", DEVICE="gpu",
                  GPU_IDS="0,1", NODES="10.200.0.1:1,10.200.0.2:1",
                  TASK_INDEX=1)
    assert bf16.returncode == 0, bf16.stderr
    assert "two_node_gpu_bf16.yaml" in bf16.stdout and "2n2g" in bf16.stdout
    too_many = script("single", tmp_path, "--dry-run", DEVICE="gpu",
                      GPU_IDS="0", GPUS="1,2")
    assert too_many.returncode == 2
    assert "asks for [2] GPU(s) per node but 1 are visible" in too_many.stderr
    none = script("single", tmp_path, DEVICE="gpu", GPU_IDS="-1")
    assert none.returncode == 2 and "no GPU is visible" in none.stderr


def test_two_node_dry_run_shows_cluster(tmp_path):
    out = script("two", tmp_path, "4", "--dry-run", TEST_NUM=1,
                 NODES="10.200.0.1:2222,10.200.0.2:2222", TASK_INDEX=1)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert ("this node: index 1 = 10.200.0.2:2222 "
            "(TASK_INDEX (env TASK_INDEX))") in text
    assert ('TF_CONFIG for the trainer: {"cluster": {"worker": '
            '["10.200.0.1:2222", "10.200.0.2:2222"]}, "task": {"type": '
            '"worker", "index": 1}}') in text
    assert "barrier: node 0's launcher at 10.200.0.1:2223" in text
    assert "bz4/2n1g/node1/rn50_b4_fp32_1.log" in text
    assert "result_worker1.json" in text
    assert '"distribution_strategy": "multi_worker_mirrored"' in text
    assert '"worker_hosts": "10.200.0.1:2222,10.200.0.2:2222"' in text


def test_slurm_dry_run(tmp_path):
    out = script("multi", tmp_path, "--dry-run", TEST_NUM=1, WORKER_PORT=3333,
                 SLURM_JOB_ID=7, SLURM_JOB_NODELIST="gpu[1-3]",
                 SLURM_NTASKS=3, SLURMD_NODENAME="gpu2", SLURM_NODEID=1)
    assert out.returncode == 0, out.stderr
    assert "nodes: gpu1:3333,gpu2:3333,gpu3:3333 (from Slurm " \
        "SLURM_JOB_NODELIST='gpu[1-3]')" in out.stdout
    assert "index 1 = gpu2:3333 (SLURMD_NODENAME='gpu2')" in out.stdout
    assert "3n1g" in out.stdout


def test_tf_config_wins_and_is_logged(tmp_path):
    tf_config = json.dumps({"cluster": {"worker": ["127.0.0.1:5001",
                                                   "127.0.0.1:5002"]},
                            "task": {"type": "worker", "index": 1}})
    out = script("two", tmp_path, "--dry-run", TF_CONFIG=tf_config,
                 NODES="10.200.0.1:1,10.200.0.2:1", TASK_INDEX=0)
    assert out.returncode == 0, out.stderr
    assert "TF_CONFIG is set and wins" in out.stdout
    assert "index 1 = 127.0.0.1:5002 (TF_CONFIG task)" in out.stdout
    assert f"TF_CONFIG for the trainer: {tf_config} (from the environment)" \
        in out.stdout
    single = script("single", tmp_path, "--dry-run", TF_CONFIG=tf_config)
    assert single.returncode == exit_status.CLUSTER
    assert "runs one node" in single.stderr


# -- bad input ----------------------------------------------------------------


@pytest.mark.parametrize("knobs, status, words", [
    ({"NODES": "10.200.0.1:1,10.200.0.2:1"}, 3,
     "this machine is not in NODES"),
    ({"NODES": "127.0.0.1:5001,127.0.0.1:5001", "TASK_INDEX": 0}, 3,
     "node 127.0.0.1:5001 is listed twice"),
    # The same node under two names (issue 11 §5), with and without
    # TASK_INDEX: names are resolved before any comparison.
    ({"NODES": "localhost:5001,127.0.0.1:5001", "TASK_INDEX": 0}, 3,
     "nodes 0 (localhost:5001) and 1 (127.0.0.1:5001) are the same "
     "machine and port (127.0.0.1:5001)"),
    ({"NODES": "localhost:5001,127.0.0.1:5001"}, 3,
     "are the same machine and port"),
    ({"NODES": "127.0.0.1:5001,localhost:5001", "TASK_INDEX": 1}, 3,
     "are the same machine and port"),
    ({"NODES": "127.0.0.1:5001,10.200.0.2:99999", "TASK_INDEX": 0}, 3,
     "bad port '99999'"),
    ({"NODES": "127.0.0.1:5001,127.0.0.1:5002"}, 3,
     "matches 2 nodes"),
    ({"NODES": "127.0.0.1:5001,127.0.0.1:5002,127.0.0.1:5003",
      "TASK_INDEX": 0}, 3, "needs 2 nodes"),
    ({}, 3, "needs a node list: set NODES"),
    ({"NODES": "127.0.0.1:5001,127.0.0.1:5002", "TASK_INDEX": 0,
      "BARRIER_PORT": 5002}, 2, "also a trainer port"),
    ({"NODES": "127.0.0.1:5001,127.0.0.1:5002", "TASK_INDEX": 0,
      "PARAMS_OVERRIDE": "train.no_such_key=1"}, 2,
     "train.no_such_key: unknown key"),
    ({"NODES": "127.0.0.1:5001,127.0.0.1:5002", "TASK_INDEX": 0,
      "CONFIG_FILE": "/nonexistent.yaml"}, 2, "does not exist"),
    ({"NODES": "127.0.0.1:5001,127.0.0.1:5002", "TASK_INDEX": 0,
      "CONFIG_FILE": "/"}, 2, "config file / is a directory, not a YAML "
     "file (CONFIG_FILE / CONFIG_DIR)"),
])
def test_bad_input_is_a_clear_error(tmp_path, knobs, status, words):
    start = time.monotonic()
    out = script("two", tmp_path, "4", DEVICE="cpu", **knobs)
    assert out.returncode == status, (out.stdout, out.stderr)
    assert words in out.stderr
    assert time.monotonic() - start < 20
    _no_files_written(tmp_path)


@pytest.mark.parametrize("index, words", [
    (0, "waited 1 s at 'hello'; not arrived: node 1 (127.0.0.1:{w1})"),
    (1, "waited 1 s at 'hello' but the barrier of node 0 (127.0.0.1:{w0}) "
        "at 127.0.0.1:{b} did not answer"),
])
def test_peer_that_never_arrives(tmp_path, index, words):
    w0, w1, b = free_ports(3)
    start = time.monotonic()
    out = script("two", tmp_path, "4", NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}",
                 BARRIER_PORT=b, TASK_INDEX=index, BARRIER_TIMEOUT=1,
                 DEVICE="cpu", PYTHON_CHECK_TIMEOUT=0)  # timing: barrier only
    elapsed = time.monotonic() - start
    assert out.returncode == exit_status.BARRIER_TIMEOUT, (out.stdout,
                                                           out.stderr)
    assert words.format(w0=w0, w1=w1, b=b) in out.stderr
    assert elapsed < 15, elapsed


def _start_pair(tmp_path, knobs0, knobs1, common):
    procs = []
    for index, knobs in enumerate((knobs0, knobs1)):
        args = knobs.pop("args", [])
        env = clean_env(tmp_path, TASK_INDEX=index, **common, **knobs)
        procs.append(subprocess.Popen(
            ["timeout", "-k", "10", "150", "bash", SCRIPTS["two"], *args],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    return [(p.wait(160), p.stdout.read()) for p in procs]


@pytest.mark.multiworker
def test_different_plans_are_refused_on_both_nodes(tmp_path):
    w0, w1, b = free_ports(3)
    common = dict(NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}", BARRIER_PORT=b,
                  BARRIER_TIMEOUT=20, DEVICE="cpu", PYTHON_CHECK_TIMEOUT=0)
    start = time.monotonic()
    (rc0, out0), (rc1, out1) = _start_pair(
        tmp_path, {"args": ["4"]}, {"args": ["8"]}, common)
    assert (rc0, rc1) == (3, 3), (out0, out1)
    for out in (out0, out1):
        assert "node 1 (127.0.0.1:%d) runs a different plan" % w1 in out
    assert time.monotonic() - start < 15


@pytest.mark.multiworker
def test_run_failing_on_one_node_is_reported_on_all(tmp_path):
    """Node 1's trainer fails at once (its PYTHON is `false`); node 0 stops
    its own trainer instead of waiting for the peer, both report both, and
    ON_FAILURE=stop ends both after run 1."""
    w0, w1, b = free_ports(3)
    common = dict(NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}", BARRIER_PORT=b,
                  BARRIER_TIMEOUT=60, PEER_TIMEOUT=120, DEVICE="cpu",
                  TEST_NUM=2, ON_FAILURE="stop", KILL_AFTER=5,
                  PYTHON_CHECK_TIMEOUT=0)  # /bin/false is no Python
    start = time.monotonic()
    (rc0, out0), (rc1, out1) = _start_pair(
        tmp_path, {"args": ["4"]},
        {"args": ["4", "--python", "/bin/false"]}, common)
    elapsed = time.monotonic() - start
    assert (rc0, rc1) == (1, 1), (out0, out1)
    for out in (out0, out1):
        assert re.search(r"2n1g run 1: (this node|node 0 \(.*\)): ABORTED .*"
                         r"stopped because node 1 \(.*\) failed this run "
                         r"\(exit 1\)", out), out
        assert re.search(r"2n1g run 1: (this node|node 1 \(.*\)): FAILED "
                         r"\(exit 1\)", out), out
        assert "ON_FAILURE=stop: stopping after 2n1g run 1" in out
        assert "2n1g run 2: starting" not in out
    assert elapsed < 60, elapsed
    log0 = tmp_path / "logs/tensorflow/resnet50/bz4/2n1g/rn50_b4_fp32_1.log"
    assert "# official_bench.launch: 2n1g run 1 aborted" in log0.read_text()
    assert not log0.with_suffix(".json").exists()


# -- barrier secret (issue 11 §4) ---------------------------------------------


def _stub_trainer(tmp_path):
    """A 'python' that writes the result file the launcher expects and
    exits 0 at once: the barrier flow without TensorFlow."""
    path = tmp_path / "stub_ok.sh"
    path.write_text(
        "#!/bin/bash\nfor a in \"$@\"; do case $a in --model_dir=*) "
        "d=${a#--model_dir=};; esac; done\n"
        "echo '{}' > \"$d/result.json\"; "
        "echo '{}' > \"$d/result_worker1.json\"\n"
        "echo 'stub trainer ok'\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.multiworker
def test_same_secret_on_both_nodes_runs(tmp_path):
    """BARRIER_SECRET_FILE on node 0, BARRIER_SECRET on node 1 (same text):
    the two launchers authenticate, meet before and after each run, and
    report both nodes; the secret is not passed to the trainer."""
    secret = tmp_path / "secret"
    secret.write_text("s3cret-text\n")
    secret.chmod(0o600)
    stub = _stub_trainer(tmp_path)
    w0, w1, b = free_ports(3)
    common = dict(NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}", BARRIER_PORT=b,
                  BARRIER_TIMEOUT=30, DEVICE="cpu", TEST_NUM=2,
                  PYTHON_CHECK_TIMEOUT=0)
    (rc0, out0), (rc1, out1) = _start_pair(
        tmp_path, {"args": ["4", "--python", stub],
                   "BARRIER_SECRET_FILE": secret},
        {"args": ["4", "--python", stub], "BARRIER_SECRET": "s3cret-text"},
        common)
    assert (rc0, rc1) == (0, 0), (out0, out1)
    for out in (out0, out1):
        assert "authenticated (key: BARRIER_SECRET" in out
        assert "is open" not in out
        assert "done: 2 of 2 run(s) ok on every node" in out
        assert "s3cret" not in out
    assert f"barrier: serving on 127.0.0.1:{b} for 2 nodes" in out0
    assert re.search(rf"ports this node opens: barrier {b} on 127\.0\.0\.1; "
                     rf"TensorFlow worker \(gRPC, every interface\) "
                     rf"127\.0\.0\.1:{w0}", out0)
    assert re.search(rf"ports this node opens: TensorFlow worker \(gRPC, "
                     rf"every interface\) "
                     rf"127\.0\.0\.1:{w1} ", out1)


@pytest.mark.multiworker
def test_wrong_secret_on_node_1_is_a_clear_error(tmp_path):
    """Node 1 has another secret: it stops at once (exit 3) saying that
    authentication failed and what to set; node 0 logs the dropped message
    with its address and, as node 1 never joined, ends at its barrier
    timeout (exit 75) without a run."""
    stub = _stub_trainer(tmp_path)
    w0, w1, b = free_ports(3)
    common = dict(NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}", BARRIER_PORT=b,
                  BARRIER_TIMEOUT=8, DEVICE="cpu", PYTHON_CHECK_TIMEOUT=0)
    start = time.monotonic()
    procs = []
    for index, secret in enumerate(("right", "wrong")):
        procs.append(subprocess.Popen(
            ["timeout", "-k", "10", "60", "bash", SCRIPTS["two"], "4",
             "--python", stub], cwd=tmp_path,
            env=clean_env(tmp_path, TASK_INDEX=index, BARRIER_SECRET=secret,
                          **common),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    out1 = procs[1].communicate(timeout=70)[0]
    took1 = time.monotonic() - start
    out0 = procs[0].communicate(timeout=70)[0]
    assert procs[1].returncode == 3, out1
    assert "barrier authentication failed: node 0's key: BARRIER_SECRET; " \
        "this node's key: BARRIER_SECRET" in out1
    assert "Set the same BARRIER_SECRET or BARRIER_SECRET_FILE on every " \
        "node" in out1
    assert took1 < 8 + 5, took1  # not waiting out the barrier timeout
    assert procs[0].returncode == 75, out0
    assert re.search(r"dropped a message from 127\.0\.0\.1:\d+ \(claiming "
                     r"node 1\): authentication failed", out0), out0
    assert f"not arrived: node 1 (127.0.0.1:{w1})" in out0
    assert "stub trainer ok" not in out0 + out1
    _no_files_written(tmp_path)


@pytest.mark.parametrize("env, words", [
    ({"BARRIER_SECRET": "x", "BARRIER_SECRET_FILE": "/etc/hostname"},
     "both BARRIER_SECRET and BARRIER_SECRET_FILE='/etc/hostname'"),
    ({"BARRIER_SECRET_FILE": "/nonexistent/secret"},
     "BARRIER_SECRET_FILE='/nonexistent/secret' (env BARRIER_SECRET_FILE) "
     "cannot be read"),
])
def test_bad_barrier_secret(env, words):
    with pytest.raises(settings_lib.SettingsError, match=re.escape(words)):
        settings_lib.parse([], environ=env, mode="two")


def test_secret_sources_and_slurm_derivation(tmp_path):
    from official_bench.launch import auth
    empty = tmp_path / "empty"
    empty.write_text("\n")
    empty.chmod(0o600)
    with pytest.raises(settings_lib.SettingsError, match="is empty"):
        settings_lib.parse([], environ={"BARRIER_SECRET_FILE": str(empty)},
                           mode="two")
    # Others may read it: refused with the fix, as ssh refuses open keys.
    shared = tmp_path / "shared"
    shared.write_text("abc\n")
    for mode in (0o644, 0o620, 0o604):
        shared.chmod(mode)
        with pytest.raises(settings_lib.SettingsError,
                           match=rf"group or others \(mode {mode:04o}\); "
                                 rf"run: chmod 600 {re.escape(str(shared))}"):
            settings_lib.parse([], environ={"BARRIER_SECRET_FILE":
                                            str(shared)}, mode="two")
    shared.chmod(0o400)
    s = settings_lib.parse([], environ={"BARRIER_SECRET_FILE": str(shared)},
                           mode="two")
    assert auth.key_for(s).key == b"abc"
    s = settings_lib.parse([], environ={"BARRIER_SECRET": " abc \n"},
                           mode="two")
    assert auth.key_for(s).key == b"abc" and "BARRIER_SECRET" not in s.environ
    assert "abc" not in repr(s)
    # Slurm: the same key on every node of a job, another for another job.
    job = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "gpu[1-2]"}
    k1 = auth.key_for(settings_lib.parse([], environ=dict(
        job, SLURMD_NODENAME="gpu1", SLURM_NODEID="0"), mode="two"))
    k2 = auth.key_for(settings_lib.parse([], environ=dict(
        job, SLURMD_NODENAME="gpu2", SLURM_NODEID="1"), mode="two"))
    k3 = auth.key_for(settings_lib.parse([], environ=dict(
        job, SLURM_JOB_ID="43"), mode="two"))
    assert k1.key == k2.key != k3.key and not k1.open and not k1.secret
    assert "not secret" in k1.source
    # An explicit secret wins over the job's.
    k4 = auth.key_for(settings_lib.parse([], environ=dict(
        job, BARRIER_SECRET="abc"), mode="two"))
    assert k4.key == b"abc" and k4.secret
    assert auth.key_for(settings_lib.parse([], environ={}, mode="two")).open


# -- stopping trainers --------------------------------------------------------


def _stubborn_trainer(tmp_path):
    """A 'python' that ignores SIGTERM like a lone TF worker
    (docs/design.md)."""
    path = tmp_path / "stubborn.sh"
    path.write_text("#!/bin/bash\necho $$ > \"$STUBBORN_PID\"\n"
                    "trap '' TERM\necho 'stubborn trainer started'\n"
                    "for i in $(seq 600); do sleep 0.1; done\n")
    path.chmod(0o755)
    return str(path)


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie awaiting its parent counts as gone.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] == "Z"


def test_run_timeout_escalates_to_sigkill(tmp_path):
    stub = _stubborn_trainer(tmp_path)
    start = time.monotonic()
    out = script("single", tmp_path, "4", "fp32", "2", "--python", stub,
                 DEVICE="cpu", RUN_TIMEOUT=1, KILL_AFTER=1,
                 STUBBORN_PID=tmp_path / "pid", PYTHON_CHECK_TIMEOUT=0)
    elapsed = time.monotonic() - start
    assert out.returncode == exit_status.FAILED, (out.stdout, out.stderr)
    # ON_FAILURE=continue (default): run 2 still ran, and failed the same way.
    assert f"exit {exit_status.KILLED}: killed (SIGKILL)" in out.stdout
    assert out.stdout.count("FAILED (exit 137: killed (SIGKILL))") == 2
    assert "1n1g run 1: failed (exit 137: killed (SIGKILL))" in out.stdout \
        and "1n1g run 2: failed (exit 137: killed (SIGKILL))" in out.stdout
    assert elapsed < 20, elapsed
    log = tmp_path / "logs/tensorflow/resnet50/bz4/1n1g/rn50_b4_fp32_1.log"
    text = log.read_text()
    assert "stubborn trainer started" in text
    assert "# official_bench.launch: 1n1g run 1 failed (exit 137" in text
    assert _gone(int((tmp_path / "pid").read_text()))


def test_interrupted_launcher_stops_its_trainer(tmp_path):
    stub = _stubborn_trainer(tmp_path)
    pid_file = tmp_path / "pid"
    proc = subprocess.Popen(
        ["bash", SCRIPTS["single"], "4", "--python", stub],
        cwd=tmp_path, env=clean_env(tmp_path, DEVICE="cpu", KILL_AFTER=1,
                                    STUBBORN_PID=pid_file,
                                    PYTHON_CHECK_TIMEOUT=0),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    proc.terminate()
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == exit_status.TERMINATED, (out, err)
    assert "interrupted by SIGTERM; trainer stopped" in err
    assert _gone(int(pid_file.read_text()))


def test_ctrl_c_at_the_barrier_says_no_run_started(tmp_path):
    """Node 0 waits at the barrier's hello for a node that never comes;
    Ctrl-C (SIGINT to its process group) ends it with 130, and its line
    says no run started (no trainer was stopped)."""
    w0, w1, b = free_ports(3)
    proc = subprocess.Popen(
        ["bash", SCRIPTS["two"], "4", "fp32", "1"], cwd=tmp_path,
        env=clean_env(tmp_path, DEVICE="cpu", TASK_INDEX=0, BARRIER_PORT=b,
                      NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        for line in proc.stdout:
            if "barrier: waiting up to" in line:
                break
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == exit_status.INTERRUPTED, (out, err)
    assert err.strip().splitlines()[-1] == \
        "[launch node 0/2] interrupted by SIGINT; no run started; no other " \
        "node had reached the barrier"


# -- WORKERS_PER_NODE ---------------------------------------------------------


def _workers(stdout):
    """The dry run's workers: [(label, address, env dict, command list)]."""
    import shlex
    out, current = [], None
    for line in stdout.splitlines():
        text = line.strip()
        m = re.match(r"^(local worker \d+ \(task \d+\)), (\S+):$", text)
        if m:
            current = [m.group(1), m.group(2), {}, None]
            out.append(current)
        elif current and text.startswith("env:"):
            current[2] = dict(kv.split("=", 1) for kv in
                              shlex.split(text[4:]))
        elif current and text.startswith("command:"):
            current[3] = shlex.split(text[8:])
    return out


def _runtime(command):
    arg = next(a for a in command if a.startswith("--params_override="))
    return json.loads(arg.split("=", 1)[1])["runtime"]


def test_workers_per_node_dry_run_gpu_ids_ports_tasks(tmp_path):
    """2 nodes x 2 workers, node 1's view: one GPU id each (GPU_IDS, faked
    here), consecutive ports, tasks 2 and 3 of 4, logs beside node 1's."""
    out = script("two", tmp_path, "4", "fp32", "1", "--dry-run",
                 NODES="10.200.0.1:5000,10.200.0.2:6000", TASK_INDEX=1,
                 GPU_IDS="3,5", WORKERS_PER_NODE=2)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    cluster = "10.200.0.1:5000,10.200.0.1:5001,10.200.0.2:6000,10.200.0.2:6001"
    assert f"multi_worker_mirrored over 4 tasks: {cluster}" in text
    assert "this node's workers: tasks 2..3 on 10.200.0.2:6000, " \
        "10.200.0.2:6001; CUDA_VISIBLE_DEVICES 3, 5" in text
    assert "barrier: node 0's launcher at 10.200.0.1:5002" in text
    assert "1 run(s) of each of 2n2g" in text
    workers = _workers(text)
    assert [(w[0], w[1], w[2]["CUDA_VISIBLE_DEVICES"]) for w in workers] == [
        ("local worker 0 (task 2)", "10.200.0.2:6000", "3"),
        ("local worker 1 (task 3)", "10.200.0.2:6001", "5")]
    for task, w in zip((2, 3), workers):
        rt = _runtime(w[3])
        assert rt["worker_hosts"] == cluster and rt["task_index"] == task
        assert rt["num_gpus"] == 1
        assert w[3][:4] == [w[3][0], "-k", "30s", "3600s"]  # timeout -k
    case = tmp_path / "logs/tensorflow/resnet50/bz4/2n2g/node1"
    assert f"log:       {case}/rn50_b4_fp32_1.log\n" in text
    assert f"log:       {case}/rn50_b4_fp32_1.log.local1\n" in text
    assert "result_worker2.json" in text and "result_worker3.json" in text


def test_workers_per_node_gpu_ids_from_device_list(tmp_path):
    """No GPU_IDS: a (faked) nvidia-smi lists 4 GPUs, CUDA_VISIBLE_DEVICES
    keeps 2 and 3: single node, one worker on each, 1n2g."""
    env_path = fake_smi(tmp_path, 4)
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 PATH=env_path, CUDA_VISIBLE_DEVICES="2,3",
                 WORKERS_PER_NODE=2, WORKER_PORT=7000)
    assert out.returncode == 0, out.stderr
    assert "1 run(s) of each of 1n2g" in out.stdout
    workers = _workers(out.stdout)
    assert [(w[1], w[2]["CUDA_VISIBLE_DEVICES"], _runtime(w[3])["task_index"])
            for w in workers] == [("127.0.0.1:7000", "2", 0),
                                  ("127.0.0.1:7001", "3", 1)]
    rt = _runtime(workers[0][3])
    assert rt["distribution_strategy"] == "multi_worker_mirrored"
    assert rt["worker_hosts"] == "127.0.0.1:7000,127.0.0.1:7001"


def test_workers_per_node_on_cpu_is_one_device_each(tmp_path):
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 DEVICE="cpu", WORKERS_PER_NODE=3, WORKER_PORT=7100)
    assert out.returncode == 0, out.stderr
    assert "1 run(s) of each of 1n3g" in out.stdout
    workers = _workers(out.stdout)
    assert len(workers) == 3
    for task, w in enumerate(workers):
        rt = _runtime(w[3])
        assert (rt["num_gpus"], rt["cpu_devices"], rt["task_index"]) == \
            (0, 1, task)
        assert "CUDA_VISIBLE_DEVICES" not in w[2]


@pytest.mark.parametrize("mode, knobs, words", [
    ("two", {"NODES": "127.0.0.1:5001,127.0.0.1:5002", "TASK_INDEX": 0,
             "DEVICE": "cpu"},
     "node 1 (127.0.0.1:5002) uses ports 5002..5003, which overlap those of "
     "node 0 (127.0.0.1:5001) on the same host; space the nodes' ports at "
     "least 2 apart"),
    ("single", {"GPU_IDS": "0"}, "runs one worker per GPU, but 1 GPU(s) are "
     "visible (GPU_IDS=0; not checked: nvidia-smi -L failed (exit 6: "
     "No devices were found))"),
    ("single", {"GPU_IDS": "1,1"}, "the GPU ids 1,1 (GPU_IDS or "
     "CUDA_VISIBLE_DEVICES) repeat"),
    ("single", {"GPU_IDS": "0,1,2,3", "GPUS": "1,2"}, "GPUS=1,2 asks for "
     "other cases; unset GPUS (or set GPUS=2)"),
    ("single", {"DEVICE": "cpu", "CPU_DEVICES": "1,2"}, "CPU_DEVICES=1,2 "
     "asks for other cases"),
    ("single", {"DEVICE": "cpu", "LAUNCHER": "horovod"},
     "WORKERS_PER_NODE=2 is for LAUNCHER=tf"),
    ("single", {"DEVICE": "cpu", "TF_CONFIG": json.dumps(
        {"cluster": {"worker": ["127.0.0.1:5001"]},
         "task": {"type": "worker", "index": 0}})}, "unset TF_CONFIG"),
])
def test_workers_per_node_bad_input(tmp_path, mode, knobs, words):
    out = script(mode, tmp_path, "4", "--dry-run", WORKERS_PER_NODE=2,
                 **knobs)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert words in out.stderr
    _no_files_written(tmp_path)


def test_failing_local_worker_stops_its_siblings(tmp_path):
    """WORKERS_PER_NODE=2 with a stand-in trainer: task 1 fails at once,
    task 0 ignores SIGTERM; the launcher kills task 0 (SIGKILL after
    KILL_AFTER) and reports the node's run as failed by local worker 1."""
    stub = tmp_path / "stub.sh"
    stub.write_text(
        "#!/bin/bash\ncase \"$*\" in *'\"task_index\": 1'*) "
        "echo 'Error: task 1 gives up'; exit 5;; esac\n"
        "echo $$ > \"$STUBBORN_PID\"\ntrap '' TERM\n"
        "for i in $(seq 600); do sleep 0.1; done\n")
    stub.chmod(0o755)
    start = time.monotonic()
    out = script("single", tmp_path, "4", "fp32", "1", "--python", str(stub),
                 DEVICE="cpu", WORKERS_PER_NODE=2, KILL_AFTER=1,
                 PYTHON_CHECK_TIMEOUT=0, STUBBORN_PID=tmp_path / "pid")
    elapsed = time.monotonic() - start
    assert out.returncode == 1, (out.stdout, out.stderr)
    case = tmp_path / "logs/tensorflow/resnet50/bz4/1n2g"
    assert "1n2g run 1: FAILED (exit 5): local worker 1 (task 1): Error: " \
        f"task 1 gives up; log {case}/rn50_b4_fp32_1.log.local1" in out.stdout
    chief = (case / "rn50_b4_fp32_1.log").read_text()
    assert "1n2g run 1 aborted (exit 137: killed (SIGKILL); stopped because " \
        "local worker 1 (task 1) of this node failed (exit 5))" in chief
    assert _gone(int((tmp_path / "pid").read_text()))
    assert elapsed < 20, elapsed


@pytest.mark.multiworker
def test_failing_worker_on_one_node_is_reported_on_all(tmp_path):
    """2 nodes x 2 workers with stand-in trainers: task 3 (node 1, local
    worker 1) fails; node 1 kills its task 2, node 0 learns it through the
    barrier and kills tasks 0 and 1; both report node 1's failure."""
    stub = tmp_path / "stub.sh"
    stub.write_text(
        "#!/bin/bash\ncase \"$*\" in *'\"task_index\": 3'*) sleep 1; "
        "echo 'Error: task 3 gives up'; exit 5;; esac\n"
        "echo $$ >> \"$STUBBORN_PID\"\ntrap '' TERM\n"
        "for i in $(seq 600); do sleep 0.1; done\n")
    stub.chmod(0o755)
    while True:  # the stand-ins listen nowhere; ports must only not clash
        w0, w1, b = free_ports(3)
        if abs(w0 - w1) >= 2 and b not in (w0, w0 + 1, w1, w1 + 1):
            break
    common = dict(NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}", BARRIER_PORT=b,
                  BARRIER_TIMEOUT=30, DEVICE="cpu", WORKERS_PER_NODE=2,
                  KILL_AFTER=1, PYTHON_CHECK_TIMEOUT=0,
                  STUBBORN_PID=tmp_path / "pids")
    start = time.monotonic()
    (rc0, out0), (rc1, out1) = _start_pair(
        tmp_path, {"args": ["4", "fp32", "1", "--python", str(stub)]},
        {"args": ["4", "fp32", "1", "--python", str(stub)]}, common)
    assert (rc0, rc1) == (1, 1), (out0, out1)
    for out in (out0, out1):
        assert re.search(r"2n2g run 1: (this node|node 1 \(.*\)): FAILED "
                         r"\(exit 5\): local worker 1 \(task 3\): Error: "
                         r"task 3 gives up", out), out
        assert re.search(r"2n2g run 1: (this node|node 0 \(.*\)): ABORTED ",
                         out), out
    node0 = tmp_path / "logs/tensorflow/resnet50/bz4/2n2g"
    for log in (node0 / "rn50_b4_fp32_1.log",
                node0 / "rn50_b4_fp32_1.log.local1"):
        assert f"stopped because node 1 (127.0.0.1:{w1}) failed this run " \
            "(exit 5)" in log.read_text()
    sibling = (node0 / "node1" / "rn50_b4_fp32_1.log").read_text()
    assert "stopped because local worker 1 (task 3) of this node failed " \
        "(exit 5)" in sibling
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 3 and all(_gone(p) for p in pids)
    assert time.monotonic() - start < 60


def test_two_nodes_with_two_cpu_devices_need_two_workers(tmp_path):
    """multi_worker_mirrored runs one CPU replica per worker: 2n2g on CPU
    would train 1 replica per node under a 2-device label."""
    out = script("two", tmp_path, "4", "--dry-run", TEST_NUM=1, DEVICE="cpu",
                 CPU_DEVICES="2", NODES="10.200.0.1:2222,10.200.0.2:2222",
                 TASK_INDEX=0)
    assert out.returncode == 2
    assert "2n2g: 2 CPU devices per node on 2 nodes needs one worker per " \
        "device: set WORKERS_PER_NODE=2" in out.stderr
    ok = script("two", tmp_path, "4", "--dry-run", TEST_NUM=1, DEVICE="cpu",
                WORKERS_PER_NODE="2", NODES="10.200.0.1:2222,10.200.0.2:3333",
                TASK_INDEX=0)
    assert ok.returncode == 0, ok.stderr


def test_failed_run_footer_is_not_a_measurement(tmp_path):
    """A trainer killed right after a TimeHistory line: the launcher's footer
    must not quote it, or DLPerf's extractor counts that interval twice."""
    from official_bench.extract import logparse
    stub = tmp_path / "dies.sh"
    stub.write_text(
        "#!/bin/bash\n"
        "echo 'I1123 10:00:00.000000 1 measure/timing.py:1] TimeHistory: 2.00 "
        "seconds, 8.00 examples/second between steps 0 and 2'\n"
        "echo 'I1123 10:00:02.000000 1 measure/timing.py:1] TimeHistory: 2.00 "
        "seconds, 8.00 examples/second between steps 2 and 4'\n"
        "kill -9 $$\n")
    stub.chmod(0o755)
    out = script("single", tmp_path, "4", "fp32", "1", "--python", str(stub),
                 DEVICE="cpu", PYTHON_CHECK_TIMEOUT=0)
    assert out.returncode == 1, (out.stdout, out.stderr)
    log = tmp_path / "logs/tensorflow/resnet50/bz4/1n1g/rn50_b4_fp32_1.log"
    text = log.read_text()
    footer = [l for l in text.splitlines()
              if l.startswith("# official_bench.launch: 1n1g run 1 failed")]
    assert footer and "the last logged interval ended at step 4" in footer[0]
    # DLPerf-style counting and our parser each see the two intervals once.
    assert sum("TimeHistory" in l for l in text.splitlines()) == 2
    assert sum("examples/second" in l for l in text.splitlines()) == 2
    assert len(logparse.parse_log_file(str(log)).intervals) == 2
    # The launcher's status record says what the log cannot.
    status = json.loads((tmp_path / "logs/tensorflow/resnet50/bz4/1n1g/"
                         "rn50_b4_fp32_1.log.status.json").read_text())
    assert (status["status"], status["exit"], status["signal"]) == \
        ("failed", 137, "SIGKILL")
    assert status["ended"] >= status["started"] > 0


def test_gpus_without_a_visible_gpu_is_refused_unless_device_cpu(tmp_path):
    """GPUS asks for GPUs: on a machine without one that is an error, as
    DEVICE=gpu is (a dry run only notes it: test_dry_run_anywhere.py);
    DEVICE=cpu runs the CPU plan and says that GPUS is not used."""
    out = script("single", tmp_path, "4", "fp32", "1", "--gpus", "8",
                 TEST_NUM=1, PATH=fake_smi(tmp_path, 0))
    assert out.returncode == exit_status.CONFIG, out.stdout + out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        "error: run_single_node.sh: GPUS=8 (command line) asks for GPUs, "
        "but no GPU is visible (nvidia-smi -L lists 0); unset GPUS for a "
        "CPU run (CPU_DEVICES sets its cases), or set DEVICE=cpu")
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 DEVICE="cpu", GPUS="8")
    assert out.returncode == 0, out.stderr
    assert "1 run(s) of each of 1n1g" in out.stdout
    assert "note: DEVICE=cpu: GPUS=8 (env GPUS) not used" in out.stdout


def test_gpu_ids_are_checked_against_nvidia_smi_where_it_answers(tmp_path):
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 GPU_IDS="0,1", GPUS="2")
    assert out.returncode == 0, out.stderr
    assert "2 GPU(s) visible (GPU_IDS=0,1; not checked: nvidia-smi -L " \
        "failed (exit 6: No devices were found))" in out.stdout
    path = fake_smi(tmp_path, 2)
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 GPU_IDS="1,GPU-fake0", GPUS="2", PATH=path)
    assert out.returncode == 0, out.stderr
    assert "2 GPU(s) visible (GPU_IDS=1,GPU-fake0, checked: nvidia-smi -L " \
        "lists 2)" in out.stdout
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 GPU_IDS="0,5,GPU-nope", PATH=path)
    assert out.returncode == exit_status.CONFIG, out.stdout + out.stderr
    assert "GPU_IDS='0,5,GPU-nope' (env GPU_IDS) names 5, GPU-nope, which " \
        "nvidia-smi -L does not list: it lists 2 GPU(s), indices 0-1" \
        in out.stderr
