"""benchmarks/gpu_decode_probe.py's processes and trainer stages on
nvImageCodec's CPU decoder and its refusal of bad counts (the probe's
other stages: test_gpu_speed_scripts.py)."""

import json
import os
import subprocess
import sys

import pytest

from support.helpers import REPO, cli_env, load_script

PROBE = os.path.join(REPO, "benchmarks", "gpu_decode_probe.py")


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
                          "processes", "--processes", "1,2")
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
    assert "| worker path, nvimgcodec_cpu, 32 a call, 2 processes | " \
        in stdout


def test_the_trainer_stage_adds_its_rows_to_the_file(jpegs, tmp_path):
    out = tmp_path / "probe.json"
    out.write_text(json.dumps({"rows": [{"decoder": "earlier"}]}))
    stdout, rows = _probe(jpegs, out, "--stages", "trainer",
                          "--trainer_threads", "1,2", "--append")
    assert [r["decoder"] for r in rows] == [
        "earlier", "trainer path, nvimgcodec_cpu, 4 a call, 1 thread",
        "trainer path, nvimgcodec_cpu, 4 a call, 2 threads"]
    for row in rows[1:]:
        assert row["img_s"] > 0 and row["failed"] == 0
        assert row["images"] % 4 == 0 and row["decode_ms_per_image"] > 0
    assert "earlier" not in stdout and "decode call " in stdout


@pytest.mark.parametrize("flag,value", [("--processes", "0"),
                                        ("--processes", "x"),
                                        ("--trainer_threads", "2,,4")])
def test_a_bad_count_is_refused_naming_its_flag(flag, value, capsys):
    probe = load_script("benchmarks", "gpu_decode_probe.py")
    with pytest.raises(SystemExit) as e:
        probe.main(["--image_dir", "unread", flag, value])
    assert e.value.code == 2
    assert f"argument {flag}: {value!r} is not a comma-separated list" in \
        capsys.readouterr().err

