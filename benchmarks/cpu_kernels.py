"""oneDNN against Eigen on this CPU: the measurement behind cpu_kernels: auto.

Issue 31 section 2. The same ResNet-50 run, one process per run, alternating
eigen, onednn, eigen, onednn, ... so drift of a shared machine's load hits
both sides. Each process is the trainer's CLI with runtime.cpu_kernels
eigen or onednn (which set TF_ENABLE_ONEDNN_OPTS to 0 or 1 before
TensorFlow is imported). A run's images/sec is the median of its TimeHistory intervals
after the first two (warm-up, tracing), as in vs_model_garden.py. Printed:
the CPU, the load before and after each run, each run's rate and what
TensorFlow reported (result.json environment.onednn_enabled, where the
trainer records it), then the medians and onednn / eigen.

    .venv/bin/python benchmarks/cpu_kernels.py                      # fp32
    .venv/bin/python benchmarks/cpu_kernels.py --dtype bfloat16 \\
        --image-size 128 --steps 12 --log-steps 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = re.compile(r"TimeHistory: [\d.]+ seconds, ([\d.]+) examples/second")
WARMUP_INTERVALS = 2
SIDES = ("eigen", "onednn")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="float32",
                   choices=("float32", "bfloat16"))
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--log-steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--logs", default=None,
                   help="keep each run's log in this directory")
    args = p.parse_args(argv)
    if args.steps < (WARMUP_INTERVALS + 1) * args.log_steps:
        p.error(f"--steps must leave an interval after the "
                f"{WARMUP_INTERVALS} warm-up ones")
    return args


def config(args) -> Dict:
    """ResNet-50, one_device, synthetic data, no evaluation or checkpoints."""
    data = {"builder": "synthetic", "image_size": args.image_size,
            "num_classes": 1000, "num_examples": args.batch * args.steps,
            "batch_size": args.batch, "dtype": args.dtype}
    return {"runtime": {"distribution_strategy": "one_device",
                        "num_gpus": 0},
            "train_dataset": data, "validation_dataset": dict(data),
            "model": {"name": "resnet", "model_params": {"depth": 50}},
            "train": {"epochs": 1, "steps": args.steps,
                      "time_history": {"log_steps": args.log_steps}},
            "evaluation": {"skip_eval": True}}


def run_once(kernels: str, config_file: str, model_dir: str,
             log_path: Optional[str]) -> Tuple[float, Optional[bool]]:
    """(img/s, TensorFlow's IsMklEnabled as result.json recorded it)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1")
    proc = subprocess.run(
        [sys.executable, "-m", "official_bench.classifier_trainer",
         "--mode=train", f"--config_file={config_file}",
         f"--model_dir={model_dir}",
         f"--params_override=runtime.cpu_kernels={kernels}"],
        cwd=REPO, env=env, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    if log_path:
        with open(log_path, "w") as f:
            f.write(log)
    rates = [float(m) for m in RATE.findall(log)]
    if proc.returncode != 0 or len(rates) <= WARMUP_INTERVALS:
        tail = "\n".join(log.splitlines()[-25:])
        raise RuntimeError(f"runtime.cpu_kernels={kernels} run exited "
                           f"{proc.returncode}:\n{tail}")
    return statistics.median(rates[WARMUP_INTERVALS:]), _recorded(model_dir)


def _recorded(model_dir: str) -> Optional[bool]:
    """environment.onednn_enabled of the run's result.json (None: not
    recorded by this trainer)."""
    try:
        with open(os.path.join(model_dir, "result.json")) as f:
            return json.load(f)["environment"].get("onednn_enabled")
    except (OSError, ValueError, KeyError):
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def uptime() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
    print(f"{os.cpu_count()} CPUs ({cpu_model()}); ResNet-50 "
          f"{args.image_size}x{args.image_size}, batch {args.batch}, "
          f"{args.dtype}, one_device, synthetic, {args.steps} steps, "
          f"log_steps {args.log_steps}; {uptime()}", flush=True)
    rates: Dict[str, List[float]] = {name: [] for name in SIDES}
    with tempfile.TemporaryDirectory(prefix="cpu_kernels_") as work:
        config_file = os.path.join(work, "config.yaml")
        with open(config_file, "w") as f:
            yaml.safe_dump(config(args), f)
        for pair in range(args.pairs):
            row = []
            for name in SIDES:
                before = uptime()
                start = time.perf_counter()
                log_path = os.path.join(args.logs, f"{args.dtype}_{pair}_"
                                        f"{name}.log") if args.logs else None
                rate, recorded = run_once(
                    name, config_file,
                    os.path.join(work, f"{pair}_{name}"), log_path)
                rates[name].append(rate)
                row.append(f"{name} {rate:.3f} img/s (onednn_enabled "
                           f"{recorded}, {time.perf_counter() - start:.0f} "
                           f"s, {before} -> {uptime()})")
            print(f"pair {pair + 1}: " + "; ".join(row) + "; onednn/eigen "
                  f"{rates['onednn'][-1] / rates['eigen'][-1]:.3f}",
                  flush=True)
    med = {name: statistics.median(r) for name, r in rates.items()}
    print(f"{args.dtype}: median eigen {med['eigen']:.3f}, onednn "
          f"{med['onednn']:.3f} img/s; onednn/eigen "
          f"{med['onednn'] / med['eigen']:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
