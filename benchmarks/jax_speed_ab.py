"""A/B of the JAX backend's speed candidates (issue 47, item 3) with the
suite's own runner and verdict, within a time budget.

Each precision is one alternation (judge/ab.py's run_once and round
order): the baseline and every candidate that fits the budget, one trainer
process per run (the run scripts' GPU YAML, synthetic data fed from the
host, as `bash run_single_node.sh 256 <dtype>` trains), `--pairs` rounds.
Every candidate is then judged against the baseline of its own
alternation by official-bench-compare's rule (judge/compare.py's
compare_sides: ratio of medians, bootstrap interval, verdict), so one
baseline serves all of them. Candidates are tried in order of expected
value; what the budget cannot hold is listed as skipped, and a candidate
whose run fails (a flag this XLA does not know) is reported, not fatal.
`--base` adds dotted overrides to both sides (a previous winner), so the
candidates are judged on top of it; one the base already holds is listed
as such and not run (it would be the base against itself).

    python benchmarks/jax_speed_ab.py --out OUT --budget 400          # GPU
    python benchmarks/jax_speed_ab.py --out OUT --dry-run             # plan
    python benchmarks/jax_speed_ab.py --out OUT --cpu --only pad4     # check
    python benchmarks/jax_speed_ab.py --out OUT --dtypes fp16 \
        --only conv_fusion --base train_dataset.batch_size=512

OUT gets ab_verdicts.md (the table for BENCHMARKS.md), ab.json (every
run's intervals), logs/ (each run's output) and work/ (their model_dirs).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shlex
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from official_bench.extract.errors import ExtractError  # noqa: E402
from official_bench.judge import ab, compare  # noqa: E402

CONFIG_DIR = os.path.join(REPO, "configs", "examples", "resnet", "imagenet")
GPU_CONFIGS = {"fp16": "gpu_fp16.yaml", "bf16": "gpu_bf16.yaml"}
BASE = ("runtime.backend=jax,runtime.num_gpus=1,"
        "train_dataset.builder=synthetic,validation_dataset.builder=synthetic,"
        "history.enabled=false")
CPU_BASE = ("runtime.backend=jax,runtime.num_gpus=0,"
            "runtime.distribution_strategy=one_device,"
            "model.name=resnet_cifar,model.model_params.depth=8,"
            "train_dataset.image_size=16,train_dataset.num_classes=10,"
            "train_dataset.builder=synthetic,evaluation.skip_eval=true,"
            "history.enabled=false,runtime.sample_period_seconds=0")


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One change to try: its override and the batch it trains at."""
    name: str
    override: str
    batch: Optional[int] = None  # None: the baseline's
    dtypes: Tuple[str, ...] = ("bf16", "fp16")
    why: str = ""


def precision_problem(cands: Sequence[Candidate], dtypes: Sequence[str]
                      ) -> Optional[str]:
    """Why no candidate runs in any of `dtypes` (each is for other
    precisions), else None."""
    if any(d in c.dtypes for c in cands for d in dtypes):
        return None
    return (f"no candidate runs in {','.join(dtypes)}: "
            + "; ".join(f"{c.name} is {'/'.join(c.dtypes)} only"
                        for c in cands))


def override_items(text: str) -> List[str]:
    """The `key=value` items of a dotted override, split outside brackets
    and quotes; ValueError naming an item without '='."""
    from official_bench.config.loading import _split_top_level
    items = _split_top_level(text or "")
    bad = [item for item in items if "=" not in item]
    if bad:
        raise ValueError(f"{', '.join(bad)}: not of the form key.path=value")
    return [item.replace(" ", "") for item in items]


def base_batch(base: str) -> Optional[int]:
    """The batch the base sets (train_dataset.batch_size), else None;
    ValueError when it is not a positive integer."""
    for item in override_items(base):
        key, value = item.split("=", 1)
        if key == "train_dataset.batch_size":
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"{item}: the batch must be a positive "
                                 "integer")
            return int(value)
    return None


def add_base_option(p: argparse.ArgumentParser) -> None:
    """--base, as both A/B drivers take it."""
    p.add_argument("--base", default="",
                   help="dotted overrides on both sides, candidates judged "
                        "on top of them (train_dataset.batch_size=512,"
                        "model.model_params.bn_statistics=one_pass)")


