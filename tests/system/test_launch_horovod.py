"""LAUNCHER=horovod in the run scripts: dry runs, bad input, and a run
through a stand-in horovodrun (no TensorFlow, no Horovod needed).

The real horovodrun end to end is in system/test_run_scripts.py
(test_single_node_horovod_end_to_end). Addresses: 10.200.0.0/24 literals
that are never contacted.
"""

import json
import os
import shlex
import subprocess

import pytest

from support import launch_cli
from support.launch_cli import PY

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRAINER = "-m official_bench.classifier_trainer"

# A stand-in horovodrun: prints its arguments and environment, then what
# rank 0 of a real run prints and writes (three TimeHistory lines, result.json
# in --model_dir; rank 1 writes result_rank1.json).
FAKE_HOROVODRUN = (r"""#!/bin/bash
echo "fake horovodrun: $*"
echo "fake env: PATH0=${PATH%%:*} TF_USE_LEGACY_KERAS=$TF_USE_LEGACY_KERAS"
for a in "$@"; do
  case "$a" in --model_dir=*) md="${a#--model_dir=}" ;; esac
done
for s in 0 2 4; do
  echo "[0]<stderr>:I1122 01:00:0$s.000000 1 """
    r"""measure/timing.py:218] TimeHistory:" \
       "0.10 seconds, 80.00 examples/second between steps $s and $((s + 2))"
done
echo '{"fake": "rank 0"}' > "$md/result.json"
echo '{"fake": "rank 1"}' > "$md/result_rank1.json"
""")


@pytest.fixture(autouse=True)
def no_gpu_here(tmp_path_factory, monkeypatch):
    """GPU_IDS stands in for nvidia-smi here, on any machine (a real one
    listing fewer GPUs would refuse 0,1,2,3)."""
    launch_cli.hide_gpus(tmp_path_factory.mktemp("no_gpu"), monkeypatch)


def fake_venv(tmp_path, horovodrun=FAKE_HOROVODRUN):
    """A directory shaped like the Horovod venv: bin/horovodrun, bin/python."""
    venv = tmp_path / "hvd-venv"
    (venv / "bin").mkdir(parents=True)
    for name, text in (("horovodrun", horovodrun),
                       ("python", "#!/bin/sh\nexit 0\n")):
        path = venv / "bin" / name
        path.write_text(text)
        path.chmod(0o755)
    return venv


def clean_env(tmp_path, **knobs):
    """support/launch_cli's clean environment with LAUNCHER=horovod, no
    OB_HOROVOD_VENV of this process, and the interpreter check left on (it
    checks the stand-in venv's python, and one test is about it)."""
    env = {k: v for k, v in launch_cli.clean_env(tmp_path).items()
           if k not in ("PYTHON_CHECK_TIMEOUT", "OB_HOROVOD_VENV")}
    env.update(LAUNCHER="horovod")
    env.update({k.upper(): str(v) for k, v in knobs.items()})
    return env


def script(mode, tmp_path, *args, **knobs):
    return subprocess.run(
        ["bash", os.path.join(REPO, f"run_{mode}_node.sh"), *args],
        cwd=tmp_path, env=clean_env(tmp_path, **knobs), capture_output=True,
        text=True, timeout=60)


def commands(stdout):
    """The dry run's commands, as argument lists."""
    return [shlex.split(line.split("command:", 1)[1])
            for line in stdout.splitlines() if line.strip().startswith(
                "command:")]


def overrides(command):
    arg = next(a for a in command if a.startswith("--params_override="))
    return json.loads(arg.split("=", 1)[1])


# -- dry runs -----------------------------------------------------------------


