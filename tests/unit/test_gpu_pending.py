"""scripts/gpu_pending.sh, the calls a GPU session runs, with its parts
replaced by stand-ins that record how they were called (each runs for
real in its own tests: the records and probe scripts', test_jax_step_ab.py,
test_gpu_speed_scripts.py, the run script's): the step A/B whose winner
(benchmarks/ab_winner.py, for real) the trust runs train, through the run
script with their extractor table in OUT_DIR, the budget each part gets
and the knobs it is given, PARTS, the XLA-flag A/B on the winner with
what is left or a line, and the seven files it packs."""

import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from support.helpers import REPO, cli_env

# A stand-in stage: records its name, arguments and knobs, writes the
# files the real one writes.
STAGE = """#!/usr/bin/env bash
echo "$(basename "$0") budget=$2 DECODES=${DECODES:-} DTYPES=${DTYPES:-} \
TEST_NUM=${TEST_NUM:-} WORKERS=${WORKERS:-} MPS=${MPS:-} BASE=${BASE:-} \
AB_ARGS=${AB_ARGS:-}" >> "$CALLS"
mkdir -p "$1"
echo "[$(basename "$0" .sh)] ran" > "$1/summary.txt"
for f in $OUTPUTS; do echo x > "$1/$f"; done
"""
OUTPUTS = {"gpu_decode_probe.sh": "probe.json",
           "gpu_records_check.sh": "records_summary.md records_summary.json",
           "gpu_jax_speed_ab.sh": "ab_verdicts.md ab.json",
           "gpu_jax_step_ab.sh": "ab_verdicts.md"}
# The step A/B's stand-in also records its driver's arguments and writes
# the ab.json it is given (STEP_JSON), else one no reader takes.
STEP_STAGE = STAGE + """echo "STEP_AB_ARGS=$STEP_AB_ARGS" >> "$CALLS"
cp "${STEP_JSON:-/dev/null}" "$1/ab.json"
"""
WON = {"base": "", "rows": [
    {"dtype": "fp16", "candidate": name, "override": override,
     "verdict": {"ratio": ratio, "low": ratio - 0.003, "high": ratio + 0.003,
                 "verdict": verdict}}
    for name, override, ratio, verdict in [
        ("ls_select", "runtime.loss_scale_update=select", 1.004, "faster"),
        ("bn_vjp_relu", "model.model_params.bn_backward=vjp_relu", 1.012,
         "faster"),
        ("bn_pallas", "model.model_params.bn_statistics=pallas", 0.99,
         "slower")]]}
# The run script and the extractor, as the trust runs call them.
RUN_SCRIPT = """#!/usr/bin/env bash
echo "run_single_node.sh $* TEST_NUM=$TEST_NUM STEPS=$STEPS \
LOG_STEPS=$LOG_STEPS PARAMS_OVERRIDE=$PARAMS_OVERRIDE" >> "$CALLS"
mkdir -p "$LOG_DIR/jax/resnet50/bz$1/1n1g"
for i in $(seq "$TEST_NUM"); do
  echo "[launch] 1n1g run $i: ok, 7,9${i}0.0 img/s"
done
"""
EXTRACT = """import os, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
os.makedirs(args["--output_dir"])
name = os.path.basename(args["--log_dir"])
with open(os.path.join(args["--output_dir"], name + "_result.md"), "w") as f:
    f.write("| table of " + args["--log_dir"] + " |\\n")
print("wrote", name)
"""
PACKED = ["all.tar.gz", "probe.json", "records_summary.json",
          "records_summary.md", "step_verdicts.md", "summary.txt",
          "trust_result.md"]


def _run(tmp_path, budget, **env):
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(os.path.join(REPO, "scripts", "gpu_pending.sh"),
                root / "scripts")
    for name, outputs in OUTPUTS.items():
        stage = STEP_STAGE if name == "gpu_jax_step_ab.sh" else STAGE
        (root / "scripts" / name).write_text(
            stage.replace("$OUTPUTS", outputs))
    for real in ("benchmarks", "official_bench"):  # ab_winner.py's
        os.symlink(os.path.join(REPO, real), root / real)
    (root / "run_single_node.sh").write_text(RUN_SCRIPT)
    (root / "extract_tensorflow_logs.py").write_text(EXTRACT)
    calls = tmp_path / "calls"
    calls.touch()
    out = tmp_path / "out"
    p = subprocess.run(
        ["bash", str(root / "scripts" / "gpu_pending.sh"), str(out),
         str(budget)], env=cli_env({"CALLS": str(calls),
                                    "PYTHON": sys.executable, **env}),
        capture_output=True, text=True, timeout=60)
    assert not (root / "result").exists()
    return p, out, calls.read_text().splitlines()