def in_base(cand: "Candidate", base: str) -> str:
    """Why `cand` is not run on `base`: every item of its change is in the
    base already, so it would be the base against itself ('' otherwise)."""
    held = set(override_items(base))
    items = override_items(cand.override)
    if base and items and all(item in held for item in items):
        return f"in the base already ({cand.override})"
    return ""


def _flag(flag: str) -> str:
    return f"runtime.xla_flags=['{flag}']"


# In order of expected value (docs/gpu_speed.md says why each is here).
CANDIDATES = (
    Candidate("b512", "train_dataset.batch_size=512", 512,
              why="bf16 b512 ran 6,875-6,895 img/s against b256's 6,481"),
    Candidate("pad4", "model.model_params.pad_input_channels=4",
              why="bf16's stem runs a generic kernel (fp16 a first-layer "
                  "one on 3 channels as 4): 2 ms of 38.5 in the H200 "
                  "profile"),
    Candidate("s2d", "model.model_params.stem_space_to_depth=true",
              why="the 7x7/2 stem as a 4x4/1 convolution of 12-channel 2x2 "
                  "blocks (MLPerf's TPU stem), aimed at bf16's slow stem"),
    Candidate("s2d_pad4", "model.model_params.stem_space_to_depth=true,"
              "model.model_params.pad_input_channels=4", dtypes=("bf16",),
              why="the same on 16 channels, a multiple of 8 for bf16"),
    Candidate("bn_one_pass", "model.model_params.bn_statistics=one_pass",
              why="BN/elementwise fusions are 55-57% of the H200 profile; "
                  "one read of each activation for its batch statistics "
                  "instead of two"),
    Candidate("bn_pallas", "model.model_params.bn_statistics=pallas",
              why="one_pass' two sums from one Pallas (Triton) kernel that "
                  "reads each activation once, in its own dtype"),
    Candidate("pad8", "model.model_params.pad_input_channels=8",
              dtypes=("bf16",),
              why="cuDNN pads bf16's stem to 8 channels in its own kernel"),
    Candidate("conv_fusion",
              _flag("--xla_gpu_experimental_enable_conv_fusion=true"),
              why="cuDNN fuses BN/ReLU into convolutions"),
    Candidate("b384", "train_dataset.batch_size=384", 384),
    Candidate("runtime_fusion", _flag("--xla_gpu_use_runtime_fusion=true"),
              why="cuDNN runtime-compiled conv+elementwise fusions"),
    Candidate("cmdbuf_cond", _flag(
        "--xla_gpu_enable_command_buffer=+CONDITIONAL"), dtypes=("fp16",),
        why="CUDA graphs across fp16's loss-scale conditional"),
    Candidate("cmdbuf_off", _flag("--xla_gpu_enable_command_buffer="),
              why="what XLA's default CUDA graphs give"),
    Candidate("b400", "train_dataset.batch_size=400", 400),
    Candidate("autotune0", _flag("--xla_gpu_autotune_level=0"),
              why="what autotuning gives (expected slower)"),
    Candidate("pool_shifted", "model.model_params.stem_pool=shifted",
              why="the stem max-pool's gradient without select_and_scatter "
                  "(1.30 ms, 3.5% of the H200 step): fusable selects"),
    Candidate("bn_vjp", "model.model_params.bn_backward=vjp",
              why="the batch norms' backward written out: two reads of x "
                  "and dy, x the only activation-sized residual"),
    Candidate("bn_vjp_relu", "model.model_params.bn_backward=vjp_relu",
              why="bn_vjp with the ReLU after a batch norm inside it (33 "
                  "of ResNet-50's 53): its mask recomputed from x, so the "
                  "backward never reads the ReLU's output"),
    Candidate("ls_select", "runtime.loss_scale_update=select",
              dtypes=("fp16",),
              why="fp16's loss-scaled update without lax.cond: the H200 "
                  "profile's copies are 1.324 ms a step in fp16, 0.884 in "
                  "bf16 (+0.44 ms)"),
)