def test_single_node_cpu_dry_run(tmp_path):
    """CPU: CPU_DEVICES are processes per node, num_gpus=0 in each."""
    venv = fake_venv(tmp_path)
    out = script("single", tmp_path, "4", "fp32", "2", "--dry-run",
                 DEVICE="cpu", CPU_DEVICES="1,2", HOROVOD_VENV=venv)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"launcher: horovod, {venv}/bin/horovodrun (HOROVOD_VENV " \
        "(env HOROVOD_VENV))" in text
    assert "horovodrun hosts: localhost; one process per slot" in text
    cmds = commands(text)
    assert len(cmds) == 4  # 1n1g, 1n2g x 2 runs
    for cmd, np in zip(cmds, (1, 1, 2, 2)):
        assert os.path.basename(cmd[0]) == "timeout"
        assert cmd[1:4] == ["-k", "30s", "3600s"]
        at = cmd.index(f"{venv}/bin/horovodrun")
        assert cmd[at:at + 9] == [
            f"{venv}/bin/horovodrun", "-np", str(np), "-H",
            f"localhost:{np}", "--gloo", f"{venv}/bin/python", "-m",
            "official_bench.classifier_trainer"]
        runtime = overrides(cmd)["runtime"]
        assert runtime == {"distribution_strategy": "horovod", "num_gpus": 0}
    for case in ("1n1g", "1n2g"):
        for i in (1, 2):
            assert f"bz4/{case}/rn50_b4_fp32_{i}.log" in text
            assert f"/result.json -> {tmp_path}/logs/tensorflow/resnet50/" \
                f"bz4/{case}/rn50_b4_fp32_{i}.json" in text
    assert "TF_USE_LEGACY_KERAS=1" in text and f"PATH={venv}/bin:" in text
    assert "barrier" not in text
    assert not (tmp_path / "logs").exists()


def test_single_node_gpu_dry_run(tmp_path):
    """GPUs (GPU_IDS stands in for nvidia-smi): one process per GPU."""
    venv = fake_venv(tmp_path)
    out = script("single", tmp_path, "256", "fp16", "1", "--dry-run",
                 DEVICE="gpu", GPU_IDS="0,1,2,3", HOROVOD_VENV=venv,
                 HOROVODRUN_NETWORK_INTERFACE="eth0")
    assert out.returncode == 0, out.stderr
    assert "gpu_fp16.yaml" in out.stdout and "1n1g, 1n2g, 1n4g" in out.stdout
    for cmd, g in zip(commands(out.stdout), (1, 2, 4)):
        at = cmd.index(f"{venv}/bin/horovodrun")
        assert cmd[at + 1:at + 8] == ["-np", str(g), "-H", f"localhost:{g}",
                                      "--gloo", "--network-interface", "eth0"]
        assert overrides(cmd)["runtime"]["num_gpus"] == 1
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3" in out.stdout


def test_two_node_dry_run_on_node_0(tmp_path):
    venv = fake_venv(tmp_path)
    out = script("two", tmp_path, "256", "fp32", "1", "--dry-run",
                 DEVICE="gpu", GPU_IDS="0,1,2,3", HOROVOD_VENV=venv,
                 NODES="10.200.0.1:2222,10.200.0.2:2222", TASK_INDEX=0,
                 HOROVODRUN_NETWORK_INTERFACE="ib0,eth0",
                 HOROVODRUN_ARGS="--ssh-port 2022 --start-timeout 120")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "horovodrun hosts: 10.200.0.1, 10.200.0.2 (ports of the node " \
        "list are not used" in text
    [cmd] = commands(text)
    at = cmd.index(f"{venv}/bin/horovodrun")
    assert cmd[at:at + 15] == [
        f"{venv}/bin/horovodrun", "-np", "8", "-H",
        "10.200.0.1:4,10.200.0.2:4", "--gloo", "--network-interface", "ib0",
        "--network-interface", "eth0", "--ssh-port", "2022",
        "--start-timeout", "120", f"{venv}/bin/python"]
    runtime = overrides(cmd)["runtime"]
    # two_node_gpu.yaml's worker_hosts/task_index are cleared: horovodrun,
    # not TF_CONFIG, makes the cluster.
    assert runtime["distribution_strategy"] == "horovod"
    assert runtime["worker_hosts"] is None and runtime["task_index"] == -1
    assert runtime["num_gpus"] == 1
    # One launcher: logs of node 0 (no node1/), no barrier, no TF_CONFIG.
    assert "bz256/2n4g/rn50_b256_fp32_1.log" in text
    assert "/result.json ->" in text
    assert "barrier" not in text and "TF_CONFIG" not in text


