"""The doctor's console path for real on this machine (trainer processes,
2 workers, Horovod if its venv exists)."""

import sys

import pytest

from official_bench.doctor import report
from support.helpers import REPO, cli_env
from support.line_gaps import MAX_SILENCE, timed_lines


@pytest.mark.slow
def test_doctor_cpu_subset_for_real(tmp_path):
    """The console path on this machine: no GPU, so the CPU subset runs
    (quick: fp32, mirrored over 2 CPU devices, 2 workers, Horovod if its
    venv exists) and every GPU check is a SKIP naming the reason; never
    more than MAX_SILENCE s without a line (the probe's import included)."""
    out = tmp_path / "report.json"
    p = timed_lines(
        [sys.executable, "-m", "official_bench.doctor", "--quick",
         f"--workdir={tmp_path}", f"--output={out}"], timeout=900, cwd=REPO,
        env=cli_env({"CUDA_VISIBLE_DEVICES": ""}))
    assert p.returncode == 0, p.text[-4000:]
    assert p.longest_gap() <= MAX_SILENCE, p.describe_gap()
    doc = report.load(str(out))
    assert doc["complete"] and doc["exit_status"] == 0
    rows = {c["name"]: c for c in doc["checks"]}
    assert rows["tensorflow"]["result"] == "PASS"
    assert rows["gpus"]["result"] == "SKIP"
    reason = doc["gpu_checks_skipped"]
    assert reason.startswith("no GPU visible to TensorFlow: ")
    gpu_rows = [c for c in doc["checks"] if c["device"] == "gpu"]
    assert gpu_rows and all(c["result"] == "SKIP" and c["detail"] == reason
                            for c in gpu_rows)
    for name in ("cpu-fp32-xla_off", "cpu-mirrored-2dev",
                 "cpu-multi_worker-2x1"):
        assert rows[name]["result"] == "PASS", rows[name]
        assert rows[name]["data"]["examples_per_second"] > 0
    assert "devices CPU:0,CPU:1" in rows["cpu-mirrored-2dev"]["detail"]
    assert "; float32;" in rows["cpu-fp32-xla_off"]["detail"]
    mw = rows["cpu-multi_worker-2x1"]
    assert "replicas 2" in mw["detail"] and "threads w0 " in mw["detail"]
    assert all(len(v) >= 2 for v in mw["data"]["threads"].values())
    assert rows["cpu-horovod-2rank"]["result"] in ("PASS", "SKIP")
    if rows["cpu-horovod-2rank"]["result"] == "SKIP":
        assert "Horovod venv" in rows["cpu-horovod-2rank"]["detail"]
    # The table on stdout: one row per check, then the summary.
    for name, row in rows.items():
        assert any(l.split()[:2] == [name, row["result"]]
                   for l in p.text.splitlines()), name
    assert f"GPU checks skipped: {reason}" in p.text
    assert p.text.count(reason) == 1  # said once; the rows say "no GPU"
    table = p.text[p.text.index("check "):].splitlines()
    assert max(len(line) for line in table[:-1]) <= 100  # but "written to"
    assert "[1/" in p.text and ": running (timeout 300 s)" in p.text