@dataclasses.dataclass
class Costs:
    """Seconds a run takes, estimated (defaults: an H200, BENCHMARKS.md):
    process start, model, cached compile, FLOP count and exit; the first
    compile of a new program on top; training at `rate` img/s."""
    overhead: float = 14.0
    compile: float = 18.0
    rate: float = 6500.0
    scale: float = 1.0  # measured / estimated, after the first runs

    def run(self, batch: int, steps: int) -> float:
        return self.scale * (self.overhead + steps * batch / self.rate)

    def side(self, batch: int, steps: int, pairs: int) -> float:
        return pairs * self.run(batch, steps) + self.scale * self.compile


@dataclasses.dataclass
class Plan:
    """What runs, per precision, and what was skipped and why."""
    groups: Dict[str, List[Candidate]]
    skipped: List[Tuple[str, str, str]]  # (dtype, candidate, why)
    seconds: float


def plan(candidates: Sequence[Candidate], dtypes: Sequence[str],
         budget: float, costs: Costs, batch: int, steps: int,
         pairs: int) -> Plan:
    """Candidates in order, each precision in turn, while the estimate
    fits the budget; a precision's baseline is paid with its first."""
    groups: Dict[str, List[Candidate]] = {}
    skipped, total = [], 0.0
    for cand in candidates:
        for dtype in dtypes:
            if dtype not in cand.dtypes:
                continue
            cost = costs.side(cand.batch or batch, steps, pairs)
            if dtype not in groups:
                cost += costs.side(batch, steps, pairs)
            if total + cost > budget:
                skipped.append((dtype, cand.name, f"needs ~{cost:.0f} s, "
                                f"{budget - total:.0f} s of the budget left"))
                continue
            total += cost
            groups.setdefault(dtype, []).append(cand)
    return Plan(groups, skipped, total)


@dataclasses.dataclass
class Row:
    """One candidate's verdict against its precision's baseline."""
    dtype: str
    candidate: Candidate
    comparison: Optional[compare.CaseComparison] = None
    failure: str = ""


def base_override(args, dtype: str) -> str:
    """Both sides' --params_override before a candidate's change."""
    from official_bench.contracts import dtypes
    parts = [CPU_BASE if args.cpu else BASE, f"train.steps={args.steps}",
             f"train.time_history.log_steps={args.log_steps}",
             f"train_dataset.batch_size={args.batch}",
             f"validation_dataset.batch_size={args.batch}"]
    if args.cpu:
        parts.append(f"train_dataset.dtype={dtypes.tf_name(dtype)}")
    if args.base:
        parts.append(args.base)
    return ",".join(parts)


def side_of(args, dtype: str, cand: Optional[Candidate]) -> ab.Side:
    """The trainer side for a candidate (None: the baseline)."""
    override = base_override(args, dtype)
    if cand:
        override += "," + cand.override
    config = None if args.cpu else os.path.join(CONFIG_DIR,
                                                GPU_CONFIGS[dtype])
    return ab.trainer_side(cand.name if cand else "baseline", config,
                           override, args.python)


def run_group(args, dtype: str, sides: Sequence[ab.Side], timeout: float,
              say) -> Tuple[Dict[str, list], Dict[str, str]]:
    """`args.pairs` rounds of the sides in the runner's alternating order;
    (records by side, first line of each failed side's error). A side that
    fails runs no more; without a baseline nothing runs on."""
    records: Dict[str, list] = {s.name: [] for s in sides}
    failed: Dict[str, str] = {}
    for round_no in range(args.pairs):
        for side in ab.round_order(sides, round_no):
            if side.name in failed or "baseline" in failed:
                continue
            tag = f"{dtype}_{side.name}_{round_no + 1}"
            try:
                record = ab.run_once(
                    side, os.path.join(args.out, "work", tag), round_no + 1,
                    args.warmup_intervals,
                    os.path.join(args.out, "logs", tag + ".log"), timeout,
                    say, f"{dtype} {side.name} round {round_no + 1}/"
                    f"{args.pairs}")
            except ExtractError as e:
                failed[side.name] = str(e).splitlines()[0]
                say(f"[{dtype} {side.name}] FAILED: {failed[side.name]}")
                continue
            records[side.name].append(record)
            say(f"[{dtype}] {ab.describe_run(record)}")
    return records, failed


