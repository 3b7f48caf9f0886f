"""benchmarks/jax_step_ab.py, the in-process A/B of model-side candidates,
without a GPU: scripts/gpu_jax_step_ab.sh end to end on the CPU's tiny
model (a candidate judged from its blocks, one that fails to build
reported beside it, the outputs); with stand-in steps, the rounds'
alternation and the verdicts it feeds; the budget's skips before anything
is built; the candidates it refuses (an XLA flag needs a process of its
own) or does not know; a Pallas candidate's kernel settings, checked,
set while it is built and named in its row; --base on both sides, a
candidate it holds not run; ls_select in process, in fp16 only."""

import json
import os
import subprocess
import sys
import types

import pytest

from official_bench.judge import verdict as verdict_lib
from support.helpers import REPO, cli_env, load_script

# 2 rounds of blocks a side are always judged: never TOO_FEW
VERDICTS = (verdict_lib.FASTER, verdict_lib.SLOWER, verdict_lib.NO_DIFFERENCE)


def _load():
    return load_script("benchmarks", "jax_step_ab.py")


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("step_ab") / "out"
    env = cli_env({"PYTHON": sys.executable, "PYTHONPATH": REPO,
                   "JAX_PLATFORMS": "cpu",
                   "BASE": "model.model_params.bn_statistics=one_pass",
                   "STEP_AB_ARGS": "--cpu --only pad4,s2d --dtypes fp16 "
                                   "--rounds 2 --steps 2 --warmup 1"})
    p = subprocess.run(["bash", os.path.join(REPO, "scripts",
                                             "gpu_jax_step_ab.sh"),
                        str(out), "300"], env=env, capture_output=True,
                       text=True, timeout=300)
    return p, out


def test_the_script_judges_a_candidate_and_reports_a_failed_one(cpu_run):
    p, out = cpu_run
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    table = (out / "ab_verdicts.md").read_text()
    assert table.startswith("In-process JAX step A/B on cpu, ")
    assert "base on both sides: `model.model_params.bn_statistics=" \
        "one_pass`" in table
    rows = {line.split("|")[2].strip(): line for line in table.splitlines()
            if line.startswith("| fp16 |")}
    assert set(rows) == {"pad4", "s2d"}
    assert rows["pad4"].endswith(tuple(f"| 2/2 | {v} |" for v in VERDICTS))
    # resnet_cifar has no 7x7 stem: the trainer's config check, one line
    assert ("failed: ConfigError: invalid configuration: "
            "model.model_params.stem_space_to_depth: ") in rows["s2d"]
    data = json.loads((out / "ab.json").read_text())
    pad4 = next(r for r in data["rows"] if r["candidate"] == "pad4")
    assert len(pad4["baseline"]) == len(pad4["blocks"]) == 2
    assert all(rate > 0 for rate in pad4["baseline"] + pad4["blocks"])
    assert pad4["verdict"]["verdict"] in VERDICTS
    assert table in (out / "summary.txt").read_text()
    assert "END step_ab: exit 1" in (out / "summary.txt").read_text()


class _Stand:
    """A stand-in side: a fixed rate, its blocks written to `order`."""

    build_seconds = 0.0

    def __init__(self, name, rate, order):
        self.name, self.rate, self.order = name, rate, order

    def block(self, steps):
        self.order.append(self.name)
        return self.rate * (1 + 0.001 * len(self.order))


def test_rounds_alternate_and_feed_the_verdict():
    m = _load()
    order = []
    base, cand = _Stand("baseline", 1000.0, order), _Stand("b", 1100.0, order)
    row = m.Row("bf16", m.Candidate("b", "k=v"))
    m.alternate(types.SimpleNamespace(rounds=4, steps=3), base, cand, row,
                lambda line: None)
    assert order == ["baseline", "b", "b", "baseline"] * 2
    assert len(row.baseline) == len(row.blocks) == 4
    assert row.verdict.verdict == "faster"
    assert row.verdict.ratio == pytest.approx(1.1, rel=0.01)
    assert row.paired.median == pytest.approx(1.1, rel=0.01)


def test_the_budget_skips_before_building_anything():
    m = _load()
    args = types.SimpleNamespace(budget=30, build=40.0, rounds=8, steps=20,
                                 base="",
                                 batch=256, rate=6500.0,
                                 dtypes=["bf16", "fp16"])
    said = []
    rows = m.run_all(args, m.candidates(["pad4", "pad8"]), said.append)
    assert [(r.dtype, r.candidate.name) for r in rows] == [
        ("bf16", "pad4"), ("fp16", "pad4"), ("bf16", "pad8")]
    # two builds (the baseline's and the candidate's: 2 x 40 s) and
    # 2 x 8 blocks of 20 steps of 256 images at 6,500 img/s (12.6 s)
    assert all(r.skipped.startswith("needs ~93 s, ") for r in rows)
    assert all(r.verdict is None and not r.failure for r in rows)
    assert len(said) == 3