def test_multi_node_dry_run_mpi_and_slurm(tmp_path):
    """Slurm gives the node list; horovodrun runs from node 0 (no srun)."""
    venv = fake_venv(tmp_path)
    out = script("multi", tmp_path, "--dry-run", DEVICE="cpu",
                 CPU_DEVICES=2, HOROVOD_VENV=venv,
                 HOROVODRUN_CONTROLLER="mpi", TEST_NUM=1,
                 SLURM_JOB_ID=7, SLURM_JOB_NODELIST="gpu[1-3]",
                 SLURMD_NODENAME="gpu1")
    assert out.returncode == 0, out.stderr
    [cmd] = commands(out.stdout)
    at = cmd.index(f"{venv}/bin/horovodrun")
    assert cmd[at + 1:at + 6] == ["-np", "6", "-H",
                                  "gpu1:2,gpu2:2,gpu3:2", "--mpi"]
    assert "3n2g" in out.stdout and "not in a job step" not in out.stdout
    auto = script("multi", tmp_path, "--dry-run", DEVICE="cpu",
                  HOROVOD_VENV=venv, HOROVODRUN_CONTROLLER="auto",
                  TEST_NUM=1, NODES="10.200.0.1,10.200.0.2,10.200.0.3",
                  TASK_INDEX=0)
    [cmd] = commands(auto.stdout)
    at = cmd.index(f"{venv}/bin/horovodrun")
    assert cmd[at + 5] == f"{venv}/bin/python"  # neither --gloo nor --mpi


def test_other_nodes_do_nothing(tmp_path):
    """Started on node 1 too (as with the tf launcher): it says that node
    0's horovodrun starts its ranks, and exits 0 without running anything."""
    venv = fake_venv(tmp_path)
    out = script("two", tmp_path, "4", "--dry-run", DEVICE="cpu",
                 HOROVOD_VENV=venv, NODES="10.200.0.1:1,10.200.0.2:1",
                 TASK_INDEX=1)
    assert out.returncode == 0, out.stderr
    assert "LAUNCHER=horovod: nothing to run on node 1: horovodrun on node " \
        "0 (10.200.0.1) starts the ranks of every node over ssh" in out.stdout
    assert commands(out.stdout) == []
    real = script("two", tmp_path, "4", DEVICE="cpu", HOROVOD_VENV=venv,
                  NODES="10.200.0.1:1,10.200.0.2:1", TASK_INDEX=1)
    assert real.returncode == 0, real.stderr
    assert "nothing to run on node 1" in real.stdout
    assert not (tmp_path / "logs").exists()
    assert not (tmp_path / "model_dir").exists()


def test_default_venv_comes_from_install_script(tmp_path):
    venv = fake_venv(tmp_path)
    out = script("single", tmp_path, "--dry-run", DEVICE="cpu", TEST_NUM=1,
                 OB_HOROVOD_VENV=venv)
    assert out.returncode == 0, out.stderr
    assert f"{venv}/bin/horovodrun (default: scripts/install_horovod.sh " \
        "--print-venv)" in out.stdout


# -- bad input ----------------------------------------------------------------