def judge(dtype: str, cands: Sequence[Candidate], records, failed
          ) -> List[Row]:
    """Each candidate against the baseline, by compare_sides."""
    def side(name):
        return compare.SideRuns(name, "runner", {compare.RUNNER_CASE: [
            r.intervals for r in records[name]]}, label=name)
    rows = []
    for cand in cands:
        why = failed.get(cand.name) or (
            f"baseline failed: {failed['baseline']}"
            if "baseline" in failed else "")
        if why or not records[cand.name]:
            rows.append(Row(dtype, cand, failure=why or "no run"))
            continue
        comparisons, _ = compare.compare_sides(side("baseline"),
                                               side(cand.name))
        rows.append(Row(dtype, cand, comparisons[0]))
    return rows


def environment(out: str) -> Dict[str, str]:
    """Card and JAX version from the first result.json the runs wrote."""
    work = os.path.join(out, "work")
    for tag in sorted(os.listdir(work)) if os.path.isdir(work) else ():
        path = os.path.join(work, tag, "model", "result.json")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                env = json.load(f).get("environment") or {}
            return {"card": ", ".join(sorted(set(env.get("gpu_names") or [])))
                    or env.get("cpu_model") or "cpu",
                    "jax": str(env.get("jax")),
                    "keras": str(env.get("keras"))}
    return {"card": "unknown (no result.json)", "jax": "?", "keras": "?"}


def command(args, dtype: str, cand: Candidate) -> str:
    """The same A/B on its own, as official-bench-compare runs it, quoted
    for a shell (an XLA flag's list holds single quotes)."""
    config = "" if args.cpu else "--config " + os.path.relpath(
        os.path.join(CONFIG_DIR, GPU_CONFIGS[dtype]), REPO) + " "
    base = base_override(args, dtype)
    return (f"official-bench-compare {config}--a-override "
            f"{shlex.quote(base)} --b-override "
            f"{shlex.quote(base + ',' + cand.override)} --pairs "
            f"{args.pairs} --warmup_intervals {args.warmup_intervals}")


def base_words(base: str) -> str:
    """The base in the tables' first line ('' without one)."""
    return f"; base on both sides: `{base}`" if base else ""


def markdown(args, rows: Sequence[Row], skipped, env, used: float) -> str:
    """The verdict table, what was skipped, and each A/B's command."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC")
    out = [f"JAX speed A/B on {env['card']}, {when}, JAX {env['jax']}, "
           f"Keras {env['keras']}: {args.pairs} round(s) per side, "
           f"{args.steps} steps in intervals of {args.log_steps} (the first "
           f"{args.warmup_intervals} left out), batch {args.batch} unless "
           f"the candidate sets it{base_words(args.base)}; budget "
           f"{args.budget:.0f} s, used {used:.0f} s.", "",
           "| precision | candidate | change | baseline img/s | candidate "
           "img/s | B/A | 95% interval | runs | verdict |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        change = r.candidate.override.replace("|", "/")
        if r.comparison is None:
            out.append(f"| {r.dtype} | {r.candidate.name} | `{change}` | - "
                       f"| - | - | - | - | failed: {r.failure} |")
            continue
        v = r.comparison.verdict
        out.append(f"| {r.dtype} | {r.candidate.name} | `{change}` | "
                   f"{v.median_a:,.1f} | {v.median_b:,.1f} | {v.ratio:.3f} "
                   f"| {v.interval_text()} | {v.runs_a}/{v.runs_b} "
                   f"| {v.verdict} |")
    out += ["", "Skipped (budget): " + ("; ".join(
        f"{d} {n} ({why})" for d, n, why in skipped
        if not why.startswith("in the base")) or "none") + "."]
    held = [f"{d} {n}" for d, n, why in skipped
            if why.startswith("in the base")]
    if held:
        out.append("Not run, in the base already: " + ", ".join(held) + ".")
    out += ["",
        "Each A/B alone (the script ran each precision's candidates in one "
        "alternation, sharing its baseline):", ""]
    out += [f"- `{command(args, r.dtype, r.candidate)}`" for r in rows]
    return "\n".join(out) + "\n"


def as_json(args, rows: Sequence[Row], records, skipped, env) -> dict:
    """Every run's counted interval rates, the verdicts, the plan."""
    return {
        "args": {k: v for k, v in vars(args).items() if k != "python"},
        "environment": env, "base": args.base, "skipped": skipped,
        "runs": {dtype: {name: [r.rates for r in runs]
                         for name, runs in by_side.items()}
                 for dtype, by_side in records.items()},
        "verdicts": [dict(dtype=r.dtype, candidate=r.candidate.name,
                          override=r.candidate.override, failure=r.failure,
                          **(r.comparison.verdict.as_dict()
                             if r.comparison else {})) for r in rows]}


