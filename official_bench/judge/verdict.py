"""Is B faster than A? The one rule that official-bench-compare (two log
trees, or the A/B runner) and official-bench-history (the latest run against
the earlier ones) both apply.

Each side is a list of runs; a run is its counted intervals' examples/second
(the TimeHistory intervals inside the window). A run's speed is the mean of
its intervals (DLPerf's per-run rule), a side's speed the median of its runs'
speeds, and the reported ratio is ``median(B) / median(A)``.

The 95% confidence interval of that ratio comes from the runs' own spread, by
a two-level bootstrap: each resample draws the runs of a side with
replacement and, inside each drawn run, its intervals with replacement, so
both run-to-run and within-run variation widen the interval. A side of one
run (the history's latest run) cannot show how much runs differ, so it
borrows the other side's run-to-run spread (each resample scales it by one
of the other side's run speeds relative to their median; why:
docs/compare_and_history.md). The resampling uses Python's
``random.Random(seed)``: the same input gives the same interval anywhere.

Verdict: ``faster`` when the whole interval lies above 1, ``slower`` when it
lies below 1, otherwise "no difference measurable at this spread"; the runs
counted on each side are part of it (two a side give a wide interval). One
run against one run is "too few to judge", with the ratio and no interval
(NaN): neither side shows how much runs differ, and a run's intervals alone
call identical setups faster or slower far above 5% of the time.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

FASTER = "faster"
SLOWER = "slower"
NO_DIFFERENCE = "no difference measurable at this spread"
TOO_FEW = "too few to judge"
VERDICTS = (FASTER, SLOWER, NO_DIFFERENCE, TOO_FEW)

DEFAULT_RESAMPLES = 2000
DEFAULT_LEVEL = 0.95
DEFAULT_SEED = 0

Run = Sequence[float]  # one run's counted interval rates (examples/second)

@dataclasses.dataclass(frozen=True)
class Verdict:
    """B against A: the ratio of medians, its interval and what that means."""
    median_a: float
    median_b: float
    ratio: float  # median_b / median_a
    low: float  # confidence interval of the ratio
    high: float
    level: float
    runs_a: int
    runs_b: int
    intervals_a: int
    intervals_b: int
    verdict: str

    def describe(self, a: str = "A", b: str = "B") -> str:
        """One line: 'B/A 1.100 [1.091, 1.108] (95%): faster (3 vs 3 runs)',
        or with too few runs 'B/A 0.590, no interval: too few to judge (1
        vs 1 runs): ...' (too_few_reason)."""
        if self.verdict == TOO_FEW:
            return (f"{b}/{a} {self.ratio:.3f}, no interval: {self.verdict} "
                    f"({self.runs_b} vs {self.runs_a} runs): "
                    + self.too_few_reason(a, b))
        return (f"{b}/{a} {self.ratio:.3f} {self.interval_text()} "
                f"({self.level * 100:.0f}%): {self.verdict} "
                f"({self.runs_b} vs {self.runs_a} runs)")

    def interval_text(self) -> str:
        """'[0.981, 1.020]', or 'none' where too few runs give none."""
        if self.verdict == TOO_FEW:
            return "none"
        return f"[{self.low:.3f}, {self.high:.3f}]"

    def too_few_reason(self, a: str = "A", b: str = "B") -> str:
        """Why a TOO_FEW verdict (one run a side) has no interval, and what
        gives one."""
        return (f"{a} and {b} are one run each, and one run shows no "
                "run-to-run spread (its intervals alone call identical "
                "setups faster or slower far too often); compare two or "
                "more runs a side")

    def as_dict(self) -> dict:
        """The fields; no interval (TOO_FEW) is null, not NaN."""
        out = dataclasses.asdict(self)
        if self.verdict == TOO_FEW:
            out["low"] = out["high"] = None
        return out


def run_speed(run: Run) -> float:
    """A run's speed: the mean of its interval rates (DLPerf's rule)."""
    return statistics.fmean(run)


def side_median(runs: Sequence[Run]) -> float:
    """A side's speed: the median of its runs' speeds."""
    return statistics.median(run_speed(r) for r in runs)


