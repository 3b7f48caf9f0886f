"""The extractor rounds as DLPerf does: each run first, then average, median
and speedup of the rounded values (mean method: numpy's rounding throughout;
time method: Python's for the run speeds and the average, numpy's for the
median and the speedup, which DLPerf computes from ``np.median``), so its
numbers equal DLPerf's to the hundredth.

The reference implementation at the bottom follows the algorithm of DLPerf's
two TensorFlow extractors (https://github.com/Oneflow-Inc/DLPerf,
TensorFlow/resnet50v1.5/extract_tensorflow_logs.py and
extract_tensorflow_logs_time.py: numpy where those scripts hold numpy
values), written here with numpy and datetime, independently of
official_bench.extract.
"""

import datetime
import glob
import os
import random
import re

import pytest

from official_bench.extract import (
    extractor as extract,  # noqa: E402
    rounding,  # noqa: E402
)
from support import logkit as kit

np = pytest.importorskip("numpy", reason="numpy is the reference for DLPerf's "
                         "arithmetic (it comes with TensorFlow)")

DLPERF_KEYS = ("average_speed", "median_speed", "speedup")


def write_tree(log_dir, runs, log_steps=100):
    """runs: {case: [[interval speeds of run 1], [run 2], ...]}."""
    for case, speeds_per_run in runs.items():
        for index, speeds in enumerate(speeds_per_run, start=1):
            kit.write_run(log_dir, case, speeds, index=index,
                          log_steps=log_steps, finished=False)
    return str(log_dir)


def dlperf_view(result):
    """DLPerf's three numbers per case of our result."""
    return {case: tuple(e[k] for k in DLPERF_KEYS)
            for case, e in result["rn50"].items()}


# ---- numpy emulation --------------------------------------------------------

def test_numpy_sum_and_round_are_bit_exact():
    rng = random.Random(7)
    for n in list(range(1, 40)) + [127, 128, 129, 300, 1000]:
        values = [rng.randint(0, 10 ** 8) / 100.0 for _ in range(n)]
        assert rounding.numpy_sum(values) == float(
            np.add.reduce(np.array(values)))
        assert rounding.numpy_mean(values) == float(np.mean(values))
    for _ in range(20000):
        x = rng.randint(0, 10 ** 9) / 1000.0  # 3 decimals: many ties
        assert rounding.numpy_round(x) == float(round(np.float64(x), 2))
    # numpy's and Python's rounding really differ; each method needs its own
    assert (rounding.numpy_round(289.865) == 289.86
            and round(289.865, 2) == 289.87)
    assert rounding.numpy_round(2.675) == 2.68 and round(2.675, 2) == 2.67


# ---- the examples: round first, then combine ------------------------

def test_mean_method_even_median_rounds_the_run_speeds_first(tmp_path):
    # run 1: (289.85 x 3 + 289.86 x 2) / 5 = 289.854 -> 289.85
    # run 2: (289.88 x 3 + 289.89 x 2) / 5 = 289.884 -> 289.88
    # DLPerf: median (289.85 + 289.88) / 2 = 289.865 -> numpy 289.86
    # rounding only at the end: (289.854 + 289.884) / 2 = 289.869 -> 289.87
    log_dir = write_tree(tmp_path / "bz128", {"1n1g": [
        [1.0, 289.85, 289.85, 289.85, 289.86, 289.86],
        [1.0, 289.88, 289.88, 289.88, 289.89, 289.89]]})
    entry = extract.extract(log_dir).result["rn50"]["1n1g"]
    assert entry["runs"] == [289.85, 289.88]
    assert entry["median_speed"] == 289.86
    assert entry["median_speed_unrounded"] == pytest.approx(289.869)
    # the average is a tie too: (289.85 + 289.88) / 2 = 289.865 -> 289.86
    assert entry["average_speed"] == 289.86
    assert dlperf_view({"rn50": {"1n1g": entry}}) == \
        dlperf_view(reference(log_dir, "mean"))


def test_mean_method_speedup_from_the_rounded_medians(tmp_path):
    # 1n1g: (303.28 x 3 + 303.29 x 2) / 5 = 303.284 -> 303.28
    # 1n8g: (2312.52 x 2 + 2312.53 x 3) / 5 = 2312.526 -> 2312.53
    # DLPerf: 2312.53 / 303.28 = 7.62510 -> 7.63; from the unrounded medians
    # 2312.526 / 303.284 = 7.62495 -> 7.62 (not reproducible from the JSON)
    log_dir = write_tree(tmp_path / "bz128", {
        "1n1g": [[1.0, 303.28, 303.28, 303.28, 303.29, 303.29]],
        "1n8g": [[1.0, 2312.52, 2312.52, 2312.53, 2312.53, 2312.53]]})
    r = extract.extract(log_dir).result["rn50"]
    assert dlperf_view({"rn50": r}) == {"1n1g": (303.28, 303.28, 1.0),
                                        "1n8g": (2312.53, 2312.53, 7.63)}
    assert round(r["1n8g"]["median_speed"] / r["1n1g"]["median_speed"],
                 2) == 7.63
    assert r["1n8g"]["speedup_unrounded"] == pytest.approx(7.62495, abs=1e-5)
    # efficiency comes from the printed medians too: 7.62510 / 8
    assert r["1n8g"]["efficiency"] == 0.9531


