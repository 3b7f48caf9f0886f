"""benchmarks/gpu_decode_probe.py's processes and trainer stages on
nvImageCodec's CPU decoder (trainer_decode at worker shares too), its
refusal of bad counts and shares, and
scripts/gpu_decode_probe.sh's knobs and MPS daemon with stand-ins for
Python and nvidia-cuda-mps-control (the probe's other stages:
test_gpu_speed_scripts.py)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from support.helpers import REPO, cli_env, load_script

PROBE = os.path.join(REPO, "benchmarks", "gpu_decode_probe.py")
SCRIPT = os.path.join(REPO, "scripts", "gpu_decode_probe.sh")


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    from support.natural_images import natural_jpeg
    folder = tmp_path_factory.mktemp("jpegs")
    for k in range(4):
        (folder / f"{k}.JPEG").write_bytes(natural_jpeg(k, 300, 200))
    return folder


def _probe(jpegs, out, *args):
    """The probe on the CPU decoder: its stdout and its JSON rows."""
    p = subprocess.run(
        [sys.executable, PROBE, "--image_dir", str(jpegs), "--batch", "4",
         "--sweep_seconds", "0.3", "--decoders", "cpu", "--worker_decoders",
         "nvimgcodec_cpu", "--json", str(out), *args],
        env=cli_env({"PYTHONPATH": REPO}), capture_output=True, text=True,
        timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p.stdout, json.loads(out.read_text())["rows"]


def test_the_processes_stage_times_each_count_at_once(jpegs, tmp_path):
    stdout, rows = _probe(jpegs, tmp_path / "probe.json", "--stages",
                          "processes", "--processes", "1,2", "--jax_step")
    assert [r["decoder"] for r in rows] == [
        "worker path, nvimgcodec_cpu, 32 a call, 1 process",
        "worker path, nvimgcodec_cpu, 32 a call, 2 processes"]
    for n, row in zip([1, 2], rows):
        assert row["processes"] == n and row["errors"] == []
        assert len(row["img_s_each"]) == len(row["cpu_ms_each"]) == n
        assert min(row["img_s_each"]) > 0 and row["failed"] == 0
        assert row["img_s"] == pytest.approx(sum(row["img_s_each"]),
                                             rel=0.01)
        assert row["images"] % 32 == 0 and row["cpu_ms_per_image"] > 0
        assert row["step_ms_alone"] > 0 and row["step_ms_beside"] > 0
    assert "| worker path, nvimgcodec_cpu, 32 a call, 2 processes | " \
        in stdout
    assert " beside them |" in stdout
    assert [r["waits"] for r in rows] == [["CUDA's default"]] * 2


def test_blocking_sync_is_set_in_each_process_or_says_why(jpegs, tmp_path):
    stdout, rows = _probe(jpegs, tmp_path / "probe.json", "--stages",
                          "processes", "--processes", "2", "--blocking_sync",
                          "--label", "blocking sync")
    row, = rows
    assert row["decoder"] == ("worker path, nvimgcodec_cpu, 32 a call, 2 "
                              "processes, blocking sync")
    assert row["errors"] == [] and row["images"] > 0
    # no GPU here: each process says, once, why its waits could not block
    # (on a GPU machine, "blocking sync")
    waits, = row["waits"]
    if os.path.exists("/dev/nvidiactl"):
        assert waits == "blocking sync"
    else:
        assert waits.startswith("blocking sync not set: no CUDA driver "
                                "library (libcuda.so.1")
    assert f"; {waits} |" in stdout


def test_the_trainer_stages_add_their_rows_to_the_file(jpegs, tmp_path):
    out = tmp_path / "probe.json"
    out.write_text(json.dumps({"rows": [{"decoder": "earlier"}]}))
    stdout, rows = _probe(jpegs, out, "--stages", "trainer,trainer_decode",
                          "--trainer_threads", "1,2", "--append")
    decode = "trainer decode, nvimgcodec_cpu, 4 a batch, 2 threads, "
    assert [r["decoder"] for r in rows] == [
        "earlier", "trainer path, nvimgcodec_cpu, 4 a call, 1 thread",
        "trainer path, nvimgcodec_cpu, 4 a call, 2 threads",
        decode + "serial, before", decode + "pipelined, TrainerDecode",
        decode + "pipelined, TrainerDecode, default stream"]
    for row in rows[1:]:
        assert row["img_s"] > 0 and row["failed"] == 0
        assert row["images"] % 4 == 0 and row["images"] > 0
    assert all(row["decode_ms_per_image"] > 0 for row in rows[1:3])
    for row in rows[4:]:
        assert row["ratio"] == row["img_s"] / rows[3]["img_s"]
    assert "earlier" not in stdout and "decode call " in stdout
    assert " x the serial row's img/s |" in stdout


def test_the_trainer_decode_stage_times_each_worker_share(jpegs, tmp_path):
    from official_bench.data.records import host_decode, packed_batch
    stdout, rows = _probe(jpegs, tmp_path / "probe.json", "--stages",
                          "trainer_decode", "--trainer_threads", "2",
                          "--worker_shares", "0,0.5")
    decode = "trainer decode, nvimgcodec_cpu, 4 a batch, 2 threads, "
    assert [(r["decoder"], r["worker_share"]) for r in rows] == [
        (decode + "serial, before", 0.0),
        (decode + "pipelined, TrainerDecode", 0.0),
        (decode + "pipelined, TrainerDecode, default stream", 0.0),
        (decode + "serial, before, worker share 0.5", 0.5),
        (decode + "pipelined, TrainerDecode, worker share 0.5", 0.5)]
    assert all(r["img_s"] > 0 and r["images"] % 4 == 0 for r in rows)
    # at 0.5 the packed batches hold every other JPEG
    probe = load_script("benchmarks", "gpu_decode_probe.py")
    images = [((jpegs / f"{k}.JPEG").read_bytes(), (0, 0, 200, 300))
              for k in range(4)]
    for share, sent in ((0.0, 4), (0.5, 2)):
        for packed, _ in probe.packed_batches("nvimgcodec_cpu", images, 4,
                                              share=share):
            items, _ = packed_batch.unpack(packed)
            assert sum(isinstance(i, host_decode.Pending)
                       for i in items) == sent


@pytest.mark.parametrize("flag,value", [("--processes", "0"),
                                        ("--processes", "x"),
                                        ("--trainer_threads", "2,,4"),
                                        ("--worker_shares", "0,1"),
                                        ("--worker_shares", "half")])
def test_a_bad_count_is_refused_naming_its_flag(flag, value, capsys):
    probe = load_script("benchmarks", "gpu_decode_probe.py")
    with pytest.raises(SystemExit) as e:
        probe.main(["--image_dir", "unread", flag, value])
    assert e.value.code == 2
    assert f"argument {flag}: {value!r} is not a comma-separated list" in \
        capsys.readouterr().err


# Stand-ins: a Python that records its arguments, makes the JPEG folder
# (and, for the MPS stage with KILL set, ends the script as a signal
# would), and the MPS control.
PYTHON = """#!/usr/bin/env bash
echo "python pipe=${CUDA_MPS_PIPE_DIRECTORY:-} $*" >> "$CALLS"
case "$1" in *make_jpeg_folder.py) mkdir -p "$2" ;; esac
case "$*" in *"--label MPS"*) [ -n "${KILL:-}" ] && kill -TERM $PPID ;; esac
exit 0
"""
MPS_CONTROL = """#!/usr/bin/env bash
if [ $# -gt 0 ]; then echo "mps $* pipe=$CUDA_MPS_PIPE_DIRECTORY" >> "$CALLS"
else echo "mps $(cat)" >> "$CALLS"; fi
"""


def _script(tmp_path, mps_control=True, budget=200, **env):
    """gpu_decode_probe.sh with the stand-ins: (exit code, calls, summary)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_ins = {"python": PYTHON}
    if mps_control:
        stand_ins["nvidia-cuda-mps-control"] = MPS_CONTROL
    for name, text in stand_ins.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    calls, out = tmp_path / "calls", tmp_path / "out"
    p = subprocess.run(
        ["bash", SCRIPT, str(out), str(budget)], capture_output=True,
        text=True,
        env=cli_env({"CALLS": str(calls), "PYTHON": str(bin_dir / "python"),
                     "PATH": f"{bin_dir}:{os.environ['PATH']}",
                     "WORKER_DECODERS": "simplejpeg,nvimgcodec_cpu",
                     **env}), timeout=60)
    summary = (out / "summary.txt").read_text()
    return p.returncode, calls.read_text().splitlines(), summary


def _probe_calls(calls):
    return [c for c in calls if "gpu_decode_probe.py" in c or
            c.startswith("mps")]


def test_the_script_passes_its_knobs_and_runs_mps_between(tmp_path):
    rc, calls, summary = _script(tmp_path, MPS="1", PROCESSES="3,5",
                                 TRAINER_THREADS="6")
    assert rc == 0, summary
    processes, trainer, block, mps_start, mps, mps_quit, probe = \
        _probe_calls(calls)
    assert "--processes 3,5 --trainer_threads 6 " in processes
    assert processes.endswith("--stages processes --json "
                              f"{tmp_path}/out/probe.json --append "
                              "--jax_step")
    assert "--stages trainer,trainer_decode " in trainer
    assert trainer.endswith(" --worker_shares 0,0.5")
    assert "pipe= " in trainer
    assert block.endswith("--stages processes --json "
                          f"{tmp_path}/out/probe.json --append --jax_step "
                          "--label blocking sync --blocking_sync "
                          "--processes 5 --worker_decoders nvimgcodec_cpu")
    pipe = mps_start.split("pipe=")[1]
    assert mps_start.startswith("mps -d ") and pipe.startswith("/tmp/")
    assert f"pipe={pipe} " in mps and mps.endswith(
        "--jax_step --label MPS --processes 5 --worker_decoders "
        "nvimgcodec_cpu")
    assert mps_quit == "mps quit" and not os.path.exists(pipe)
    assert "pipe= " in probe and "--stages decoders,worker " in probe
    assert "END processes_mps: exit 0" in summary


def test_a_signal_in_the_mps_stage_still_stops_the_daemon(tmp_path):
    rc, calls, summary = _script(tmp_path, MPS="1", KILL="1", JAX_STEP="0")
    assert rc == 143 and "--jax_step" not in "".join(calls)
    assert [c.split()[0] for c in _probe_calls(calls)] == [
        "python", "python", "python", "mps", "python", "mps"]
    assert _probe_calls(calls)[-1] == "mps quit"


@pytest.mark.skipif(shutil.which("nvidia-cuda-mps-control") is not None,
                    reason="this machine has a real MPS control")
def test_without_the_mps_control_the_stage_is_a_line(tmp_path):
    rc, calls, summary = _script(tmp_path, mps_control=False, MPS="1")
    assert rc == 0
    assert "MPS: nvidia-cuda-mps-control is absent here (no MPS runs)" \
        in summary
    assert not any("--label MPS" in c for c in calls)


def test_with_no_time_for_the_jpegs_the_stages_are_a_line(tmp_path):
    rc, calls, summary = _script(tmp_path, budget=50)
    assert rc == 0 and _probe_calls(calls) == []
    assert "SKIP make_jpegs: " in summary
    assert "SKIP the probe's stages: no JPEGs were made" in summary
