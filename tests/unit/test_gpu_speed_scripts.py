"""The GPU speed scripts, here without a GPU: the stage scripts' usage and
help lines (scripts/lib/gpu_stage.sh), scripts/gpu_jax_speed_ab.sh
end to end with a stand-in trainer (a Python that prints TimeHistory
lines at a speed its candidate sets, or fails as an unknown XLA flag
does), the A/B plan's budget arithmetic, combined candidates and --base,
benchmarks/jax_profile.py reading a finished capture folder back into its
side-by-side tables, and benchmarks/gpu_decode_probe.py on nvImageCodec's
CPU decoder (a window decoder's worker path one image and a group a
call)."""

import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile

import pytest

from support.helpers import REPO, cli_env, load_script
from support.kernel_traces import HLO, gpu_trace


def _load(name):
    return load_script("benchmarks", f"{name}.py")


# The stand-in trainer: img/s by candidate (b512 faster, pad4 slower,
# conv_fusion the same), a little spread between intervals and runs;
# runtime_fusion's run ends as the trainer does on a flag XLA refuses.
TRAINER = """
import json, os, sys
from official_bench.contracts.throughput import Interval, format_line
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
override, model_dir = args["--params_override"], args["--model_dir"]
with open(os.environ["FAKE_ORDER"], "a") as f:
    f.write(model_dir.split(os.sep)[-2] + "\\n")
if "use_runtime_fusion" in override:
    print("error: runtime.xla_flags: XLA does not know --xla_x", flush=True)
    sys.exit(2)
rate = 1000.0 * (1.10 if "batch_size=512" in override.split(",")[-1]
                 else 0.90 if "pad_input_channels" in override else 1.0)
steps = int(override.split("train.steps=")[1].split(",")[0])
log = int(override.split("log_steps=")[1].split(",")[0])
for k, start in enumerate(range(0, steps, log)):
    r = rate * (1 + 0.01 * (k % 3 - 1))  # every run: the same mean
    print("I1128 trainer.py:1] " + format_line(
        Interval(start, start + log, log * 256 / r, r)), flush=True)
os.makedirs(model_dir, exist_ok=True)
with open(os.path.join(model_dir, "result.json"), "w") as f:
    json.dump({"environment": {"gpu_names": ["Stand-in GPU"],
                               "jax": "0.0.0", "keras": "3.0"}}, f)
"""


@pytest.fixture(scope="module")
def ab_run(tmp_path_factory):
    """The script once: four candidates, two precisions, two rounds."""
    tmp = tmp_path_factory.mktemp("ab")
    fake = tmp / "trainer.py"
    fake.write_text(TRAINER)
    python = tmp / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} {fake} \"$@\"\n")
    python.chmod(0o755)
    env = cli_env({"PYTHON": sys.executable, "FAKE_ORDER": str(tmp / "order"),
                   "PYTHONPATH": REPO,
                   "AB_ARGS": f"--python {python} --only b512,conv_fusion,"
                              "pad4,runtime_fusion --steps 40 --log_steps 10 "
                              "--overhead 1 --compile 1"})
    out = tmp / "out"
    p = subprocess.run(["bash", os.path.join(REPO, "scripts",
                                             "gpu_jax_speed_ab.sh"),
                        str(out), "900"], env=env, capture_output=True,
                       text=True, timeout=240)
    return p, out, (tmp / "order").read_text().splitlines()


def test_the_ab_script_writes_the_verdicts(ab_run):
    p, out, _ = ab_run
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    table = (out / "ab_verdicts.md").read_text()
    assert table.startswith("JAX speed A/B on Stand-in GPU, ")
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line
            for line in table.splitlines() if line.startswith("| bf16")
            or line.startswith("| fp16")}
    for dtype in ("bf16", "fp16"):
        assert rows[(dtype, "b512")].endswith("| 2/2 | faster |")
        assert "| 1.100 |" in rows[(dtype, "b512")]
        assert rows[(dtype, "conv_fusion")].endswith(
            "| no difference measurable at this spread |")
        assert rows[(dtype, "pad4")].endswith("| slower |")
        assert "failed: side runtime_fusion, round 1: exit 2" in \
            rows[(dtype, "runtime_fusion")]
    assert "Skipped (budget): none." in table
    assert ("official-bench-compare --config configs/examples/resnet/"
            "imagenet/gpu_fp16.yaml --a-override runtime.backend=jax,"
            in table)
    summary = (out / "summary.txt").read_text()
    assert table in summary and summary.count("| precision |") == 1
    verdicts = json.loads((out / "ab.json").read_text())["verdicts"]
    assert len(verdicts) == 8
    with tarfile.open(out / "runs.tar.gz") as tar:
        names = tar.getnames()
    assert "logs/bf16_b512_2.log" in names
    assert any(n.endswith("bf16_baseline_1/model/result.json")
               for n in names)
    assert not (out / "work").exists()


