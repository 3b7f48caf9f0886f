"""scripts/lib/gpu_stage.sh's MPS helpers, which gpu_records_check.sh's
MPS=1 uses, with a stand-in nvidia-cuda-mps-control: the daemon started
with its pipes in the folder given, stopped ('quit' on its pipe) by the
EXIT trap when the script fails after starting it; a missing binary or a
daemon that does not start is a line and status 1, with nothing to stop;
and gpu_records_check.sh's refusal of a worker count, a decode or a
gpu_trainer share it cannot use, before it makes anything; a share's case,
named by it, over a stand-in interpreter."""

import os
import subprocess

import pytest

from support.helpers import REPO, cli_env

# Records each call: its arguments, its pipe folder and what came on stdin.
CONTROL = """#!/usr/bin/env bash
input=$([ "$1" = -d ] || cat)
echo "$* pipe=$CUDA_MPS_PIPE_DIRECTORY stdin=$input" >> "$CALLS"
exit "${FAIL:-0}"
"""
SCRIPT = """
source "$LIB"
trap 'mps_stop; echo "$mps_line"' EXIT
mps_start "$MPS_DIR"; status=$?
echo "$mps_line (status $status)"
[ "$status" = 0 ] && echo "case env: $mps_pipe"
exit 3
"""


def _run(tmp_path, control=True, fail=0):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if control:
        tool = bin_dir / "nvidia-cuda-mps-control"
        tool.write_text(CONTROL)
        tool.chmod(0o755)
    calls = tmp_path / "calls"
    p = subprocess.run(
        ["bash", "-c", SCRIPT], capture_output=True, text=True, timeout=30,
        env=cli_env({"LIB": os.path.join(REPO, "scripts", "lib",
                                         "gpu_stage.sh"),
                     "MPS_DIR": str(tmp_path / "mps"), "CALLS": str(calls),
                     "FAIL": str(fail), "PATH": f"{bin_dir}:/usr/bin:/bin"}))
    assert p.returncode == 3, p.stderr
    return (p.stdout.splitlines(),
            calls.read_text().splitlines() if calls.exists() else [])


def test_the_daemon_starts_in_its_folder_and_the_exit_trap_stops_it(
        tmp_path):
    out, calls = _run(tmp_path)
    pipe = tmp_path / "mps" / "pipe"
    assert out == [f"MPS: control daemon started, pipes in {pipe} (status 0)",
                   f"case env: {pipe}", "MPS: control daemon stopped"]
    assert calls == [f"-d pipe={pipe} stdin=", f" pipe={pipe} stdin=quit"]
    assert (tmp_path / "mps" / "log").is_dir()


def test_no_binary_or_no_daemon_is_a_line_and_nothing_to_stop(tmp_path):
    out, calls = _run(tmp_path, control=False)
    absent = "MPS: nvidia-cuda-mps-control is absent here (no MPS runs)"
    assert out == [absent + " (status 1)", absent]
    assert calls == []
    (tmp_path / "bin").rename(tmp_path / "bin0")
    out, calls = _run(tmp_path, fail=1)
    log = tmp_path / "mps" / "log"
    failed = f"MPS: the control daemon did not start (its log: {log})"
    assert out == [failed + " (status 1)", failed]
    assert calls == [f"-d pipe={tmp_path / 'mps' / 'pipe'} stdin="]


@pytest.mark.parametrize("env", [{"WORKERS": "8,15"},
                                 {"WORKERS": "8 15", "MPS_WORKERS": "0"}])
def test_a_worker_count_it_cannot_use_is_refused_first(tmp_path, env):
    p = subprocess.run(
        ["bash", os.path.join(REPO, "scripts", "gpu_records_check.sh"),
         str(tmp_path / "out")], capture_output=True, text=True, timeout=30,
        env=cli_env(env))
    assert p.returncode == 2
    bad = (env.get("MPS_WORKERS") or env["WORKERS"])
    assert p.stderr == (f"gpu_records_check.sh: WORKERS/MPS_WORKERS: '{bad}' "
                        "is not a worker count (a positive integer or auto, "
                        'space-separated: WORKERS="8 15")\n')
    assert not (tmp_path / "out").exists()


