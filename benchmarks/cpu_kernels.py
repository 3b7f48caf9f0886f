"""oneDNN against Eigen on this CPU: the measurement behind cpu_kernels: auto.

Issue 31 section 2. The same ResNet-50 run, one process per run, alternating
eigen, onednn, eigen, onednn, ... so drift of a shared machine's load hits
both sides. Each process is the trainer's CLI with runtime.cpu_kernels
eigen or onednn (which set TF_ENABLE_ONEDNN_OPTS to 0 or 1 before
TensorFlow is imported). A run's images/sec is the median of its TimeHistory
intervals after the first two (warm-up, tracing), as in vs_model_garden.py. On
a machine other processes load, a run's wall-clock rate follows their load;
so each run also gives images per CPU-second of its own (the rate divided
by the cores it kept busy: result.json utilisation.process, sampled every
second while it trained), which load changes far less. Printed: the CPU,
the load before and after each run, each run's rates and what TensorFlow
reported (result.json environment.onednn_enabled), then the medians and
onednn / eigen for both rates.

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

from official_bench.contracts.trainer_command import trainer_argv

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = re.compile(r"TimeHistory: [\d.]+ seconds, ([\d.]+) examples/second")
WARMUP_INTERVALS = 2
SIDES = ("eigen", "onednn")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="float32",
                   choices=("float32", "bfloat16"),
                   help="the synthetic images' and the model's precision "
                        "(default float32)")
    p.add_argument("--pairs", type=int, default=3,
                   help="(eigen, onednn) run pairs, alternating "
                        "(default 3)")
    p.add_argument("--steps", type=int, default=20,
                   help="training steps per run; must leave an interval "
                        f"after the {WARMUP_INTERVALS} warm-up ones "
                        "(default 20)")
    p.add_argument("--log-steps", type=int, default=5,
                   help="steps per TimeHistory interval, the unit a run's "
                        "rate is the median of (default 5)")
    p.add_argument("--batch", type=int, default=8,
                   help="images a step, on the one device (default 8)")
    p.add_argument("--image-size", type=int, default=224,
                   help="synthetic image height and width in pixels "
                        "(default 224)")
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
             log_path: Optional[str]
             ) -> Tuple[float, Optional[float], Optional[bool]]:
    """(img/s, img per CPU-second, TensorFlow's IsMklEnabled as result.json
    recorded it)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1")
    proc = subprocess.run(
        trainer_argv(sys.executable, mode="train", config_file=config_file,
                     model_dir=model_dir,
                     params_override=f"runtime.cpu_kernels={kernels}"),
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
    rate = statistics.median(rates[WARMUP_INTERVALS:])
    result = _result(model_dir)
    return (rate, _per_cpu_second(rate, result),
            result.get("environment", {}).get("onednn_enabled"))


def _result(model_dir: str) -> Dict:
    try:
        with open(os.path.join(model_dir, "result.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _per_cpu_second(rate: float, result: Dict) -> Optional[float]:
    """img/s over the cores the process kept busy while training (mean
    cpu_utilisation x cores): images per CPU-second."""
    try:
        process = result["utilisation"]["process"]
        busy = process["cpu_utilisation"]["mean"] * process["cores"]
    except (KeyError, TypeError):
        return None
    return rate / busy if busy else None


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
    per_cpu: Dict[str, List[float]] = {name: [] for name in SIDES}
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
                rate, cpu_rate, recorded = run_once(
                    name, config_file,
                    os.path.join(work, f"{pair}_{name}"), log_path)
                rates[name].append(rate)
                if cpu_rate is not None:
                    per_cpu[name].append(cpu_rate)
                row.append(f"{name} {rate:.3f} img/s, {cpu_rate or 0:.3f} "
                           f"img/CPU-s (onednn_enabled "
                           f"{recorded}, {time.perf_counter() - start:.0f} "
                           f"s, {before} -> {uptime()})")
            print(f"pair {pair + 1}: " + "; ".join(row) + "; onednn/eigen "
                  f"{rates['onednn'][-1] / rates['eigen'][-1]:.3f}",
                  flush=True)
    for unit, series in (("img/s", rates), ("img/CPU-s", per_cpu)):
        if not all(series.values()):
            continue
        med = {name: statistics.median(r) for name, r in series.items()}
        print(f"{args.dtype}: median eigen {med['eigen']:.3f}, onednn "
              f"{med['onednn']:.3f} {unit}; onednn/eigen "
              f"{med['onednn'] / med['eigen']:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