def test_the_rounds_alternate_and_a_failed_side_stops(ab_run):
    _, _, order = ab_run
    first = ["baseline", "b512", "conv_fusion", "pad4", "runtime_fusion"]
    second = ["pad4", "conv_fusion", "b512", "baseline"]
    for dtype, runs in (("bf16", order[:9]), ("fp16", order[9:])):
        assert runs == [f"{dtype}_{s}_1" for s in first] + \
            [f"{dtype}_{s}_2" for s in second]


def test_the_plan_keeps_to_the_budget():
    m = _load("jax_speed_ab")
    costs = m.Costs(overhead=10, compile=20, rate=1000)
    cands = [m.CANDIDATES[0], m.Candidate("x", "k=v"),
             m.Candidate("only16", "k=w", dtypes=("fp16",))]
    # a b256 side: 2 x (10 + 100 * 256 / 1000) + 20 = 91.2 s; b512: 142.4
    plan = m.plan(cands, ["bf16", "fp16"], 91.2 * 2 + 142.4 * 2 + 91.2, costs,
                  256, 100, 2)
    assert {d: [c.name for c in cs] for d, cs in plan.groups.items()} == {
        "bf16": ["b512", "x"], "fp16": ["b512"]}
    assert plan.seconds == pytest.approx(91.2 * 3 + 142.4 * 2)
    assert [(d, n) for d, n, _ in plan.skipped] == [("fp16", "x"),
                                                    ("fp16", "only16")]
    assert plan.skipped[0][2] == "needs ~91 s, 0 s of the budget left"


def test_candidates_combine_with_a_plus(capsys):
    """--only b512+pad4: one candidate with both overrides, the batch the
    one that sets it asks for, the precisions both run in; two batches,
    or no common precision, or an unknown part are one line each."""
    m = _load("jax_speed_ab")
    args = m.build_parser().parse_args(
        ["--out", "x", "--only", "b512+pad4,pad8+s2d,bn_one_pass"])
    both, bf16_only, single = m._candidates(args)
    assert (both.name, both.batch, both.dtypes) == ("b512+pad4", 512,
                                                    ("bf16", "fp16"))
    assert both.override == ("train_dataset.batch_size=512,"
                             "model.model_params.pad_input_channels=4")
    assert (bf16_only.batch, bf16_only.dtypes) == (None, ("bf16",))
    assert single.name == "bn_one_pass" and "+" not in single.override
    for only, says in (("b512+b384", "more than one sets the batch"),
                       ("pad8+cmdbuf_cond", "no precision that all of "
                                            "them run in"),
                       ("b512+nope", "unknown candidate(s) nope")):
        args = m.build_parser().parse_args(["--out", "x", "--only", only])
        with pytest.raises(SystemExit, match=re.escape(says)):
            m._candidates(args)


def test_candidates_of_other_precisions_only_are_one_line(tmp_path):
    """--only ls_select --dtypes bf16: ls_select is fp16 only, so nothing
    would run: one line naming the candidate's precision, nothing written
    (the run used to end in "0 of 0 candidate(s) judged"); with a bf16
    candidate beside it the plan goes on."""
    m = _load("jax_speed_ab")
    out = tmp_path / "ab"
    with pytest.raises(SystemExit, match=re.escape(
            "--dtypes: no candidate runs in bf16: ls_select is fp16 only")):
        m.main(["--out", str(out), "--only", "ls_select", "--dtypes",
                "bf16"])
    assert not out.exists()
    assert m.precision_problem(m._candidates(m.build_parser().parse_args(
        ["--out", "x", "--only", "ls_select,s2d_pad4"])), ["bf16"]) is None