def test_time_method_median_rounds_the_run_speeds_first(tmp_path):
    # Clock speeds 64000 images / duration: run 1 at 321.844 -> 321.84, run 2
    # at 321.8655 -> 321.87. DLPerf: (321.84 + 321.87) / 2 = 321.855 -> 321.86
    # (both roundings agree here); rounding only at the end: 321.85475 ->
    # 321.85.
    log_dir = write_tree(tmp_path / "bz128", {"1n1g": [
        [321.844] * 7, [321.8655] * 7]})
    entry = extract.extract(log_dir, method="time").result["rn50"]["1n1g"]
    assert entry["runs"] == [321.84, 321.87]
    assert entry["median_speed"] == 321.86
    assert round(entry["median_speed_unrounded"], 2) == 321.85


# ---- which rounding each value goes through (numpy's or Python's) -----------

def test_the_distinguishing_values_really_distinguish_the_roundings():
    # numpy.float64 rounds x * 100 half to even; Python rounds the binary value
    assert round(np.median([321.82, 321.91]), 2) == 321.86
    assert round((321.82 + 321.91) / 2, 2) == 321.87
    assert round(np.float64(609.6) / np.float64(320.0), 2) == 1.9
    assert round(609.6 / 320.0, 2) == 1.91
    # a Python float average of a tie: (321.82 + 321.91) / 2 rounds as Python
    assert round(np.float64(321.865), 2) == 321.86 != round(321.865, 2)


def test_rounding_table_follows_dlperfs_number_types():
    # time method: run speeds and average are Python floats, median and
    # speedup come from np.median (numpy.float64); mean method: all numpy
    time, mean = (rounding.METHOD_ROUNDING["time"],
                  rounding.METHOD_ROUNDING["mean"])
    assert (time.run, time.average) == (rounding.python_round,) * 2
    assert (time.median, time.speedup) == (rounding.numpy_round,) * 2
    assert {mean.run, mean.average, mean.median, mean.speedup} == \
        {rounding.numpy_round}


def test_time_method_even_median_goes_through_numpys_rounding(tmp_path):
    # runs at 321.82 and 321.91 (Python-rounded per run); np.median gives
    # 321.865 as a numpy.float64 -> 321.86, where Python's round gives 321.87.
    # The average is Python's: (321.82 + 321.91) / 2 -> round() -> 321.87.
    log_dir = write_tree(tmp_path / "bz128", {"1n1g": [
        [321.82] * 7, [321.91] * 7]})
    entry = extract.extract(log_dir, method="time").result["rn50"]["1n1g"]
    assert entry["runs"] == [321.82, 321.91]
    assert entry["median_speed"] == 321.86
    assert entry["average_speed"] == 321.87
    assert dlperf_view({"rn50": {"1n1g": entry}}) == \
        dlperf_view(reference(log_dir, "time"))


def test_time_method_speedup_goes_through_numpys_rounding(tmp_path):
    # medians 320.00 and 609.60: ratio 1.905 as a numpy.float64 -> 1.9,
    # where Python's round gives 1.91
    log_dir = write_tree(tmp_path / "bz128", {
        "1n1g": [[320.0] * 7], "1n2g": [[609.6] * 7]})
    r = extract.extract(log_dir, method="time").result["rn50"]
    assert (r["1n1g"]["median_speed"], r["1n2g"]["median_speed"]) == \
        (320.0, 609.6)
    assert r["1n2g"]["speedup"] == 1.9
    assert dlperf_view({"rn50": r}) == dlperf_view(reference(log_dir, "time"))


def test_mean_method_speedup_tie_goes_through_numpys_rounding(tmp_path):
    log_dir = write_tree(tmp_path / "bz128", {
        "1n1g": [[1.0] + [320.0] * 5], "1n2g": [[1.0] + [609.6] * 5]})
    r = extract.extract(log_dir).result["rn50"]
    assert r["1n2g"]["speedup"] == 1.9
    assert dlperf_view({"rn50": r}) == dlperf_view(reference(log_dir, "mean"))


