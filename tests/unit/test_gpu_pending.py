"""scripts/gpu_pending.sh, the one call a GPU session runs, with its three
stages replaced by stand-ins that record how they were called (each stage
runs for real in its own tests: test_jax_step_ab.py, the records and probe
scripts' tests): the budget each stage gets, the A/B's defaults and their
override, the A/B skipped with a line when too little is left, and the six
files it packs."""

import os
import shutil
import subprocess
import tarfile

import pytest

from support.helpers import REPO, cli_env

# A stand-in stage: records its name, arguments and knobs, writes the
# files the real one writes.
STAGE = """#!/usr/bin/env bash
echo "$(basename "$0") budget=$2 DECODE=${DECODE:-} DTYPES=${DTYPES:-} \\
STEP_AB_ARGS=${STEP_AB_ARGS:-}" >> "$CALLS"
mkdir -p "$1"
echo "[$(basename "$0" .sh)] ran" > "$1/summary.txt"
for f in $OUTPUTS; do echo x > "$1/$f"; done
"""
OUTPUTS = {"gpu_decode_probe.sh": "probe.json",
           "gpu_records_check.sh": "records_summary.md records_summary.json",
           "gpu_jax_step_ab.sh": "ab_verdicts.md ab.json"}
PACKED = ["ab_verdicts.md", "all.tar.gz", "probe.json",
          "records_summary.json", "records_summary.md", "summary.txt"]


def _pending(tmp_path, budget, **env):
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(os.path.join(REPO, "scripts", "gpu_pending.sh"),
                root / "scripts")
    for name, outputs in OUTPUTS.items():
        (root / "scripts" / name).write_text(
            STAGE.replace("$OUTPUTS", outputs))
    calls = tmp_path / "calls"
    out = tmp_path / "out"
    p = subprocess.run(
        ["bash", str(root / "scripts" / "gpu_pending.sh"), str(out),
         str(budget)], env=cli_env({"CALLS": str(calls), **env}),
        capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return out, calls.read_text().splitlines()


def test_every_stage_runs_in_order_with_its_budget_and_defaults(tmp_path):
    out, calls = _pending(tmp_path, 560)
    probe, records, ab = calls
    assert probe.startswith("gpu_decode_probe.sh budget=110 ")
    assert records.startswith("gpu_records_check.sh budget=260 DECODE=gpu "
                              "DTYPES=fp16 ")
    # what is left, less 20 s for packing up (the stand-ins take ~0 s; a
    # busy machine's few seconds)
    budget = int(ab.split("budget=")[1].split()[0])
    assert 525 <= budget <= 540, ab
    assert ab.endswith("STEP_AB_ARGS=--dtypes fp16 --only b512,bn_vjp,"
                       "pool_shifted,bn_pallas,bn_one_pass")
    assert sorted(os.listdir(out)) == PACKED
    summary = (out / "summary.txt").read_text().splitlines()
    assert summary == ["[gpu_decode_probe] ran", "[gpu_records_check] ran",
                       "[gpu_jax_step_ab] ran"]
    with tarfile.open(out / "all.tar.gz") as tar:
        assert "work/ab/ab.json" in tar.getnames()


def test_the_stages_knobs_pass_through(tmp_path):
    _, calls = _pending(tmp_path, 560, DECODE="cpu", DTYPES="bf16",
                        STEP_AB_ARGS="--cpu --only pad4")
    assert "DECODE=cpu DTYPES=bf16 " in calls[1]
    assert calls[2].endswith("STEP_AB_ARGS=--cpu --only pad4")


@pytest.mark.parametrize("budget", [130, 100])
def test_too_little_left_skips_the_ab_with_a_line(tmp_path, budget):
    out, calls = _pending(tmp_path, budget)
    assert [c.split()[0] for c in calls] == ["gpu_decode_probe.sh",
                                             "gpu_records_check.sh"]
    # all there is, under 260: the budget less the seconds the stand-in
    # probe took (a busy machine's second or two)
    given = int(calls[1].split("budget=")[1].split()[0])
    assert budget - 10 <= given <= budget, calls[1]
    summary = (out / "summary.txt").read_text()
    assert "[gpu-pending] SKIP the A/B: " in summary
    assert "ab_verdicts.md" not in os.listdir(out)
