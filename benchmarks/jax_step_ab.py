"""In-process A/B of the JAX backend's model-side speed candidates (issue
47, item 3): the trainer's own compiled step for the baseline and for each
candidate, held in one process and timed in alternating blocks.

jax_speed_ab.py starts one trainer process per run (14 s of start-up and
a compile each, 2 runs a side in its budget); here the baseline is built
once per precision (jax_profile.build_step: the trainer's config, model,
precision, optimizer, loss and shard_map step, the batch made once on the
device) at its first candidate and held, each candidate is built beside
it (in each precision it runs in, before the next candidate), and
`--rounds` rounds alternate them (A B, then B A), each side `--steps`
steps a block from the same initial state, timed from the host with the
loss read at the block's end (so the device has finished).
Each block is one run of judge/verdict.py: the ratio of medians with its
bootstrap interval and verdict (official-bench-compare's rule), and B/A
round by round (paired: a drift of the card's clock cancels in a round).
Candidates that change only the model, the batch or the step's update
(ls_select, fp16 only) qualify; one that sets runtime.xla_flags does not
(XLA reads its flags once per process: that is jax_speed_ab.py's). A
candidate that fails to build or compile is reported, not fatal; one that
does not fit the budget is skipped.
A Pallas candidate may carry kernel settings after its name
(`bn_pallas:num_warps=8:tile_elements=4096`, models/pallas_moments.py's
Tuning), set while its step is traced: the kernel's tiles and Triton
parameters A/B'd without a code change. `--base` adds dotted overrides to
both sides (a previous winner); a candidate the base already holds is a
row saying so, not an A/B of the base against itself.

    python benchmarks/jax_step_ab.py --out OUT --budget 300           # GPU
    python benchmarks/jax_step_ab.py --out OUT --cpu --only pad4      # check
    python benchmarks/jax_step_ab.py --out OUT --dtypes fp16 \
        --only bn_pallas,bn_pallas:num_warps=8,bn_pallas:max_steps=16
    python benchmarks/jax_step_ab.py --out OUT --dtypes fp16 --only \
        bn_vjp,pool_shifted --base model.model_params.bn_statistics=one_pass

OUT gets ab_verdicts.md (the table for BENCHMARKS.md) and ab.json (every
block's rate).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import json
import os
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import jax_profile  # noqa: E402
import jax_speed_ab  # noqa: E402
from jax_speed_ab import Candidate  # noqa: E402

from official_bench.judge import verdict  # noqa: E402

# The process-wide flags key: a candidate that sets it needs its own
# process (jax_speed_ab.py).
PROCESS_KEYS = ("runtime.xla_flags",)
# In order of expected value (docs/gpu_speed.md): bf16's stem, then the
# profile's 55-57% in BN/elementwise, then the batch; then the four added
# last (the stem pool's and the batch norms' backward, fp16's loss-scale
# update without a conditional, the ReLU inside the batch norm).
DEFAULT_CANDIDATES = ("pad4", "bn_one_pass", "bn_pallas", "s2d", "b512",
                      "s2d_pad4", "pad8", "b384", "b400", "pool_shifted",
                      "bn_vjp", "ls_select", "bn_vjp_relu")
CPU_BATCH = 8
PALLAS = "model.model_params.bn_statistics=pallas"


@dataclasses.dataclass(frozen=True)
class KernelCandidate(Candidate):
    """A Pallas candidate with kernel settings (pallas_moments.tuned)."""
    kernel: Tuple[Tuple[str, int], ...] = ()


@dataclasses.dataclass
class Side:
    """One compiled step, the state it starts from and what it trains on."""
    name: str
    train: object
    initial: object  # weights, optimizer and loss-scale state
    batch: tuple
    images: int  # per step, all devices
    build_seconds: float

    def block(self, steps: int) -> float:
        """img/s over `steps` steps from the initial state (every block
        trains the same steps: a side that trained on and on would drift,
        and a float16 one that overflows skips its updates, another
        program path), the loss read at the end."""
        import jax
        state = jax.block_until_ready(
            jax.tree_util.tree_map(lambda a: a.copy(), self.initial))
        begin = time.perf_counter()
        loss = None
        for _ in range(steps):
            state, loss = self.train(state, *self.batch)
        float(loss)
        return steps * self.images / (time.perf_counter() - begin)


@dataclasses.dataclass
class Row:
    """One candidate's blocks and verdict against its baseline."""
    dtype: str
    candidate: Candidate
    baseline: List[float] = dataclasses.field(default_factory=list)
    blocks: List[float] = dataclasses.field(default_factory=list)
    verdict: Optional[verdict.Verdict] = None
    paired: Optional[verdict.RoundRatios] = None
    failure: str = ""
    skipped: str = ""


