"""DLPerf's arithmetic, to the last bit: which sums and roundings its two
extractors perform, so that our numbers equal theirs to the hundredth.

DLPerf rounds each run's speed to 2 decimals *first*, then takes the average,
the median and the speedup of the rounded values, rounding each again. Rounding
at the end instead changes the median of an even number of runs, the average,
or a speedup by 0.01 now and then, and makes the printed speedup impossible to
recompute from the printed medians. Both extractors round in that order; they
differ in the kind of number they round:

* ``mean`` (``extract_tensorflow_logs.py``): the run's speed is numpy's mean of
  the logged examples/second, a ``numpy.float64``, and every later value stays
  a ``numpy.float64``. ``round()`` on those is numpy's rounding: multiply by
  100, round half to even, divide by 100 (:func:`numpy_round`). It can differ
  from Python's ``round()`` on the same float: 2.675 gives 2.68 here, 2.67 in
  Python. numpy sums pairwise in blocks of 8 (:func:`numpy_sum`); a plain
  left-to-right sum differs in the last bit for 8 or more values.
* ``time`` (``extract_tensorflow_logs_time.py``): each run's speed is a
  plain Python float rounded with Python's ``round()`` (correctly rounded
  from the float's exact value), and so is the average (a Python sum of
  Python floats). The median is not: ``compute_median`` returns
  ``round(np.median(speed_list), 2)``, and ``np.median`` returns a
  ``numpy.float64`` even for a list of Python floats, so the median of an
  even number of runs, ``(a + b) / 2``, goes through numpy's rounding
  (321.82 and 321.91 give 321.865: numpy 321.86, Python 321.87). The
  speedup is the ratio of two such medians, a ``numpy.float64``, so numpy's
  rounding too (609.60 over 320.00 is 1.905: numpy 1.9, Python 1.91).

Source of both: DLPerf's ``TensorFlow/resnet50v1.5/extract_tensorflow_logs.py``
and ``extract_tensorflow_logs_time.py`` (github.com/Oneflow-Inc/DLPerf), the
functions ``extract_info_from_file``, ``compute_average``,
``compute_median`` and ``compute_speedup``; :data:`METHOD_ROUNDING` lists
the rounding of each value per method.

The average is a left-to-right sum of the rounded run speeds divided by their
number in both. DLPerf adds them in the order ``glob`` lists the files, which
depends on the file system; we add in run-index order. With 5 runs of 2-decimal
speeds the exact average never lies on a rounding tie, so the order cannot
change the result; with an even number of runs it could only in the last bit
of a tie.

This module is pure arithmetic (no numpy import): the extractor must run
anywhere.
"""

from __future__ import annotations

import math
import dataclasses
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
    """``round(numpy.float64(value), digits)``: scale, round half even, unscale."""
    scale = 10.0 ** digits
    scaled = value * scale
    if not math.isfinite(scaled):
        return value
    return round(scaled) / scale


def python_round(value: float, digits: int = DIGITS) -> float:
    """Python's ``round(float, digits)`` (kept as a function for symmetry)."""
    return round(value, digits)


def left_to_right_mean(values: List[float]) -> float:
    """Sum from the left, divided by the count (DLPerf's ``compute_average``)."""
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