def run_problem(run: Run, steps: Optional[Sequence[str]] = None
                ) -> Optional[str]:
    """Why a run cannot take part in a ratio (no counted interval, or an
    interval rate that is not > 0), or None. The readers (compare, history)
    leave such a run out with this reason and the run's name; ``steps``
    names each interval ('200-300') where the reader knows them."""
    if not run:
        return "no counted interval"
    for k, rate in enumerate(run):
        if not float(rate) > 0:  # NaN too
            where = f" (steps {steps[k]})" if steps else ""
            return (f"counted interval {k + 1} of {len(run)}{where} has a "
                    f"rate of {float(rate):g} examples/second (a ratio "
                    "needs rates > 0)")
    return None


def _check_side(runs: Sequence[Run], name: str) -> List[Tuple[float, ...]]:
    """The runs as tuples; ValueError naming the side and run when one is
    empty or has a rate that is not > 0 (run_problem)."""
    out = [tuple(float(x) for x in r) for r in runs]
    if not out:
        raise ValueError(f"side {name} has no run to compare")
    for k, r in enumerate(out):
        problem = run_problem(r)
        if problem:
            raise ValueError(f"side {name}: run {k + 1}: {problem}")
    return out


def run_deviations(runs: Sequence[Run]) -> List[float]:
    """Each run's speed relative to the side's median, minus 1: the
    run-to-run spread a side shows (empty for fewer than two runs)."""
    if len(runs) < 2:
        return []
    median = side_median(runs)
    return [run_speed(r) / median - 1 for r in runs]


def _bootstrap_medians(runs: List[Tuple[float, ...]], resamples: int,
                       rng: random.Random,
                       borrowed: Sequence[float] = ()) -> List[float]:
    """The side's median speed in each resample (module doc: two levels).

    Each run's resampled means are drawn once per resample, then the runs
    are drawn; a run drawn twice in one resample reuses its mean, which
    keeps the cost at resamples x (intervals + runs) draws. A side of one
    run cannot show its run-to-run spread, so each resample also scales it
    by one of ``borrowed`` (the other side's run deviations).
    """
    means = []
    for run in runs:
        m = len(run)
        if m == 1:
            means.append([run[0]] * resamples)
            continue
        means.append([sum(run[rng.randrange(m)] for _ in range(m)) / m
                      for _ in range(resamples)])
    if len(runs) == 1 and borrowed:
        k = len(borrowed)
        means[0] = [x * (1 + borrowed[rng.randrange(k)]) for x in means[0]]
    n = len(runs)
    medians = []
    for r in range(resamples):
        medians.append(statistics.median(
            means[rng.randrange(n)][r] for _ in range(n)))
    return medians


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile q in [0, 1] of sorted values."""
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def too_few(runs_a: Sequence[Run], runs_b: Sequence[Run]) -> bool:
    """Whether neither side shows a run-to-run spread: one run against one
    run, whatever their intervals (module doc). One run against two or
    more borrows the other side's spread and is judged."""
    return len(runs_a) == 1 and len(runs_b) == 1


def decide(low: float, high: float) -> str:
    """The verdict for a ratio interval: only an interval that excludes 1.0
    says anything."""
    if low > 1.0:
        return FASTER
    if high < 1.0:
        return SLOWER
    return NO_DIFFERENCE


