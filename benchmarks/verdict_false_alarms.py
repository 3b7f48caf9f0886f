"""How often the verdict calls identical setups faster or slower (A/A).

Simulated runs through judge/verdict.compare_runs: a run's mean speed is
1 + N(0, between) (the run-to-run spread), its intervals that mean times
1 + N(0, within) (the spread inside a run), 7 counted intervals a run (the
A/A walk's cifar runs: resnet_cifar20, 80 steps, log_steps 10). Both sides
come from one distribution, so every faster/slower is a false alarm; the
95% interval promises about 5%. For 1 run against 1 run, which the verdict
now calls "too few to judge", it also prints how often the interval of the
intervals alone (the rule before) excluded 1.

    .venv/bin/python benchmarks/verdict_false_alarms.py [--trials 200]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from typing import List

from official_bench.judge import verdict

INTERVALS = 7
SHAPES = ((1, 1), (5, 1), (3, 3))
# (between-run sd, within-run sd), relative to the mean: none between
# runs, and the A/A walk's TensorFlow runs (between about 6.5%, within
# 4-20%).
SPREADS = ((0.0, 0.12), (0.065, 0.12))


def intervals_only(a: List[List[float]], b: List[List[float]],
                   resamples: int, seed: int) -> str:
    """The verdict 1 run against 1 run got before it was too few: the
    intervals of each run resampled, nothing between runs."""
    rng = random.Random(seed)
    boot_a = verdict._bootstrap_medians([tuple(a[0])], resamples, rng)
    boot_b = verdict._bootstrap_medians([tuple(b[0])], resamples, rng)
    ratios = sorted(y / x for x, y in zip(boot_a, boot_b))
    return verdict.decide(verdict._percentile(ratios, 0.025),
                          verdict._percentile(ratios, 0.975))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=200,
                   help="A/A comparisons simulated per line (default 200)")
    p.add_argument("--resamples", type=int, default=500,
                   help="bootstrap resamples per comparison (default 500; "
                        "the tools use 2000)")
    args = p.parse_args()
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
          f"{args.trials} A/A trials a line, {args.resamples} resamples, "
          f"{INTERVALS} intervals a run")
    start = time.perf_counter()
    for between, within in SPREADS:
        rng = random.Random(42)

        def run() -> List[float]:
            mean = 1 + rng.gauss(0, between)
            return [mean * (1 + rng.gauss(0, within))
                    for _ in range(INTERVALS)]
        for na, nb in SHAPES:
            alarms = too_few = before = 0
            for t in range(args.trials):
                a = [run() for _ in range(na)]
                b = [run() for _ in range(nb)]
                v = verdict.compare_runs(a, b, resamples=args.resamples,
                                         seed=t)
                alarms += v.verdict in (verdict.FASTER, verdict.SLOWER)
                too_few += v.verdict == verdict.TOO_FEW
                if na == nb == 1:
                    before += intervals_only(a, b, args.resamples, t) in (
                        verdict.FASTER, verdict.SLOWER)
            line = (f"between {between:.1%} within {within:.0%}: {na} vs "
                    f"{nb} runs: faster/slower in {alarms} of {args.trials} "
                    f"({alarms / args.trials:.1%})")
            if too_few:
                line += (f", too few to judge in {too_few}; the intervals "
                         f"alone (the rule before): faster/slower in "
                         f"{before} ({before / args.trials:.1%})")
            print(line, flush=True)
    print(f"{time.perf_counter() - start:.0f} s; load "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