@pytest.mark.parametrize("only, says", [
    ("conv_fusion", "conv_fusion sets runtime.xla_flags, which XLA reads "
                    "once per process: benchmarks/jax_speed_ab.py runs it"),
    ("pad4,nope", "unknown candidate(s) nope; valid: b512, pad4"),
    ("b512+b384", "more than one sets the batch"),
    ("pad4:num_warps=8", "pad4:num_warps=8: kernel settings need a "
                         "candidate with bn_statistics pallas (bn_pallas)"),
    ("pad4 --rounds 1", "argument --rounds: 1 is below 2"),
    ("pad4 --warmup 0", "argument --warmup: 0 is below 1"),
    ("pad4 --base runtime.xla_flags=['--xla_x=1']",
     "--base: the base sets runtime.xla_flags, which XLA reads once per "
     "process"),
    ("b512 --base train_dataset.batch_size=512,model.model_params."
     "bn_statistics=one_pass", "--base: train_dataset.batch_size=512,model."
     "model_params.bn_statistics=one_pass holds every candidate (b512)"),
    ("pad4 --base one_pass", "--base: one_pass: not of the form "
                             "key.path=value"),
    ("ls_select --dtypes bf16", "--dtypes: no candidate runs in bf16: "
                                "ls_select is fp16 only")])
def test_candidates_it_cannot_run_are_one_line(only, says):
    p = subprocess.run([sys.executable, os.path.join(
        REPO, "benchmarks", "jax_step_ab.py"), "--out", "x", "--only",
        *only.split()],
        env=cli_env({"PYTHONPATH": REPO}), capture_output=True, text=True,
        timeout=60)
    assert p.returncode == 2
    assert says in p.stderr.splitlines()[-1], p.stderr


def test_the_base_is_on_both_sides_and_a_candidate_it_holds_is_not_run(
        monkeypatch):
    m = _load()
    order, built = [], []

    def build_side(args, dtype, name, override, *_):
        built.append((name, override))
        return _Stand(name, 1000.0, order)
    monkeypatch.setattr(m, "build_side", build_side)
    base = "train_dataset.batch_size=512,model.model_params.bn_statistics=" \
        "one_pass"
    args = types.SimpleNamespace(budget=1e9, build=1.0, rounds=2, steps=1,
                                 batch=256, rate=1e6, dtypes=["fp16"],
                                 warmup=1,
                                 base=base.replace(",", ", "))
    cands = m.candidates(["b512", "bn_vjp", "b512+bn_vjp"])
    m.check_base(args, cands)
    assert args.batch == 512
    rows = m.run_all(args, cands, lambda line: None)
    assert built == [("baseline", args.base),
                     ("bn_vjp", args.base + ",model.model_params."
                                        "bn_backward=vjp"),
                     ("b512+bn_vjp", args.base + ",train_dataset.batch_size"
                      "=512,model.model_params.bn_backward=vjp")]
    assert rows[0].skipped == ("in the base already "
                               "(train_dataset.batch_size=512)")
    assert rows[0].verdict is None and rows[1].verdict is not None
    table = m.markdown(args, rows, {"card": "cpu", "jax": "x", "keras": "y"},
                       1.0)
    assert f"batch 512 unless the candidate sets it; base on both sides: " \
        f"`{args.base}`;" in table
    assert "| fp16 | b512 | `train_dataset.batch_size=512` | - | - | - | - " \
        "| - | - | skipped: in the base already " in table
    assert m.as_json(args, rows, {})["base"] == args.base


def test_ls_select_runs_in_process_and_in_fp16_only(monkeypatch):
    """The loss-scale update is the step's, not XLA's flags: one process
    holds it; bf16 has no loss scale, so it has no bf16 row; a default."""
    m = _load()
    built = []

    def build_side(args, dtype, name, override, *_):
        built.append((dtype, name, override))
        return _Stand(name, 1000.0, [])
    monkeypatch.setattr(m, "build_side", build_side)
    args = types.SimpleNamespace(budget=1e9, build=1.0, rounds=2, steps=1,
                                 batch=256, rate=1e6, warmup=1, base="",
                                 dtypes=["bf16", "fp16"])
    rows = m.run_all(args, m.candidates(["ls_select"]), lambda line: None)
    assert [(r.dtype, r.verdict is not None) for r in rows] == [
        ("fp16", True)]
    assert built[-1] == ("fp16", "ls_select",
                         "runtime.loss_scale_update=select")
    assert "ls_select" in m.DEFAULT_CANDIDATES