def _say(line: str) -> None:
    print(line, flush=True)


def run_all(args, candidates: Sequence[Candidate], costs: Costs):
    """Each precision's alternation in turn, planned again before each
    from what is left of the budget and the measured cost of runs so far;
    (rows, records by precision, skipped, seconds used)."""
    start = time.monotonic()
    rows, records, skipped = [], {}, []
    dtypes = list(args.dtypes)
    while dtypes:
        left = args.budget - (time.monotonic() - start)
        p = plan(candidates, dtypes, left, costs, args.batch, args.steps,
                 args.pairs)
        dtype = dtypes.pop(0)
        skipped += [s for s in p.skipped if s[0] == dtype]
        cands = p.groups.get(dtype, [])
        if not cands:
            continue
        sides = [side_of(args, dtype, None)] + [
            side_of(args, dtype, c) for c in cands]
        estimate = costs.side(args.batch, args.steps, args.pairs) + sum(
            costs.side(c.batch or args.batch, args.steps, args.pairs)
            for c in cands)
        _say(f"[{dtype}] {len(sides)} sides x {args.pairs} round(s): "
             f"{', '.join(s.name for s in sides)} (~{estimate:.0f} s)")
        began = time.monotonic()
        timeout = 3 * costs.run(args.batch * 2, args.steps) + \
            costs.compile + 120
        records[dtype], failed = run_group(args, dtype, sides, timeout, _say)
        took = time.monotonic() - began
        costs.scale = min(3.0, max(0.3, costs.scale * took / estimate))
        rows += judge(dtype, cands, records[dtype], failed)
    return rows, records, skipped, time.monotonic() - start


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for the results")
    p.add_argument("--budget", type=float, default=400,
                   help="seconds for all runs (default: %(default)s)")
    p.add_argument("--dtypes", type=lambda s: s.split(","),
                   default=["bf16", "fp16"],
                   help="precisions, comma-separated, in order (default: "
                        "bf16,fp16)")
    p.add_argument("--only", type=lambda s: s.split(","),
                   help="candidates by name, comma-separated, '+' for "
                        "several together (b512+pad4): "
                        + ", ".join(c.name for c in CANDIDATES))
    p.add_argument("--pairs", type=int, default=2,
                   help="rounds per side (default: %(default)s)")
    p.add_argument("--batch", type=int, default=256,
                   help="images a step on the one device, unless the "
                        "candidate sets it (default: %(default)s)")
    p.add_argument("--steps", type=int, default=120,
                   help="training steps per run (default: %(default)s)")
    p.add_argument("--log_steps", type=int, default=20,
                   help="steps per timed interval (default: %(default)s)")
    p.add_argument("--warmup_intervals", type=int, default=1,
                   help="a run's first intervals left out of its rate "
                        "(default: %(default)s)")
    p.add_argument("--overhead", type=float, default=Costs.overhead,
                   help="estimated seconds per run besides training "
                        "(default: %(default)s)")
    p.add_argument("--compile", type=float, default=Costs.compile,
                   help="estimated first-compile seconds per side (default: "
                        "%(default)s)")
    p.add_argument("--rate", type=float, default=Costs.rate,
                   help="estimated img/s, for the budget (default: "
                        "%(default)s)")
    add_base_option(p)
    p.add_argument("--python", default=sys.executable,
                   help="Python that runs the trainer (default: this one)")
    p.add_argument("--cpu", action="store_true",
                   help="a tiny model on the CPU (a check of the flow)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan and the commands, run nothing")
    return p