# ---- DLPerf's published table from DLPerf's per-run numbers -----------------

# Per-run speeds printed by DLPerf's extract_tensorflow_logs.py in its README
# (TensorFlow/resnet50v1.5/README.md, fp32, batch 128), and its final table.
DLPERF_README_RUNS = {
    "1n1g": [323.9, 321.8, 320.18, 322.25, 321.22],
    "1n2g": [575.76, 580.55, 574.66, 571.71, 563.93],
    "1n4g": [1145.76, 1143.46, 1167.06, 1122.51, 1128.34],
    "1n8g": [2494.22, 2441.07, 2458.74, 2480.44, 2455.28],
    "2n8g": [4864.58, 4918.45, 4829.93, 4849.68, 4789.87],
    "4n8g": [9369.06, 9402.51, 9418.44, 9420.23, 9454.31],
}
DLPERF_README_TABLE = {
    "1n1g": (321.87, 321.8, 1.0), "1n2g": (573.32, 574.66, 1.79),
    "1n4g": (1141.43, 1143.46, 3.55), "1n8g": (2465.95, 2458.74, 7.64),
    "2n8g": (4850.5, 4849.68, 15.07), "4n8g": (9412.91, 9418.44, 29.27),
}


def test_dlperf_readme_numbers_give_its_table(tmp_path):
    runs = {case: [[1.0] + [s] * 5 for s in speeds]
            for case, speeds in DLPERF_README_RUNS.items()}
    log_dir = write_tree(tmp_path / "bz128", runs)
    result = extract.extract(log_dir).result
    assert dlperf_view(result) == DLPERF_README_TABLE
    assert dlperf_view(reference(log_dir, "mean")) == DLPERF_README_TABLE


# ---- against the reference on random trees ----------------------------------

@pytest.mark.parametrize("method", ["mean", "time"])
def test_random_trees_equal_the_reference(tmp_path, method):
    rng = random.Random(11 if method == "mean" else 12)
    for tree in range(12):
        runs = {}
        for case, devices in (("1n1g", 1), ("1n2g", 2), ("1n8g", 8),
                              ("2n8g", 16)):
            base = 300.0 * devices * rng.uniform(0.9, 1.0)
            runs[case] = [[rng.uniform(0.5, 1.0) * base] +
                          [round(base * rng.uniform(0.99, 1.01), 2)
                           for _ in range(6)]
                          for _ in range(rng.choice([2, 3, 4, 5]))]
        log_dir = write_tree(tmp_path / ("t%d" % tree) / "bz128", runs)
        ours = extract.extract(log_dir, method=method).result
        theirs = reference(log_dir, method)
        assert dlperf_view(ours) == dlperf_view(theirs), (tree, runs)


# ---- reference: DLPerf's algorithm, own code --------------------------------

_SPEED = re.compile(r", (\d+.\d+) examples/second ")
_CLOCK = re.compile(r"(\d{1,2}:\d{1,2}:\d{1,2}.\d{1,6})")


def _reference_run(path, method, total_batch, warmup=100, train=600):
    """One run's speed as DLPerf's scripts compute it (log_steps 100)."""
    lines = [line for line in open(path) if "TimeHistory" in line]
    first, last = warmup // 100, train // 100
    if method == "mean":
        speeds = [float(_SPEED.findall(line)[0]) for line in lines]
        return round(np.mean(speeds[first:last]), 2)  # numpy float64
    t1 = datetime.datetime.strptime(_CLOCK.findall(lines[first - 1])[0],
                                    "%H:%M:%S.%f")
    t2 = datetime.datetime.strptime(_CLOCK.findall(lines[last - 1])[0],
                                    "%H:%M:%S.%f")
    return round(float(total_batch) / ((t2 - t1).total_seconds()
                                       / (train - warmup)), 2)


def reference(log_dir, method):
    """DLPerf's result dict for a log tree (speedup against 1n1g)."""
    speeds = {}
    for path in sorted(glob.glob(os.path.join(log_dir, "*", "*.log"))):
        case = os.path.basename(os.path.dirname(path))
        total = kit.devices(case) * 128
        speeds.setdefault(case, []).append(_reference_run(path, method, total))
    result = {}
    for case, values in speeds.items():
        total = 0
        for v in values:
            total += v
        # both scripts: compute_median = round(np.median(values), 2)
        median = round(np.median(values), 2)
        result[case] = {"average_speed": round(total / len(values), 2),
                        "median_speed": median}
    for case, entry in result.items():
        entry["speedup"] = round(entry["median_speed"] /
                                 result["1n1g"]["median_speed"], 2)
    return {"rn50": result}
