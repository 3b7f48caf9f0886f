"""DLPerf's arithmetic, to the last bit: which sums and roundings its two
extractors perform, so that our numbers equal theirs to the hundredth.

DLPerf rounds each run's speed to 2 decimals *first*, then takes the average,
the median and the speedup of the rounded values, rounding each again.
Rounding at the end instead would move a median, an average or a speedup by
0.01 now and then, and the printed speedup could not be recomputed from the
printed medians. Both extractors round in that order, but each value is
rounded as the type of number DLPerf holds at that point rounds
(:data:`METHOD_ROUNDING`; the table in docs/extractor.md):

* a ``numpy.float64`` (``mean``: every value; ``time``: the median and the
  speedup, since ``np.median`` returns one even for Python floats): numpy's
  rounding, scale by 100, round half to even, unscale (:func:`numpy_round`;
  2.675 gives 2.68, Python 2.67), and numpy's pairwise sum
  (:func:`numpy_sum`), which differs from a left-to-right sum in the last
  bit for 8 or more values;
* a Python float (``time``: the run speed and the average): Python's
  ``round()``, correctly rounded from the float's exact value.

Source: DLPerf's ``TensorFlow/resnet50v1.5/extract_tensorflow_logs.py`` and
``extract_tensorflow_logs_time.py`` (github.com/Oneflow-Inc/DLPerf):
``extract_info_from_file``, ``compute_average``, ``compute_median``,
``compute_speedup``. Pure arithmetic, no numpy import: the extractor must run
anywhere.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, Iterable, List

DIGITS = 2


def numpy_sum(values: Iterable[float]) -> float:
    """Sum of floats in exactly numpy's order (``np.add.reduce`` on float64).

    numpy sums fewer than 8 values left to right; 8 to 128 values in 8
    interleaved partial sums combined pairwise, then the remainder left to
    right; longer arrays are split in two halves (the first a multiple of 8
    long) summed the same way.
    """
    values = [float(v) for v in values]
    n = len(values)
    if n < 8:
        total = -0.0
        for v in values:
            total += v
        return total
    if n <= 128:
        partial = values[:8]
        i = 8
        while i < n - n % 8:
            for j in range(8):
                partial[j] += values[i + j]
            i += 8
        total = ((partial[0] + partial[1]) + (partial[2] + partial[3])) + \
            ((partial[4] + partial[5]) + (partial[6] + partial[7]))
        for v in values[i:]:
            total += v
        return total
    half = n // 2
    half -= half % 8
    return numpy_sum(values[:half]) + numpy_sum(values[half:])


def numpy_mean(values: List[float]) -> float:
    """``np.mean`` of a list of floats, bit for bit."""
    return numpy_sum(values) / len(values)


def numpy_round(value: float, digits: int = DIGITS) -> float:
    """``round(numpy.float64(value), digits)``: scale, round half even,
    unscale."""
    scale = 10.0 ** digits
    scaled = value * scale
    if not math.isfinite(scaled):
        return value
    return round(scaled) / scale


def python_round(value: float, digits: int = DIGITS) -> float:
    """Python's ``round(float, digits)`` (kept as a function for symmetry)."""
    return round(value, digits)


def left_to_right_mean(values: List[float]) -> float:
    """Sum from the left, divided by the count (DLPerf's ``compute_average``).

    DLPerf adds the runs in the order ``glob`` lists the files, which
    depends on the file system; the callers add in run-index order. With 5
    runs of 2-decimal speeds the exact average never lies on a rounding tie,
    so the order cannot change the result; with an even number of runs it
    could only in the last bit of a tie.
    """
    total = 0.0
    for v in values:
        total += v
    return total / len(values)


def median_of_sorted_pair(values: Iterable[float]) -> float:
    """Median the way both DLPerf scripts get it from ``np.median``: the
    middle value, or the two middle values added and halved (numpy's mean of
    the two, bit for bit the same); the caller rounds it."""
    ordered = sorted(values)
    n = len(ordered)
    if n % 2:
        return ordered[n // 2]
    return (ordered[n // 2 - 1] + ordered[n // 2]) / 2


Round = Callable[[float], float]


@dataclasses.dataclass(frozen=True)
class Roundings:
    """Which rounding each of DLPerf's four values goes through."""

    run: Round
    average: Round
    median: Round
    speedup: Round


# Per method, the type of number DLPerf holds when it rounds each value
# (module doc): numpy.float64 -> numpy_round, Python float -> python_round.
METHOD_ROUNDING: Dict[str, Roundings] = {
    "mean": Roundings(run=numpy_round, average=numpy_round,
                      median=numpy_round, speedup=numpy_round),
    "time": Roundings(run=python_round, average=python_round,
                      median=numpy_round, speedup=numpy_round),
}


class Arithmetic:
    """How one extraction method rounds: per run, then per case, then speedup.

    ``run`` rounds one run's speed; ``average``, ``median`` and ``speedup``
    take already rounded values and return rounded results, as DLPerf does.
    """

    def __init__(self, method: str):
        if method not in METHOD_ROUNDING:
            raise ValueError(f"method {method!r} is not one of "
                             f"{', '.join(sorted(METHOD_ROUNDING))}")
        self.method = method
        self.rounds = METHOD_ROUNDING[method]

    def run(self, speed: float) -> float:
        """One run's speed as DLPerf records it."""
        return self.rounds.run(speed)

    def average(self, rounded_speeds: List[float]) -> float:
        """average_speed from the rounded run speeds."""
        return self.rounds.average(left_to_right_mean(rounded_speeds))

    def median(self, rounded_speeds: List[float]) -> float:
        """median_speed from the rounded run speeds."""
        return self.rounds.median(median_of_sorted_pair(rounded_speeds))

    def speedup(self, median: float, baseline_median: float) -> float:
        """speedup from two rounded medians."""
        return self.rounds.speedup(median / baseline_median)
