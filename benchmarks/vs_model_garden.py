"""This trainer against Model Garden's legacy classifier_trainer, same work.

Issue 9 section 5 and issue 18: ResNet-50 224x224, batch 8, one_device,
synthetic data, on this machine's CPU, one precision at a time. Each run is a
separate process, run by the A/B runner of official-bench-compare
(official_bench/judge/ab.py): rounds alternate, in order and then
reversed (Model Garden, ours, [baseline,] then [baseline,] ours, Model
Garden, ...), so drift of a shared machine's load hits every side. A run's
images/sec is the mean of its TimeHistory intervals after the first two
(warm-up, tracing); both trainers log the same `TimeHistory: ...
examples/second` line. Printed: per-run numbers with the load average, the
medians, and ours / Model Garden per precision with a 95% interval and the
verdict of judge/verdict.py (faster, slower, or no difference measurable
at this spread), then the ratio round by round (paired: a round's two runs
share the machine's drift) with its median and lowest. Target: >= 1.0.

Model Garden runs from its own venv (~/.cache/official_bench/
venv-model-garden, made with `python3 -m venv` + pip on first use: it pins its
own TensorFlow, ~2 GB); nothing of it is imported here. Its current release no
longer runs DLPerf's piecewise_constant_with_warmup schedule, so both sides get
an exponential schedule.

Same on both sides: ResNet-50 v1.5 (1000 classes, L2 1e-4 on conv/dense
kernels, BN momentum 0.9 / epsilon 1e-5, float32 softmax), batch 8, 224x224,
SGD momentum 0.875, exponential LR (0.01, x0.97 per epoch, no warm-up),
categorical crossentropy with label smoothing 0.1 (one-hot labels), top-1
and top-5 metrics, one step per `fit` iteration, no checkpoints/TensorBoard.
What still differs is listed in BENCHMARKS.md ("vs Model Garden").

    .venv/bin/python benchmarks/vs_model_garden.py                # fp32 + bf16
    .venv/bin/python benchmarks/vs_model_garden.py --dtype bfloat16 --pairs 3
    .venv/bin/python benchmarks/vs_model_garden.py --quick  # 1 pair, 20 steps
    .venv/bin/python benchmarks/vs_model_garden.py --baseline /tmp/main
        # a third side per round: another checkout (before/after)
    .venv/bin/python benchmarks/vs_model_garden.py --variant \
        runtime.restore_malloc_thresholds=false   # a third side: ours with
        # that override (before/after of one setting, same checkout)
    .venv/bin/python benchmarks/vs_model_garden.py --cpu_kernels eigen
        # both sides with TF_ENABLE_ONEDNN_OPTS=0 (default auto: what
        # runtime.cpu_kernels auto picks on this CPU, for both sides)

Both sides run the same CPU kernels: --cpu_kernels is resolved once, by
official_bench's rule (runtime/cpu_kernels.py), into TF_ENABLE_ONEDNN_OPTS
in this script's environment, which every side's process inherits (left
as it is where the rule keeps TensorFlow's default). bfloat16 is skipped,
with "not measurable on this CPU", where the cores lack bf16 units (no
avx512_bf16 or amx_bf16 flag): both sides would crawl at a small fraction
of float32's speed (issue 31).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

import yaml

from official_bench.contracts.trainer_command import trainer_argv
from official_bench.judge import ab, verdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MG_PACKAGE = "tf-models-official==2.20.0"
MG_VENV = os.path.join(os.path.expanduser("~"), ".cache", "official_bench",
                       "venv-model-garden")
MG_MODULE = "official.legacy.image_classification.classifier_trainer"
DTYPES = ("float32", "bfloat16", "float16")
BATCH = 8
IMAGE_SIZE = 224  # Model Garden's legacy resnet50 hard-codes 224x224x3
WARMUP_INTERVALS = 2


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", default="float32,bfloat16",
                   help="comma list of " + ", ".join(DTYPES) +
                        " (default float32,bfloat16)")
    p.add_argument("--pairs", type=int, default=None,
                   help="alternating (Model Garden, ours) pairs per dtype "
                        "(default 3; --quick: 1)")
    p.add_argument("--steps", type=int, default=None,
                   help="training steps per run (default 40; --quick: 20)")
    p.add_argument("--log-steps", type=int, default=5,
                   help="steps per TimeHistory interval, both sides; "
                        "--steps must leave one after the "
                        f"{WARMUP_INTERVALS} warm-up ones (default 5)")
    p.add_argument("--quick", action="store_true",
                   help="1 pair of 20 steps per dtype (~3 min each); noisy")
    p.add_argument("--repo", default=REPO,
                   help="checkout of official_bench whose trainer is 'ours' "
                        "(default: this one), e.g. an export of main for a "
                        "before/after comparison")
    p.add_argument("--baseline", default=None,
                   help="another checkout (e.g. an export of main) run as a "
                        "third side in each round, for before/after")
    p.add_argument("--variant", default=None, metavar="KEY=VALUE[,...]",
                   help="a third side per round: ours with this "
                        "--params_override, e.g. "
                        "runtime.restore_malloc_thresholds=false")
    p.add_argument("--cpu_kernels", default="auto",
                   choices=("auto", "onednn", "eigen"),
                   help="the same TF_ENABLE_ONEDNN_OPTS for both sides: 1 "
                        "(onednn), 0 (eigen) or what runtime.cpu_kernels "
                        "auto picks on this CPU (default)")
    p.add_argument("--venv", default=MG_VENV,
                   help="Model Garden's venv (created if missing; default "
                        "%(default)s)")
    p.add_argument("--logs", default=None,
                   help="keep each run's log in this directory")
    args = p.parse_args(argv)
    args.dtype = [d for d in args.dtype.split(",") if d]
    for d in args.dtype:
        if d not in DTYPES:
            p.error(f"--dtype {d!r}: choose from {', '.join(DTYPES)}")
    args.pairs = args.pairs or (1 if args.quick else 3)
    args.steps = args.steps or (20 if args.quick else 40)
    need = (WARMUP_INTERVALS + 1) * args.log_steps
    if args.steps < need:
        p.error(f"--steps {args.steps} leaves no interval after the "
                f"{WARMUP_INTERVALS} warm-up ones; use >= {need}")
    return args


def ensure_model_garden(venv: str) -> str:
    """The venv's python, after creating it and installing MG if needed."""
    python = os.path.join(venv, "bin", "python")
    check = [python, "-c", f"import importlib.util as u; "
             f"assert u.find_spec('{MG_MODULE}')"]
    if os.path.exists(python) and subprocess.run(
            check, capture_output=True).returncode == 0:
        return python
    print(f"[setup] creating {venv} and installing {MG_PACKAGE} (pulls its "
          "own TensorFlow, ~2 GB; once)", flush=True)
    if not os.path.exists(python):
        subprocess.run(["python3", "-m", "venv", venv], check=True)
    subprocess.run([python, "-m", "pip", "install", "--progress-bar", "off",
                    MG_PACKAGE], check=True)
    subprocess.run(check, check=True)
    print("[setup] Model Garden installed", flush=True)
    return python