def test_the_base_is_on_both_sides_and_held_candidates_are_named():
    """--base: both sides' override ends with it, its batch is the run's,
    a candidate it holds is listed as such and not run, the table and
    ab.json name it; a base holding every candidate, or a malformed one,
    is one line."""
    m = _load("jax_speed_ab")
    base = "train_dataset.batch_size=512,model.model_params.bn_statistics" \
        "=one_pass"
    args = m.build_parser().parse_args(
        ["--out", "x", "--dtypes", "fp16", "--only",
         "b512,bn_one_pass,cmdbuf_off,b512+bn_vjp", "--base", base])
    run, held = m.apply_base(args, m._candidates(args))
    assert [c.name for c in run] == ["cmdbuf_off", "b512+bn_vjp"]
    assert held == [("fp16", "b512", "in the base already "
                     "(train_dataset.batch_size=512)"),
                    ("fp16", "bn_one_pass", "in the base already "
                     "(model.model_params.bn_statistics=one_pass)")]
    assert args.batch == 512
    assert m.base_override(args, "fp16").endswith(
        "validation_dataset.batch_size=512," + base)
    # quoted for a shell: the flag's list holds single quotes
    words = shlex.split(m.command(args, "fp16", run[0]))
    assert words[words.index("--b-override") + 1] == \
        m.base_override(args, "fp16") + ",runtime.xla_flags=" \
        "['--xla_gpu_enable_command_buffer=']"
    text = m.markdown(args, [], held, {"card": "c", "jax": "j",
                                       "keras": "k"}, 1.0)
    assert f"candidate sets it; base on both sides: `{base}`; budget" in text
    assert "Skipped (budget): none.\nNot run, in the base already: fp16 " \
        "b512, fp16 bn_one_pass.\n" in text
    assert m.as_json(args, [], {}, held, {})["base"] == base
    for bad, says in ((base, "it holds every candidate (b512)"),
                      ("train_dataset.batch_size=0", "the batch must be a "
                                                     "positive integer")):
        args = m.build_parser().parse_args(["--out", "x", "--only", "b512",
                                            "--base", bad])
        with pytest.raises(SystemExit, match=re.escape(says)):
            m.apply_base(args, m._candidates(args))


def test_the_profile_tables_are_read_back_from_a_capture(tmp_path, capsys):
    for dtype, scale in (("fp16", 1.0), ("bf16", 1.5)):
        trace = tmp_path / dtype / "trace" / "plugins" / "profile" / "x"
        trace.mkdir(parents=True)
        with gzip.open(trace / "perfetto_trace.json.gz", "wt") as f:
            json.dump(gpu_trace(scale), f)
        (tmp_path / dtype / "hlo").mkdir()
        with open(HLO, "rb") as src, gzip.open(
                tmp_path / dtype / "hlo" /
                "module_0007.jit_replica_train.sm_9.0_gpu_after_"
                "optimizations.txt.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        (tmp_path / dtype / "meta.json").write_text(json.dumps(
            {"dtype": dtype, "batch": 256, "steps": 2}))
    m = _load("jax_profile")
    assert m.main(["--tables", str(tmp_path / "fp16"),
                   str(tmp_path / "bf16")]) == 0
    text = capsys.readouterr().out
    assert "| convolutions | 0.100 | 57.1% | 0.150 | 66.7% | +0.050 |" in text
    assert "Largest differences by JAX op (bf16 b256 - fp16 b256):" in text
    assert (tmp_path / "bf16" / "profile.md").read_text().startswith(
        "- bf16 b256: 2 traced step(s)")


@pytest.mark.parametrize("script", ["gpu_decode_probe", "gpu_jax_profile",
                                    "gpu_jax_speed_ab", "gpu_jax_step_ab",
                                    "gpu_jax_check", "gpu_records_check"])
def test_the_gpu_stage_scripts_say_their_usage(script):
    path = os.path.join(REPO, "scripts", f"{script}.sh")
    p = subprocess.run(["bash", path], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2
    assert p.stderr == f"usage: {script}.sh OUT_DIR [BUDGET_SECONDS]\n"
    p = subprocess.run(["bash", path, "--help"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and f"bash scripts/{script}.sh OUT_DIR" in \
        p.stdout and p.stdout.endswith("  -h, --help  this text\n")


def test_the_decode_probe_times_the_worker_path_alone_and_in_groups(
        tmp_path):
    from support.natural_images import natural_jpeg
    for k in range(6):
        (tmp_path / f"{k}.JPEG").write_bytes(natural_jpeg(k, 300, 200))
    out = tmp_path / "probe.json"
    p = subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks",
                                      "gpu_decode_probe.py"),
         "--image_dir", str(tmp_path), "--batch", "4", "--seconds", "0.2",
         "--decoders", "cpu", "--worker_decoders",
         "simplejpeg,nvimgcodec_cpu", "--stages", "decoders,worker",
         "--json", str(out)],
        env=cli_env({"PYTHONPATH": REPO}), capture_output=True, text=True,
        timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rows = {r["decoder"]: r for r in json.loads(out.read_text())["rows"]}
    assert list(rows) == [
        "simplejpeg, 1 thread", "nvImageCodec cpu (CPU_ONLY)",
        "worker path, simplejpeg, 1 a call",
        "worker path, nvimgcodec_cpu, 1 a call",
        "worker path, nvimgcodec_cpu, 32 a call"]
    assert rows["nvImageCodec cpu (CPU_ONLY)"]["mad"] < 1.5
    grouped = rows["worker path, nvimgcodec_cpu, 32 a call"]
    assert grouped["images"] % 32 == 0 and grouped["images"] > 0
    assert grouped["failed"] == 0 and grouped["img_s"] > 0
    assert "| worker path, nvimgcodec_cpu, 32 a call | " in p.stdout
