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
* ``time`` (``extract_tensorflow_logs_time.py``): plain Python floats,
  Python's ``round()`` (correctly rounded from the float's exact value), and a
  hand-written median.

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
    """Median the way both DLPerf scripts get it: the middle value, or the two
    middle values added and halved (``np.median`` and the hand-written one
    agree bit for bit on this)."""
    ordered = sorted(values)
    n = len(ordered)
    if n % 2:
        return ordered[n // 2]
    return (ordered[n // 2 - 1] + ordered[n // 2]) / 2


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
        self.round = METHOD_ROUNDING[method]

    def run(self, speed: float) -> float:
        """One run's speed as DLPerf records it."""
        return self.round(speed)

    def average(self, rounded_speeds: List[float]) -> float:
        """average_speed from the rounded run speeds."""
        return self.round(left_to_right_mean(rounded_speeds))

    def median(self, rounded_speeds: List[float]) -> float:
        """median_speed from the rounded run speeds."""
        return self.round(median_of_sorted_pair(rounded_speeds))

    def speedup(self, median: float, baseline_median: float) -> float:
        """speedup from two rounded medians."""
        return self.round(median / baseline_median)


METHOD_ROUNDING: Dict[str, Callable[[float], float]] = {
    "mean": numpy_round, "time": python_round}