def refusal(cand: Candidate) -> str:
    """Why `cand` cannot run in this process ('' when it can)."""
    keys = [k for k in PROCESS_KEYS if k + "=" in cand.override]
    if keys:
        return (f"{cand.name} sets {', '.join(keys)}, which XLA reads once "
                "per process: benchmarks/jax_speed_ab.py runs it")
    return ""


def joined(*overrides: str) -> str:
    """Dotted overrides in order, the empty ones left out."""
    return ",".join(o for o in overrides if o)


def build_side(args, dtype: str, name: str, override: str,
               kernel: Tuple[Tuple[str, int], ...] = ()) -> Side:
    """The compiled step, warmed up by `args.warmup` steps; traced with
    the Pallas kernel settings `kernel`."""
    from official_bench.models import pallas_moments
    begin = time.perf_counter()
    with pallas_moments.tuned(**dict(kernel)):
        jax, train, state, batch, images = jax_profile.build_step(
            jax_profile.step_config(dtype, args.batch, args.cpu, override),
            compilation_cache=True)
        side = Side(name, train, state, batch, images, 0.0)
        side.block(args.warmup)  # compiled here, if not before
    side.build_seconds = time.perf_counter() - begin
    del jax
    return side


def first_line(e: BaseException) -> str:
    """What went wrong, in one line: the error's first line, and its
    second where the first only introduces it ("invalid configuration:")."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    text = " ".join(lines[:2]) if lines and lines[0].endswith(":") \
        else (lines[0] if lines else "")
    return f"{type(e).__name__}: {text}".rstrip(": ")


def alternate(args, base: Side, cand: Side, row: Row, say) -> None:
    """`args.rounds` rounds, A B then B A; each block a run."""
    for round_no in range(args.rounds):
        order = [base, cand] if round_no % 2 == 0 else [cand, base]
        rates = {side.name: side.block(args.steps) for side in order}
        row.baseline.append(rates[base.name])
        row.blocks.append(rates[cand.name])
        say(f"[{row.dtype} {row.candidate.name}] round {round_no + 1}/"
            f"{args.rounds}: baseline {rates[base.name]:,.1f}, candidate "
            f"{rates[cand.name]:,.1f} img/s")
    a, b = [[r] for r in row.baseline], [[r] for r in row.blocks]
    row.verdict = verdict.compare_runs(a, b)
    row.paired = verdict.round_ratios(a, b)


def estimate(args, base: Optional[Side], cand: Candidate) -> float:
    """Seconds a candidate takes: a build as long as the baseline's, at
    least `args.build` (the baseline's may have come from JAX's cache),
    and both sides' blocks; plus the baseline's build when it is still to
    be made."""
    build = max(base.build_seconds, args.build) if base else 2 * args.build
    blocks = 2 * args.rounds * args.steps * (cand.batch or args.batch) / \
        args.rate
    return build + blocks


def run_all(args, cands: Sequence[Candidate], say) -> List[Row]:
    """Each candidate in turn, in each of its precisions, against that
    precision's baseline (built at its first candidate, then held), while
    the budget lasts."""
    start = time.monotonic()
    bases: Dict[str, Side] = {}
    failed: Dict[str, str] = {}
    rows = []
    for cand in cands:
        for dtype in (d for d in args.dtypes if d in cand.dtypes):
            row = Row(dtype, cand)
            rows.append(row)
            left = args.budget - (time.monotonic() - start)
            need = estimate(args, bases.get(dtype), cand)
            held = jax_speed_ab.in_base(cand, args.base)
            if held:
                row.skipped = held
                say(f"[{dtype} {cand.name}] not run: {held}")
            elif dtype in failed:
                row.failure = failed[dtype]
            elif need > left:
                row.skipped = f"needs ~{need:.0f} s, {left:.0f} s left"
                say(f"[{dtype} {cand.name}] skipped: {row.skipped}")
            else:
                if dtype not in bases:
                    try:
                        bases[dtype] = _baseline(args, dtype, say)
                    except Exception as e:  # noqa: BLE001 - said, then on
                        failed[dtype] = row.failure = \
                            f"baseline failed: {first_line(e)}"
                        say(f"[{dtype}] {row.failure}")
                        continue
                judge(args, bases[dtype], row, say)
    return rows


def _baseline(args, dtype: str, say) -> Side:
    say(f"[{dtype}] building the baseline ...")
    base = build_side(args, dtype, "baseline", args.base)
    say(f"[{dtype}] baseline ready in {base.build_seconds:.1f} s")
    return base


def judge(args, base: Side, row: Row, say) -> None:
    """Builds the candidate beside the baseline, alternates them, judges;
    a candidate that fails to build is the row's failure."""
    name = row.candidate.name
    say(f"[{row.dtype} {name}] building ...")
    try:
        side = build_side(args, row.dtype, name,
                          joined(args.base, row.candidate.override),
                          kernel_of(row.candidate))
    except Exception as e:  # noqa: BLE001 - one candidate's failure
        row.failure = first_line(e)
        say(f"[{row.dtype} {name}] FAILED: {row.failure}")
        return
    say(f"[{row.dtype} {name}] ready in {side.build_seconds:.1f} s")
    try:
        alternate(args, base, side, row, say)
        say(f"[{row.dtype} {name}] {row.verdict.describe('baseline', name)}")
    except Exception as e:  # noqa: BLE001 - the rows judged so far stay
        row.verdict = row.paired = None
        row.failure = f"while timing: {first_line(e)}"
        say(f"[{row.dtype} {name}] FAILED {row.failure}")
    del side
    gc.collect()