def kernels_value(requested: str, environ, flags) -> Optional[str]:
    """TF_ENABLE_ONEDNN_OPTS as runtime.cpu_kernels `requested` resolves on
    this CPU for a CPU run (None: leave the environment as it is), so Model
    Garden, which has no such setting, computes with ours' kernels."""
    from official_bench.runtime import cpu_kernels  # TensorFlow-free
    return cpu_kernels.decide(requested, 0, environ, flags).value


def bf16_measurable(dtypes: List[str], flags) -> List[str]:
    """The dtypes this CPU can compare: bfloat16 is left out, with a line
    saying so, where the cores lack bf16 units."""
    from official_bench.host import cpu_features  # TensorFlow-free
    if "bfloat16" in dtypes and cpu_features.has_bf16_units(flags) is False:
        print("bfloat16: not measurable on this CPU (no avx512_bf16 or "
              "amx_bf16 flag in /proc/cpuinfo: bfloat16 is emulated there, "
              "~25x slower than float32, issue 31); skipped", flush=True)
        return [d for d in dtypes if d != "bfloat16"]
    return dtypes


def dataset(dtype: str, steps: int, split: str) -> Dict:
    return {"name": "imagenet2012", "builder": "synthetic", "split": split,
            "image_size": IMAGE_SIZE, "num_classes": 1000,
            "num_examples": BATCH * steps, "batch_size": BATCH,
            "use_per_replica_batch_size": True, "dtype": dtype,
            # Model Garden shuffles its synthetic images before batching: the
            # default 10000-image buffer (3-6 GB) only slows its start-up.
            # No normalisation in its input map (ours has none for
            # synthetic data).
            "shuffle_buffer_size": 16, "mean_subtract": False,
            "standardize": False}


def config(dtype: str, steps: int, log_steps: int) -> Dict:
    """One config both trainers accept (Model Garden r2.3's schema)."""
    return {
        "runtime": {"distribution_strategy": "one_device", "num_gpus": 0},
        "train_dataset": dataset(dtype, steps, "train"),
        "validation_dataset": dataset(dtype, steps, "validation"),
        "model": {
            "name": "resnet",
            "model_params": {"rescale_inputs": False},
            "optimizer": {"name": "momentum", "momentum": 0.875},
            "learning_rate": {"name": "exponential", "initial_lr": 0.01,
                              "decay_epochs": 1, "decay_rate": 0.97,
                              "warmup_epochs": 0, "scale_by_batch_size": 0,
                              "staircase": True},
            "loss": {"label_smoothing": 0.1}},
        "train": {"epochs": 1, "steps": steps,
                  "time_history": {"log_steps": log_steps},
                  "callbacks": {"enable_checkpoint_and_export": False,
                                "enable_tensorboard": False,
                                "enable_time_history": True}},
        "evaluation": {"skip_eval": True},
    }