def _pending(tmp_path, budget, **env):
    p, out, calls = _run(tmp_path, budget, **env)
    assert p.returncode == 0, p.stdout + p.stderr
    return out, calls


def _won(tmp_path):
    path = tmp_path / "won.json"
    path.write_text(json.dumps(WON))
    return str(path)


def _budget(call):
    return int(call.split("budget=")[1].split()[0])


def test_every_part_runs_in_order_with_its_budget_and_defaults(tmp_path):
    out, calls = _pending(tmp_path, 560, STEP_JSON=_won(tmp_path))
    step, step_args, trust, records, probe, ab = calls
    assert step.startswith("gpu_jax_step_ab.sh budget=240 ")
    assert step.endswith(" BASE=train_dataset.batch_size=512,model.model_"
                         "params.bn_statistics=one_pass AB_ARGS=")
    assert step_args == ("STEP_AB_ARGS=--dtypes fp16 --only ls_select,"
                         "bn_vjp_relu,bn_vjp,bn_pallas ")
    # the base's batch and key, the widest faster margin's key on top
    assert trust == ("run_single_node.sh 512 fp16 TEST_NUM=3 STEPS=200 "
                     "LOG_STEPS=50 PARAMS_OVERRIDE=model.model_params."
                     "bn_statistics=one_pass,model.model_params."
                     "bn_backward=vjp_relu")
    assert records.startswith("gpu_records_check.sh budget=300 DECODES="
                              "gpu_trainer gpu_trainer:0.5 gpu cpu_window "
                              "DTYPES=fp16 TEST_NUM=1 WORKERS=15 MPS=1 ")
    assert probe.startswith("gpu_decode_probe.sh budget=90 ")
    assert " MPS=1 " in probe
    # what is left, less 20 s for packing up (the stand-ins take ~0 s; a
    # busy machine's few seconds)
    assert 525 <= _budget(ab) <= 540, ab
    assert ab.endswith("BASE=train_dataset.batch_size=512,model.model_"
                       "params.bn_statistics=one_pass AB_ARGS=--dtypes fp16 "
                       "--rate 7900 --only conv_fusion,runtime_fusion,"
                       "cmdbuf_cond,cmdbuf_off")
    assert sorted(os.listdir(out)) == PACKED
    table = (out / "trust_result.md").read_text()
    assert table.startswith(f"| table of {out}/work/trust/logs/jax/"
                            "resnet50/bz512 |")
    summary = (out / "summary.txt").read_text().splitlines()
    assert summary[-4:] == ["[gpu_jax_step_ab] ran",
                            "[gpu_records_check] ran",
                            "[gpu_decode_probe] ran",
                            "[gpu_jax_speed_ab] ran"]
    assert any(line.endswith("s] ab_winner: fp16: winner bn_vjp_relu "
                             "(model.model_params.bn_backward=vjp_relu): "
                             "B/A 1.012 [1.009, 1.015], faster, of 3 "
                             "judged") for line in summary), summary
    assert any(line.endswith("s] START trust runs: batch 512, model."
                             "model_params.bn_statistics=one_pass,model."
                             "model_params.bn_backward=vjp_relu")
               for line in summary)
    assert any(line.endswith("s] END trust runs: 3 ok") for line in summary)
    assert "[launch] 1n1g run 3: ok, 7,930.0 img/s" in summary
    assert table.strip() in summary
    with tarfile.open(out / "all.tar.gz") as tar:
        names = tar.getnames()
    assert "work/ab/ab_verdicts.md" in names
    assert "work/step/ab.json" in names
    assert "work/trust/result/bz512_result.md" in names