def environment() -> Dict[str, str]:
    import jax
    import keras
    device = jax.devices()[0]
    return {"card": getattr(device, "device_kind", str(device)),
            "jax": jax.__version__, "keras": keras.__version__}


def markdown(args, rows: Sequence[Row], env, used: float) -> str:
    when = datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC")
    out = [f"In-process JAX step A/B on {env['card']}, {when}, JAX "
           f"{env['jax']}, Keras {env['keras']}: {args.rounds} rounds of "
           f"{args.steps}-step blocks per side (A B, then B A; "
           f"{args.warmup} warm-up steps after each build), batch "
           f"{args.batch} unless the candidate sets it"
           f"{jax_speed_ab.base_words(args.base)}; budget "
           f"{args.budget:.0f} s, used {used:.0f} s.", "",
           "| precision | candidate | change | baseline img/s | candidate "
           "img/s | B/A | 95% interval | B/A paired by round | blocks | "
           "verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        change = (r.candidate.override + "".join(
            f", {k}={v}" for k, v in kernel_of(r.candidate))).replace("|", "/")
        head = f"| {r.dtype} | {r.candidate.name} | `{change}` |"
        if r.verdict is None:
            why = (f"failed: {r.failure}" if r.failure
                   else f"skipped: {r.skipped}")
            out.append(f"{head} - | - | - | - | - | - | {why} |")
            continue
        v, p = r.verdict, r.paired
        out.append(f"{head} {v.median_a:,.1f} | {v.median_b:,.1f} | "
                   f"{v.ratio:.3f} | {v.interval_text()} | "
                   f"{p.median:.3f} [{p.low:.3f}, {p.high:.3f}] | "
                   f"{v.runs_a}/{v.runs_b} | {v.verdict} |")
    return "\n".join(out) + "\n"


def as_json(args, rows: Sequence[Row], env) -> dict:
    return {"args": vars(args), "environment": env,
            "base": args.base, "rows": [
        {"dtype": r.dtype, "candidate": r.candidate.name,
         "override": r.candidate.override,
         "kernel": dict(kernel_of(r.candidate)), "baseline": r.baseline,
         "blocks": r.blocks, "failure": r.failure, "skipped": r.skipped,
         "verdict": r.verdict.as_dict() if r.verdict else None,
         "paired": dataclasses.asdict(r.paired) if r.paired else None}
        for r in rows]}


def kernel_of(cand: Candidate) -> Tuple[Tuple[str, int], ...]:
    return getattr(cand, "kernel", ())


def with_kernel(cand: Candidate, settings: Sequence[str]) -> Candidate:
    """`cand` traced with the Pallas kernel settings ("key=integer");
    ValueError where one is malformed, unknown or out of range, or `cand`
    has no Pallas kernel."""
    from official_bench.models import pallas_moments
    name = ":".join([cand.name, *settings])
    if PALLAS not in cand.override:
        raise ValueError(f"{name}: kernel settings need a candidate with "
                         "bn_statistics pallas (bn_pallas)")
    kernel = {}
    for setting in settings:
        key, _, value = setting.partition("=")
        try:
            kernel[key] = int(value)
        except ValueError:
            raise ValueError(f"{name}: {setting!r} is not key=integer"
                             ) from None
    try:
        with pallas_moments.tuned(**kernel):
            pass
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    return KernelCandidate(name, cand.override, cand.batch, cand.dtypes,
                           cand.why, tuple(sorted(kernel.items())))