def compare_runs(a: Sequence[Run], b: Sequence[Run], *,
                 resamples: int = DEFAULT_RESAMPLES,
                 level: float = DEFAULT_LEVEL,
                 seed: Optional[int] = DEFAULT_SEED) -> Verdict:
    """B against A (module doc). ValueError when a side has no usable run."""
    if not 0 < level < 1:
        raise ValueError(f"level is {level}, expected a fraction in (0, 1)")
    if resamples < 100:
        raise ValueError(f"resamples is {resamples}, expected >= 100")
    runs_a, runs_b = _check_side(a, "A"), _check_side(b, "B")
    median_a, median_b = side_median(runs_a), side_median(runs_b)
    counts = (len(runs_a), len(runs_b), sum(map(len, runs_a)),
              sum(map(len, runs_b)))
    if too_few(runs_a, runs_b):
        nan = float("nan")
        return Verdict(median_a, median_b, median_b / median_a, nan, nan,
                       level, *counts, TOO_FEW)
    rng = random.Random(seed)
    boot_a = _bootstrap_medians(runs_a, resamples, rng,
                                run_deviations(runs_b))
    boot_b = _bootstrap_medians(runs_b, resamples, rng,
                                run_deviations(runs_a))
    ratios = sorted(mb / ma for ma, mb in zip(boot_a, boot_b))
    tail = (1 - level) / 2
    low, high = _percentile(ratios, tail), _percentile(ratios, 1 - tail)
    return Verdict(median_a, median_b, median_b / median_a, low, high, level,
                   *counts, decide(low, high))


# The environment keys whose difference between the sides (or within one)
# makes a ratio hard to read (setting_notes).
SETTING_KEYS = ("tensorflow", "jax", "official_bench", "hostname",
                "cpu_model", "cpu_count", "onednn_enabled", "cpu_kernels")
# Sides whose trainer got this many times the CPU share of the other's.
CPU_SHARE_RATIO = 1.5


@dataclasses.dataclass(frozen=True)
class RunSetting:
    """What one run ran on, as far as its record says: its environment
    block, the highest load average at its timed loop's start or end with
    the CPU count (contracts/utilisation.highest_load) and its process's
    mean CPU share; None where not recorded."""
    environment: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    load: Optional[Tuple[float, int]] = None
    cpu_share: Optional[float] = None


def _values(side: Sequence[RunSetting], key: str) -> Dict[str, int]:
    """Each value a side's runs record for ``key`` -> how many runs."""
    out: Dict[str, int] = {}
    for run in side:
        value = (run.environment or {}).get(key)
        if value is not None:
            out[str(value)] = out.get(str(value), 0) + 1
    return out


def _has_version(run: RunSetting) -> bool:
    return (run.environment or {}).get("official_bench") is not None


def _has_load(run: RunSetting) -> bool:
    return run.load is not None


# What a run made by an older official_bench (or read from its log alone)
# does not record, and what its absence leaves open (unrecorded_notes).
UNRECORDED = (("its version", "a code difference", _has_version),
              ("the load average", "a load difference", _has_load))


def unrecorded_notes(a: Sequence[RunSetting], b: Sequence[RunSetting],
                     names: Tuple[str, str] = ("A", "B")) -> List[str]:
    """A note per side and fact (UNRECORDED) where some of the side's runs
    do not record what other runs do: the version or load notes cannot
    speak for them. Nothing where no run records it (the history's rows
    keep no load; the A/B runner's runs no environment)."""
    notes = []
    for what, difference, has in UNRECORDED:
        if not any(has(r) for r in (*a, *b)):
            continue
        for name, side in zip(names, (a, b)):
            lacking = sum(1 for r in side if not has(r))
            if lacking:
                notes.append(
                    f"{name}: {lacking} of {len(side)} run(s) made before "
                    f"official_bench recorded {what} (or read without "
                    "their result.json): the verdict cannot rule out "
                    f"{difference}")
    return notes