def test_missing_horovodrun_says_how_to_build_it(tmp_path):
    empty = tmp_path / "no-venv"
    empty.mkdir()
    for knobs, how in (({"HOROVOD_VENV": empty}, "HOROVOD_VENV (env "
                        "HOROVOD_VENV)"),
                       ({"OB_HOROVOD_VENV": empty}, "default: scripts/"
                        "install_horovod.sh --print-venv")):
        for dry in ([], ["--dry-run"]):
            out = script("single", tmp_path, "4", *dry, DEVICE="cpu",
                         **knobs)
            # A dry run shows the commands, with the problem as a note.
            assert out.returncode == (0 if dry else 2), (out.stdout,
                                                         out.stderr)
            assert f"LAUNCHER=horovod needs horovodrun and python in the " \
                f"Horovod venv {empty} ({how}), but {empty}/bin/horovodrun " \
                f"and {empty}/bin/python are not there: run `make horovod`" \
                in (out.stdout if dry else out.stderr)
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("mode, knobs, status, words", [
    ("single", {"TF_CONFIG": json.dumps({"cluster": {"worker": [
        "127.0.0.1:5001"]}, "task": {"type": "worker", "index": 0}})}, 3,
     "LAUNCHER=horovod does not use it"),
    ("two", {"NODES": "10.200.0.1:1,10.200.0.1:2", "TASK_INDEX": 0}, 3,
     "host 10.200.0.1 appears twice"),
    ("single", {"PARAMS_OVERRIDE": "runtime.distribution_strategy=mirrored"},
     2, "LAUNCHER=horovod runs runtime.distribution_strategy horovod, but "
        "PARAMS_OVERRIDE asks for 'mirrored'"),
    ("single", {"LAUNCHER": "mpirun"}, 2, "not one of: tf, horovod"),
    ("single", {"HOROVODRUN_ARGS": "--ssh-port '22"}, 2, "HOROVODRUN_ARGS"),
])
def test_bad_horovod_input(tmp_path, mode, knobs, status, words):
    venv = fake_venv(tmp_path)
    out = script(mode, tmp_path, "4", "--dry-run", DEVICE="cpu",
                 HOROVOD_VENV=venv, **knobs)
    assert out.returncode == status, (out.stdout, out.stderr)
    assert words in out.stderr


# -- a run through the stand-in horovodrun ------------------------------------


def test_run_through_fake_horovodrun(tmp_path):
    """The launcher runs horovodrun once per run under `timeout -k`, with the
    venv first on PATH and tf-keras selected; the log holds what horovodrun
    printed; rank 0's result.json is copied next to it."""
    venv = fake_venv(tmp_path)
    out = script("single", tmp_path, "4", "fp32", "2", DEVICE="cpu",
                 CPU_DEVICES=2, HOROVOD_VENV=venv,
                 PYTHON_CHECK_TIMEOUT=0)  # the stand-in python is no Python
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert "done: 2 of 2 run(s) ok" in out.stdout
    case = tmp_path / "logs/tensorflow/resnet50/bz4/1n2g"
    assert sorted(p.name for p in case.iterdir()) == [
        "rn50_b4_fp32_1.json", "rn50_b4_fp32_1.log",
        "rn50_b4_fp32_1.log.status.json", "rn50_b4_fp32_2.json",
        "rn50_b4_fp32_2.log", "rn50_b4_fp32_2.log.status.json"]
    for i in (1, 2):
        text = (case / f"rn50_b4_fp32_{i}.log").read_text()
        assert f"fake horovodrun: -np 2 -H localhost:2 --gloo " \
            f"{venv}/bin/python {TRAINER}" in text
        assert f"fake env: PATH0={venv}/bin TF_USE_LEGACY_KERAS=1" in text
        assert text.count("TimeHistory:") == 3
        assert "# horovodrun: localhost:2 (2 ranks; rank r's lines start " \
            "with [r])" in text
        assert f"1n2g run {i} ok (exit 0)" in text
        assert json.loads((case / f"rn50_b4_fp32_{i}.json").read_text()) == \
            {"fake": "rank 0"}


def test_ranks_python_is_checked_before_any_run(tmp_path):
    """LAUNCHER=horovod checks the ranks' python (HOROVOD_VENV/bin/python),
    not the launcher's: here one without site-packages (no horovod either)."""
    venv = fake_venv(tmp_path)
    (venv / "bin" / "python").write_text(f"#!/bin/sh\nexec {PY} -S \"$@\"\n")
    out = script("single", tmp_path, "4", "fp32", "1", DEVICE="cpu",
                 HOROVOD_VENV=venv)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    assert f"the trainer's Python {venv}/bin/python (the Horovod venv's " \
        "python, LAUNCHER=horovod) (Python " in out.stderr
    assert "absl (pip absl-py), yaml (pip pyyaml), horovod; fix: run `make " \
        "horovod`" in out.stderr
    assert not (tmp_path / "logs").exists()