def candidates(names: Sequence[str]) -> List[Candidate]:
    """The named candidates (jax_speed_ab.resolve: '+' joins; ':' adds
    Pallas kernel settings); ValueError naming an unknown one, a bad
    setting or one this process cannot run."""
    parts = [name.split(":") for name in names]
    out = [with_kernel(cand, settings) if settings else cand
           for cand, (_, *settings) in zip(
               jax_speed_ab.resolve([p[0] for p in parts]), parts)]
    refused = [why for why in map(refusal, out) if why]
    if refused:
        raise ValueError("; ".join(refused))
    return out


def check_base(args, cands: Sequence[Candidate]) -> None:
    """Takes the base's batch as args.batch; ValueError for a malformed
    base, one setting a key read once per process, or one holding every
    candidate."""
    args.batch = jax_speed_ab.base_batch(args.base) or args.batch
    why = refusal(Candidate("the base", args.base))
    if why:
        raise ValueError(why)
    if all(jax_speed_ab.in_base(c, args.base) for c in cands):
        raise ValueError(f"{args.base} holds every candidate ("
                         f"{', '.join(c.name for c in cands)}); nothing "
                         "to judge")


def _at_least(low: int):
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below {low}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for the results")
    p.add_argument("--budget", type=float, default=300,
                   help="seconds for everything (default: %(default)s)")
    p.add_argument("--dtypes", type=lambda s: s.split(","),
                   default=["bf16", "fp16"],
                   help="precisions, comma-separated, in order (default: "
                        "bf16,fp16)")
    p.add_argument("--only", type=lambda s: s.split(","),
                   default=list(DEFAULT_CANDIDATES),
                   help="candidates by name, comma-separated, '+' for "
                        "several together, ':key=value' for Pallas kernel "
                        "settings (bn_pallas:num_warps=8; default: "
                        + ", ".join(DEFAULT_CANDIDATES) + ")")
    p.add_argument("--rounds", type=_at_least(2), default=8,
                   help="blocks per side, >= 2 (default: %(default)s)")
    p.add_argument("--steps", type=_at_least(1), default=20,
                   help="steps per block (default: %(default)s)")
    p.add_argument("--warmup", type=_at_least(1), default=10,
                   help="steps after each build, untimed, >= 1 (default: "
                        "%(default)s)")
    p.add_argument("--batch", type=_at_least(1), default=256,
                   help="images a step on the one device, unless the "
                        "candidate sets it (default: %(default)s)")
    p.add_argument("--build", type=float, default=40.0,
                   help="estimated seconds to build and compile a side, "
                        "until the baseline's is measured (default: "
                        "%(default)s)")
    p.add_argument("--rate", type=float, default=6500.0,
                   help="estimated img/s, for the budget (default: "
                        "%(default)s)")
    jax_speed_ab.add_base_option(p)
    p.add_argument("--cpu", action="store_true",
                   help=f"a tiny model on the CPU, batch {CPU_BATCH} (a "
                        "check of the flow)")
    return p


def main(argv=None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    bad = [d for d in args.dtypes if d not in jax_speed_ab.GPU_CONFIGS]
    if bad:
        p.error(f"unknown dtype(s) {', '.join(bad)}; valid: "
                f"{', '.join(jax_speed_ab.GPU_CONFIGS)}")
    try:
        cands = candidates(args.only)
    except ValueError as e:
        p.error(f"--only: {e}")
    problem = jax_speed_ab.precision_problem(cands, args.dtypes)
    if problem:
        p.error(f"--dtypes: {problem}")
    if args.cpu:
        args.batch = min(args.batch, CPU_BATCH)
    try:
        check_base(args, cands)
    except ValueError as e:
        p.error(f"--base: {e}")
    os.makedirs(args.out, exist_ok=True)
    start = time.monotonic()
    rows = run_all(args, cands, lambda line: print(line, flush=True))
    env = environment()
    used = time.monotonic() - start
    with open(os.path.join(args.out, "ab_verdicts.md"), "w") as f:
        f.write(markdown(args, rows, env, used))
    with open(os.path.join(args.out, "ab.json"), "w") as f:
        json.dump(as_json(args, rows, env), f, indent=1)
    judged = sum(r.verdict is not None for r in rows)
    print(f"{judged} of {len(rows)} candidate(s) judged: "
          f"{os.path.join(args.out, 'ab_verdicts.md')}", flush=True)
    return 0 if rows and not any(r.failure for r in rows) and judged else 1


if __name__ == "__main__":
    sys.exit(main())