def setting_notes(a: Sequence[RunSetting], b: Sequence[RunSetting],
                  names: Tuple[str, str] = ("A", "B")) -> List[str]:
    """One note per thing that makes B/A hard to read: the sides differ in
    a SETTING_KEYS value (where both record it), a side mixes values, a
    side's runs do not record the version or load others do
    (unrecorded_notes), a side ran with the load average above its CPU
    count, or the trainer's CPU share differs by more than CPU_SHARE_RATIO
    between the sides."""
    notes = []
    for key in SETTING_KEYS:
        found = [_values(a, key), _values(b, key)]
        for name, values in zip(names, found):
            if len(values) > 1:
                notes.append(f"{name} mixes {key}: " + ", ".join(
                    f"{v} ({n} run{'s' * (n > 1)})"
                    for v, n in values.items()))
        if all(len(v) == 1 for v in found) and \
                set(found[0]) != set(found[1]):
            notes.append(f"{names[0]} and {names[1]} differ in {key}: "
                         f"{names[0]} {next(iter(found[0]))}, "
                         f"{names[1]} {next(iter(found[1]))}")
    notes += unrecorded_notes(a, b, names)
    for name, side in zip(names, (a, b)):
        over = [r.load for r in side if r.load and r.load[0] > r.load[1]]
        if over:
            load, cpus = max(over)
            notes.append(f"{name} ran with the load average above the CPU "
                         f"count: load {load:.2f} on {cpus} CPUs (in "
                         f"{len(over)} of {len(side)} runs, at the timed "
                         "loop's start or end): its runs waited for cores")
    shares = [[r.cpu_share for r in side if r.cpu_share]
              for side in (a, b)]
    if all(shares):
        share_a, share_b = (statistics.median(s) for s in shares)
        ratio = max(share_a, share_b) / min(share_a, share_b)
        if ratio > CPU_SHARE_RATIO:
            notes.append(
                f"the trainer's CPU share differs {ratio:.1f}x: "
                f"{names[0]} {share_a:.0%}, {names[1]} {share_b:.0%} of its "
                "cores (utilisation.process.cpu_utilisation, median of the "
                "runs): the machine gave one side more")
    return notes


@dataclasses.dataclass(frozen=True)
class RoundRatios:
    """B / A round by round, for the A/B runner whose rounds alternate the
    sides: a drift of the machine's speed between rounds (load, clock) hits
    both runs of a round alike and cancels in its ratio, which the ratio of
    medians above does not use."""
    ratios: Tuple[float, ...]
    median: float
    low: float  # bootstrap interval of the median, rounds resampled
    high: float
    level: float

    def describe(self, a: str = "A", b: str = "B") -> str:
        """'B/A by round: 1.035 0.953 ...; median 0.992 [..] (95%, paired),
        lowest 0.953'; one round has no interval (NaN)."""
        if len(self.ratios) < 2:
            return (f"{b}/{a} by round: {self.median:.3f}; one round, no "
                    "interval (two or more rounds give one)")
        return (f"{b}/{a} by round: " +
                " ".join(f"{r:.3f}" for r in self.ratios) +
                f"; median {self.median:.3f} [{self.low:.3f}, "
                f"{self.high:.3f}] ({self.level * 100:.0f}%, paired), "
                f"lowest {min(self.ratios):.3f}")

    def as_dict(self) -> dict:
        """The fields; no interval (one round) is null, not NaN."""
        out = dataclasses.asdict(self)
        out["ratios"] = list(self.ratios)
        for key in ("low", "high"):
            if math.isnan(out[key]):
                out[key] = None
        return out


def round_ratios(a: Sequence[Run], b: Sequence[Run], *,
                 resamples: int = DEFAULT_RESAMPLES,
                 level: float = DEFAULT_LEVEL,
                 seed: Optional[int] = DEFAULT_SEED) -> RoundRatios:
    """run_speed(b[k]) / run_speed(a[k]) for each round k (the runs in
    round order on both sides); ValueError when the sides differ in
    rounds or a run is empty."""
    runs_a, runs_b = _check_side(a, "A"), _check_side(b, "B")
    if len(runs_a) != len(runs_b):
        raise ValueError(f"side A has {len(runs_a)} rounds, side B "
                         f"{len(runs_b)}: pairing needs the same rounds")
    ratios = tuple(run_speed(rb) / run_speed(ra)
                   for ra, rb in zip(runs_a, runs_b))
    n = len(ratios)
    if n < 2:  # one ratio: resampling it gives it back, not an interval
        nan = float("nan")
        return RoundRatios(ratios, ratios[0], nan, nan, level)
    rng = random.Random(seed)
    boot = sorted(statistics.median(ratios[rng.randrange(n)]
                                    for _ in range(n))
                  for _ in range(resamples))
    tail = (1 - level) / 2
    return RoundRatios(ratios, statistics.median(ratios),
                       _percentile(boot, tail), _percentile(boot, 1 - tail),
                       level)