def combined(parts: Sequence[Candidate]) -> Candidate:
    """Candidates applied together ("b512+pad4"): their overrides in order,
    the batch the one that sets it asks for, the precisions all take.
    ValueError when two set the batch or no precision is left."""
    batches = [c.batch for c in parts if c.batch]
    if len(batches) > 1:
        raise ValueError(f"{'+'.join(c.name for c in parts)}: more than one "
                         "sets the batch")
    dtypes = tuple(d for d in parts[0].dtypes
                   if all(d in c.dtypes for c in parts))
    if not dtypes:
        raise ValueError(f"{'+'.join(c.name for c in parts)}: no precision "
                         "that all of them run in")
    return Candidate("+".join(c.name for c in parts),
                     ",".join(c.override for c in parts),
                     batches[0] if batches else None, dtypes,
                     why="together: " + ", ".join(c.name for c in parts))


class UnknownCandidate(ValueError):
    """A name that is not among CANDIDATES."""


def resolve(names: Sequence[str]) -> List[Candidate]:
    """The named candidates, '+' joining several (combined). Raises
    UnknownCandidate naming the unknown ones and the valid names, or
    combined's ValueError."""
    known = {c.name: c for c in CANDIDATES}
    unknown = [n for name in names for n in name.split("+")
               if n not in known]
    if unknown:
        raise UnknownCandidate(f"unknown candidate(s) {', '.join(unknown)}; "
                               f"valid: {', '.join(known)}")
    return [combined([known[n] for n in name.split("+")])
            if "+" in name else known[name] for name in names]


def _candidates(args) -> List[Candidate]:
    if not args.only:
        return list(CANDIDATES)
    try:
        return resolve(args.only)
    except UnknownCandidate as e:
        raise SystemExit(str(e)) from None
    except ValueError as e:
        raise SystemExit(f"--only {e}") from None


def apply_base(args, candidates: Sequence[Candidate]):
    """(the candidates to run, (dtype, name, why) of those the base holds);
    the base's batch becomes args.batch. SystemExit naming a malformed
    base, or a base that holds every candidate."""
    try:
        args.batch = base_batch(args.base) or args.batch
        held = {c.name: in_base(c, args.base) for c in candidates}
    except ValueError as e:
        raise SystemExit(f"--base {e}") from None
    run = [c for c in candidates if not held[c.name]]
    if not run:
        raise SystemExit(f"--base {args.base}: it holds every candidate "
                         f"({', '.join(held)}); nothing to judge")
    return run, [(d, c.name, held[c.name]) for c in candidates
                 if held[c.name] for d in args.dtypes if d in c.dtypes]


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    bad = [d for d in args.dtypes if d not in GPU_CONFIGS]
    if bad:
        raise SystemExit(f"unknown dtype(s) {', '.join(bad)}; valid: "
                         f"{', '.join(GPU_CONFIGS)}")
    candidates = _candidates(args)
    problem = precision_problem(candidates, args.dtypes)
    if problem:
        raise SystemExit(f"--dtypes: {problem}")
    candidates, held = apply_base(args, candidates)
    costs = Costs(args.overhead, args.compile, args.rate)
    if args.dry_run:
        p = plan(candidates, args.dtypes, args.budget, costs, args.batch,
                 args.steps, args.pairs)
        for dtype, cands in p.groups.items():
            _say(f"{dtype}: baseline, {', '.join(c.name for c in cands)}")
            for c in cands:
                _say(f"  {command(args, dtype, c)}")
        for dtype, name, why in held + p.skipped:
            _say(f"skip {dtype} {name}: {why}")
        _say(f"estimate: {p.seconds:.0f} s of {args.budget:.0f}")
        return 0
    os.makedirs(args.out, exist_ok=True)
    rows, records, skipped, used = run_all(args, candidates, costs)
    skipped = held + skipped
    env = environment(args.out)
    text = markdown(args, rows, skipped, env, used)
    with open(os.path.join(args.out, "ab_verdicts.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "ab.json"), "w") as f:
        json.dump(as_json(args, rows, records, skipped, env), f, indent=1)
    judged = sum(r.comparison is not None for r in rows)
    _say(f"{judged} of {len(rows)} candidate(s) judged, "
         f"{len(skipped) - len(held)} skipped, {len(held)} in the base: "
         f"{os.path.join(args.out, 'ab_verdicts.md')}")
    return 0 if rows and judged == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