def test_the_knobs_pass_through(tmp_path):
    _, calls = _pending(tmp_path, 560, DECODE="cpu", DTYPES="bf16",
                        TEST_NUM="2", WORKERS="1 2", MPS="0", TRUST_BATCH="8",
                        TRUST_RUNS="1", TRUST_STEPS="6", TRUST_LOG_STEPS="2",
                        TRUST_OVERRIDE="k=v", BASE="a=b",
                        STEP_JSON=_won(tmp_path), STEP_AB="pad4",
                        STEP_ARGS="--cpu --steps 2",
                        AB_ARGS="--cpu --only cmdbuf_off")
    assert " BASE=a=b " in calls[0]
    assert calls[1] == "STEP_AB_ARGS=--dtypes fp16 --only pad4 --cpu --steps 2"
    # set, they win over the step A/B's winner
    assert calls[2] == ("run_single_node.sh 8 fp16 TEST_NUM=1 STEPS=6 "
                        "LOG_STEPS=2 PARAMS_OVERRIDE=k=v")
    assert "DECODES=cpu DTYPES=bf16 TEST_NUM=2 WORKERS=1 2 MPS=0 " in calls[3]
    assert " MPS=0 " in calls[4]
    assert calls[5].endswith("BASE=a=b AB_ARGS=--cpu --only cmdbuf_off")


def test_two_calls_by_parts_and_a_step_without_verdicts(tmp_path):
    # the first call: the step A/B (its ab.json unreadable: the trust runs
    # train the base, a line says why) and the trust runs, nothing else
    out, calls = _pending(tmp_path / "1", 420, PARTS="step trust",
                          BASE="train_dataset.batch_size=384,a.b=c")
    assert [c.split()[0] for c in calls] == [
        "gpu_jax_step_ab.sh", "STEP_AB_ARGS=--dtypes", "run_single_node.sh"]
    assert calls[2].startswith("run_single_node.sh 384 fp16 ")
    assert calls[2].endswith(" PARAMS_OVERRIDE=a.b=c")
    summary = (out / "summary.txt").read_text()
    assert "ab.json: Expecting value: line 1 column 1 (char 0); the trust " \
           "runs train the base" in summary
    assert "SKIP" not in summary
    assert sorted(os.listdir(out)) == ["all.tar.gz", "step_verdicts.md",
                                       "summary.txt", "trust_result.md"]
    # the second: the rest, the trust runs' own default without a step
    out, calls = _pending(tmp_path / "2", 560, PARTS="records probe xla")
    assert [c.split()[0] for c in calls] == [
        "gpu_records_check.sh", "gpu_decode_probe.sh", "gpu_jax_speed_ab.sh"]
    assert _budget(calls[0]) == 300
    out, calls = _pending(tmp_path / "3", 560, PARTS="trust")
    assert calls == ["run_single_node.sh 512 fp16 TEST_NUM=3 STEPS=200 "
                     "LOG_STEPS=50 PARAMS_OVERRIDE=model.model_params."
                     "bn_statistics=one_pass"]


@pytest.mark.parametrize("env, line", [
    ({"PARTS": "step trsut"}, "gpu_pending.sh: unknown part 'trsut' in "
                               "PARTS; valid: step, trust, records, probe, "
                               "xla"),
    ({"BASE": "train_dataset.batch_size=0"},
     "ab_winner: --base: train_dataset.batch_size=0: the batch must be a "
     "positive integer"),
])
def test_a_bad_knob_is_one_line_before_any_part(tmp_path, env, line):
    p, out, calls = _run(tmp_path, 560, **env)
    assert p.returncode == 2
    assert line in p.stderr.splitlines()[0]
    assert calls == [] and os.listdir(out) == []


@pytest.mark.parametrize("budget, ran", [
    (170, ["gpu_jax_step_ab.sh", "STEP_AB_ARGS=--dtypes",
           "run_single_node.sh", "gpu_records_check.sh",
           "gpu_decode_probe.sh"]),
    (50, ["gpu_records_check.sh", "gpu_decode_probe.sh"])])
def test_too_little_left_skips_with_a_line(tmp_path, budget, ran):
    out, calls = _pending(tmp_path, budget)
    assert [c.split()[0] for c in calls] == ran
    # all there is, under each part's cap: the budget less the seconds the
    # stand-ins took (a busy machine's second or two)
    assert budget - 10 <= _budget(calls[-2]) <= budget, calls[-2]
    assert budget - 10 <= _budget(calls[0]) <= budget, calls[0]
    summary = (out / "summary.txt").read_text()
    assert "SKIP the XLA-flag A/B: " in summary
    assert ("SKIP the step A/B: " in summary) == (budget == 50)
    assert ("SKIP the trust runs: " in summary) == (budget == 50)
    assert "trust_result.md" in os.listdir(out) or budget == 50