def test_every_in_process_candidate_is_a_default():
    """A candidate jax_speed_ab defines that this driver can run (no XLA
    flag) is in its default list, so a new one is not left out."""
    m = _load()
    runnable = [c.name for c in m.jax_speed_ab.CANDIDATES
                if not any(key in c.override for key in m.PROCESS_KEYS)]
    assert sorted(m.DEFAULT_CANDIDATES) == sorted(runnable)


class _Failing(_Stand):
    def block(self, steps):
        raise RuntimeError("RESOURCE_EXHAUSTED: out of memory\nmore")


def test_a_failure_while_timing_is_that_rows_and_the_others_go_on(
        monkeypatch):
    m = _load()
    order = []
    sides = {"baseline": _Stand("baseline", 1000.0, order),
             "pad4": _Failing("pad4", 0.0, order),
             "pad8": _Stand("pad8", 900.0, order)}
    monkeypatch.setattr(m, "build_side", lambda args, dtype, name, *_: sides[
        name])
    args = types.SimpleNamespace(budget=1e9, build=1.0, rounds=2, steps=1,
                                 base="",
                                 batch=8, rate=1e6, dtypes=["bf16"])
    rows = m.run_all(args, m.candidates(["pad4", "pad8"]), lambda line: None)
    assert rows[0].failure == ("while timing: RuntimeError: "
                               "RESOURCE_EXHAUSTED: out of memory")
    assert rows[0].verdict is None
    assert rows[1].verdict.verdict == "slower" and not rows[1].failure


def test_every_block_trains_from_the_initial_state():
    import jax.numpy as jnp
    m = _load()
    seen = []

    def train(state, images):
        seen.append(float(state))
        return state + images, state
    side = m.Side("s", train, jnp.zeros(()), (jnp.ones(()),), 8, 0.0)
    assert side.block(3) > 0 and side.block(2) > 0
    assert seen == [0.0, 1.0, 2.0, 0.0, 1.0]
    assert float(side.initial) == 0.0


@pytest.mark.parametrize("name, says", [
    ("bn_pallas:warps=8", "bn_pallas:warps=8: unknown Pallas kernel "
                          "setting(s) warps; valid: tile_elements, "),
    ("bn_pallas:num_warps=six", "bn_pallas:num_warps=six: 'num_warps=six' "
                                "is not key=integer"),
    ("b400+bn_pallas:num_warps=6", "b400+bn_pallas:num_warps=6: Pallas "
                                   "kernel settings: num_warps 6 is not a "
                                   "power of two"),
    ("bn_one_pass:num_warps=8", "bn_one_pass:num_warps=8: kernel settings "
                                "need a candidate with bn_statistics "
                                "pallas")])
def test_bad_kernel_settings_are_one_line(name, says):
    with pytest.raises(ValueError) as e:
        _load().candidates(["pad4", name])
    assert str(e.value).startswith(says), str(e.value)


def test_kernel_settings_hold_while_their_candidate_is_built(monkeypatch):
    import jax.numpy as jnp

    from official_bench.models import pallas_moments as pm
    m = _load()
    seen = []

    def build_step(cfg, compilation_cache):
        seen.append((cfg.model.model_params.bn_statistics, pm.tuning()))
        return (None, lambda state, images: (state, state), jnp.zeros(()),
                (jnp.ones(()),), 8)
    monkeypatch.setattr(m.jax_profile, "build_step", build_step)
    cands = m.candidates(["b400+bn_pallas:num_warps=8:max_steps=16",
                          "bn_pallas"])
    assert cands[0].batch == 400 and cands[0].name == \
        "b400+bn_pallas:num_warps=8:max_steps=16"
    args = types.SimpleNamespace(budget=1e9, build=1.0, rounds=2, steps=1,
                                 base="",
                                 batch=8, rate=1e6, dtypes=["fp16"],
                                 warmup=1, cpu=True)
    rows = m.run_all(args, cands, lambda line: None)
    assert seen == [("two_pass", pm.Tuning()),
                    ("pallas", pm.Tuning(num_warps=8, max_steps=16)),
                    ("pallas", pm.Tuning())]
    assert pm.tuning() == pm.Tuning()
    assert all(r.verdict is not None for r in rows)
    table = m.markdown(args, rows, {"card": "cpu", "jax": "x", "keras": "y"},
                       1.0)
    assert ("| fp16 | b400+bn_pallas:num_warps=8:max_steps=16 | "
            "`train_dataset.batch_size=400,model.model_params.bn_statistics"
            "=pallas, max_steps=16, num_warps=8` |") in table
    kernels = [r["kernel"] for r in m.as_json(args, rows, {})["rows"]]
    assert kernels == [{"max_steps": 16, "num_warps": 8}, {}]
