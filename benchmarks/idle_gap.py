"""Is a train step slower when the core waited before it? (issue 14 §4)

    .venv/bin/python benchmarks/idle_gap.py [--gap_ms 37] [--rounds 3]
        [--steps 200]

Why: in a multi-worker step the worker waits on the network (the gradient's
all-reduce, the small collectives) and then computes. The scaling model
takes the compute time T1 from the 1n1g run, whose steps run back to back
on a busy core. A profile of the netem test's 2-worker step at 100 Mbit/s
(BENCHMARKS.md) found the compute before the all-reduce longer than T1.
This script measures the part of that which comes from the wait alone.

In one process pinned to one core (taskset -c 0, as the netem test pins its
1n1g baseline), with the netem test's model (resnet_cifar depth 8, batch 16,
16x16 synthetic images, one_device, the trainer's own set-up and compile),
it times the compiled train step, each step waited for (the loss read
back), in three variants, rotated each round:
- back to back;
- idle: sleep --gap_ms before each step (the core has nothing to do, as
  while a worker waits on a collective);
- busy: spin in Python for --gap_ms before each step (time passes, the core
  stays busy): separates "the core went idle" from "time passed".
Prints the median step of each variant per round and idle / back-to-back.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from keras_step import TINY, compiled_step

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _median_step(fn, iterator, steps: int, before) -> float:
    times = []
    for _ in range(steps):
        before()
        start = time.perf_counter()
        float(fn(iterator)["loss"])
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(gap_ms: float, rounds: int, steps: int) -> None:
    model, _, iterator = compiled_step(
        f"{TINY},runtime.distribution_strategy=one_device")
    fn = model.make_train_function()
    for _ in range(20):  # tracing and warm-up
        float(fn(iterator)["loss"])
    gap = gap_ms / 1e3
    variants = [("back to back", lambda: None),
                ("idle gap", lambda: time.sleep(gap)),
                ("busy gap", lambda: _spin(gap))]
    for r in range(rounds):
        order = variants[r % 3:] + variants[:r % 3]
        row = {name: _median_step(fn, iterator, steps, before)
               for name, before in order}
        base = row["back to back"]
        print(f"round {r + 1}: " + ", ".join(
            f"{name} {row[name] * 1e3:.1f} ms" for name, _ in variants) +
            f"; idle / back to back {row['idle gap'] / base:.2f}, "
            f"busy / back to back {row['busy gap'] / base:.2f}", flush=True)


def main(argv) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--gap_ms", type=float, default=37.0,
                        help="wait before each step (default 37: what a\n"
                        "2-worker step waits on collectives at 100 Mbit/s)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of the three variants, their order\n"
                        "rotated each round (default 3)")
    parser.add_argument("--steps", type=int, default=200,
                        help="timed steps per variant and round (default 200)")
    parser.add_argument("--inside", action="store_true",
                        help=argparse.SUPPRESS)  # the pinned child
    args = parser.parse_args(argv)
    if args.gap_ms < 0 or args.rounds < 1 or args.steps < 1:
        parser.error(f"--gap_ms must be >= 0, --rounds and --steps >= 1; "
                     f"got {args.gap_ms}, {args.rounds}, {args.steps}")
    if args.inside:
        measure(args.gap_ms, args.rounds, args.steps)
        return 0
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    cmd = ["taskset", "-c", "0", sys.executable, os.path.abspath(__file__),
           "--inside"] + list(argv)
    return subprocess.call(cmd, cwd=REPO, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