def test_a_decode_it_does_not_know_is_refused_first(tmp_path):
    def run(env):
        return subprocess.run(
            ["bash", os.path.join(REPO, "scripts", "gpu_records_check.sh"),
             str(tmp_path / "out")], capture_output=True, text=True,
            timeout=30, env=cli_env(env))
    p = run({"DECODES": "gpu_trainer nvjpeg"})
    assert p.returncode == 2
    assert p.stderr == ("gpu_records_check.sh: DECODES/DECODE: 'nvjpeg' is "
                        "not a decode (cpu, cpu_window, gpu, gpu_trainer or "
                        "gpu_trainer:SHARE, space-separated: "
                        'DECODES="gpu_trainer gpu gpu_trainer:0.5")\n')
    # a share is gpu_trainer's, from 0.01 to 0.99
    assert "'gpu:0.5' is not a decode" in run({"DECODES": "gpu:0.5"}).stderr
    for share in ("1.5", "0.0", "0.125", "half"):
        p = run({"DECODE": f"gpu_trainer:{share}"})
        assert p.returncode == 2 and p.stderr == (
            f"gpu_records_check.sh: DECODES/DECODE: 'gpu_trainer:{share}': "
            "the share is not 0.01 to 0.99 with at most two decimals "
            "(gpu_trainer:0.5: train_dataset.worker_decode_share=0.5)\n")
    # a decode's own worker counts are checked as WORKERS' are
    p = run({"DECODES": "gpu_trainer gpu", "WORKERS_gpu_trainer": "15,8"})
    assert p.returncode == 2 and "'15,8' is not a worker count" in p.stderr
    assert not (tmp_path / "out").exists()


# A stand-in interpreter: logs each call with the run's overrides; the
# /dev/shm probe is told 4 workers fit.
PYTHON = """#!/usr/bin/env bash
echo "$* | ${PARAMS_OVERRIDE:-}" >> "$CALLS"
case "$*" in *auto_workers*) echo "4 4" ;; esac
"""


@pytest.mark.parametrize("decodes, cases", [
    ({"DECODES": "gpu_trainer:0.5 gpu", "WORKERS": "2",
      "WORKERS_gpu_trainer": "3"},
     {"real_gpu_trainer_s50_w3": "num_workers=3,train_dataset.decode="
      "gpu_trainer,train_dataset.worker_decode_share=0.5",
      "real_gpu_w2": "num_workers=2,train_dataset.decode=gpu"}),
    ({"DECODE": "gpu_trainer:0.25"},  # alone, still named by its share
     {"real_gpu_trainer_s25": "num_workers=auto,train_dataset.decode="
      "gpu_trainer,train_dataset.worker_decode_share=0.25"}),
])
def test_a_gpu_trainer_share_is_its_own_case(tmp_path, decodes, cases):
    python = tmp_path / "python"
    python.write_text(PYTHON)
    python.chmod(0o755)
    calls, out = tmp_path / "calls", tmp_path / "out"
    p = subprocess.run(
        ["bash", os.path.join(REPO, "scripts", "gpu_records_check.sh"),
         str(out), "9999"], capture_output=True, text=True, timeout=60,
        env=cli_env(dict(decodes, PYTHON=str(python), CALLS=str(calls),
                         DATA_ROOT=str(tmp_path / "data"), DTYPES="fp32",
                         TEST_NUM="1", BATCH="8")))
    assert p.returncode == 0, p.stdout + p.stderr
    runs = [line.split(" | ") for line in calls.read_text().splitlines()
            if "official_bench.launch single 8 fp32" in line]
    assert [over for _, over in runs] == [""] + [
        f"train_dataset.{want}" for want in cases.values()]
    started = [line.split("START ")[1] for line in
               (out / "summary.txt").read_text().splitlines()
               if "START synthetic" in line or "START real" in line]
    assert started == ["synthetic_fp32"] + [f"{c}_fp32" for c in cases]
