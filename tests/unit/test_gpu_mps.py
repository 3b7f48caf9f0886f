"""scripts/lib/gpu_stage.sh's MPS helpers, which gpu_records_check.sh's
MPS=1 uses, with a stand-in nvidia-cuda-mps-control: the daemon started
with its pipes in the folder given, stopped ('quit' on its pipe) by the
EXIT trap when the script fails after starting it; a missing binary or a
daemon that does not start is a line and status 1, with nothing to stop;
and gpu_records_check.sh's refusal of a worker count or a decode it cannot
use, before it makes anything."""

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
                        "not a decode (cpu, cpu_window, gpu or "
                        "gpu_trainer, space-"
                        'separated: DECODES="gpu_trainer gpu")\n')
    # a decode's own worker counts are checked as WORKERS' are
    p = run({"DECODES": "gpu_trainer gpu", "WORKERS_gpu_trainer": "15,8"})
    assert p.returncode == 2 and "'15,8' is not a worker count" in p.stderr
    assert not (tmp_path / "out").exists()