def command(side: str, python: str, config_file: str, model_dir: str,
            log_steps: int, override: Optional[str] = None):
    if side == "mg":
        return [python, "-m", MG_MODULE, "--mode=train_and_eval",
                "--model_type=resnet", "--dataset=imagenet",
                # required by its flags; synthetic data reads nothing there
                f"--data_dir={model_dir}",
                # its --log_steps flag (default 100) overrides the config's
                f"--log_steps={log_steps}",
                f"--config_file={config_file}", f"--model_dir={model_dir}"]
    return trainer_argv(python, mode="train_and_eval",
                        config_file=config_file, model_dir=model_dir,
                        params_override=override or None)


def tf_version(python: str) -> str:
    """Without importing TensorFlow: the two sides pin different releases,
    and a release can change the speed (BENCHMARKS.md: 2.21's malloc)."""
    proc = subprocess.run(
        [python, "-c", "import importlib.metadata as m; "
                       "print(m.version('tensorflow'))"],
        capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def load() -> str:
    return "%.2f" % os.getloadavg()[0]


def side(name: str, python: str, cwd: str, config_file: str, log_steps: int,
         env: Dict[str, str], override: Optional[str] = None) -> ab.Side:
    """One side of the A/B runner: a trainer command per run directory."""
    return ab.Side(name, lambda work: command(
        name, python, config_file, os.path.join(work, "model"), log_steps,
        override), cwd, env)


def compare(dtype: str, args, mg_python: str, work: str) -> Dict[str, float]:
    """Alternating rounds for one dtype (judge/ab.py); ours/MG (and
    baseline/MG, variant/MG) with judge/verdict.py's interval."""
    cfg = config(dtype, args.steps, args.log_steps)
    config_file = os.path.join(work, f"{dtype}.yaml")
    with open(config_file, "w") as f:
        yaml.safe_dump(cfg, f)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1")
    sides = [side("mg", mg_python, work, config_file, args.log_steps, env),
             side("ours", sys.executable, args.repo, config_file,
                  args.log_steps, env)]
    if args.baseline:
        sides.append(side("baseline", sys.executable, args.baseline,
                          config_file, args.log_steps, env))
    if args.variant:
        sides.append(side("variant", sys.executable, args.repo, config_file,
                          args.log_steps, env, args.variant))
    print(f"\n== {dtype}: ResNet-50 {IMAGE_SIZE}x{IMAGE_SIZE}, batch {BATCH}, "
          f"one_device, synthetic, {args.steps} steps, log_steps "
          f"{args.log_steps}; ours from {args.repo}" +
          (f", baseline from {args.baseline}" if args.baseline else "") +
          (f", variant = ours with {args.variant}" if args.variant else ""),
          flush=True)
    logs = os.path.join(args.logs, dtype) if args.logs else None
    records = ab.alternate(
        sides, args.pairs, os.path.join(work, dtype), WARMUP_INTERVALS, logs,
        on_run=lambda r: print(ab.describe_run(r), flush=True),
        progress=lambda line: print(line, flush=True))
    runs = {name: [r.rates for r in recs] for name, recs in records.items()}
    ratios = {}
    for name in runs:
        if name == "mg":
            continue
        v = verdict.compare_runs(runs["mg"], runs[name])
        ratios[name] = v.ratio
        print(f"{dtype}: median mg {v.median_a:.2f}, {name} "
              f"{v.median_b:.2f} img/s; " + v.describe("MG", name),
              flush=True)
        print(f"{dtype}: " + verdict.round_ratios(
            runs["mg"], runs[name]).describe("MG", name), flush=True)
    return ratios


def main(argv=None, cpu_flags=None) -> int:
    """`cpu_flags` stands in for /proc/cpuinfo's flags (tests)."""
    from official_bench.host import cpu_features
    from official_bench.runtime.cpu_kernels import ENV
    args = parse_args(argv)
    flags = cpu_features.read_flags() if cpu_flags is None else cpu_flags
    args.dtype = bf16_measurable(args.dtype, flags)
    if not args.dtype:
        return 0
    value = kernels_value(args.cpu_kernels, os.environ, flags)
    if value is not None:
        os.environ[ENV] = value  # every side's process inherits it
    print(f"CPU kernels for every side: {ENV}="
          f"{os.environ.get(ENV, 'unset (TensorFlow default)')} "
          f"(--cpu_kernels {args.cpu_kernels})", flush=True)
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
    mg_python = ensure_model_garden(args.venv)
    print(f"{os.cpu_count()} CPUs; load {load()}; ours: {sys.executable} in "
          f"{args.repo} (TensorFlow {tf_version(sys.executable)}); Model "
          f"Garden: {MG_PACKAGE} in {args.venv} (TensorFlow "
          f"{tf_version(mg_python)})")
    ratios = {}
    with tempfile.TemporaryDirectory(prefix="vs_mg_") as work:
        for dtype in args.dtype:
            ratios[dtype] = compare(dtype, args, mg_python, work)
    print("\nsummary (ratio of medians to Model Garden's; target for ours "
          ">= 1.0): " + "; ".join(
              f"{d} " + ", ".join(f"{side} {r:.3f}" for side, r in rs.items())
              for d, rs in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
