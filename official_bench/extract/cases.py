"""Per-case statistics and the result dictionary in DLPerf's shape.

A *case* is one ``{N}n{G}g`` directory; its runs are the logs in it. Runs are
kept apart by dtype and per-device batch size (a *group*); each group becomes
one top-level key of the result:

* one group in the directory (the usual ``bz{B}`` directory with one dtype):
  ``"rn50"`` -- exactly DLPerf's shape;
* several dtypes, one batch size: ``"rn50_fp32"``, ``"rn50_fp16"``, ...;
* several batch sizes: ``"rn50_b128_fp32"``, ``"rn50_b256_fp16"``, ...

Each case entry has DLPerf's keys ``average_speed``, ``median_speed``
(samples/s), ``speedup`` and ``batch_size_per_device``, computed in DLPerf's
order: each run's speed is rounded to 2 decimals first, then the average and
median of those rounded speeds are taken and rounded, and
``speedup = round(median_speed / median_speed(baseline), 2)`` from the two
rounded medians, so every printed speedup can be recomputed from the printed
medians (the exact roundings per method are in
:mod:`official_bench.extract.rounding`). The baseline is ``1n1g`` or, when the
group has no usable 1n1g, the case with the fewest devices (then fewest nodes);
``speedup_baseline`` names it. ``efficiency = (median_speed /
median_speed(baseline)) / (devices / baseline devices)``, 4 decimals.
Full-precision values are kept as ``average_speed_unrounded``,
``median_speed_unrounded`` and ``speedup_unrounded`` (mean and median of the
unrounded run speeds, and their ratio).
"""

from __future__ import annotations

import statistics
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from official_bench.contracts import (
    dtypes,
    log_tree,
    run_backend,
    throughput,
)
from official_bench.extract import model_flops, rounding, subject
from official_bench.extract.logparse import RunId
from official_bench.extract.speeds import RunOutcome
from official_bench.measure.host_env import SUITE_KEY

Group = Tuple[str, int]  # (dtype, per-device batch)
Entry = Dict[str, Any]  # one case of the result dictionary

BASELINE_CASE = "1n1g"
# images / time over the counted window (contracts/throughput.py's name)
OVER_WINDOW_KEY = throughput.OVER_WINDOW_KEY


def group_key(run: RunId) -> Group:
    """Runs are compared only within one dtype and per-device batch size."""
    return run.dtype, run.batch_size


def model_keys(groups: Iterable[Group]) -> Dict[Group, str]:
    """Top-level result key for each ``(dtype, batch)`` group (module doc)."""
    groups = sorted(set(groups),
                    key=lambda g: (dtypes.SHORT_NAMES.index(g[0]), g[1]))
    if len(groups) == 1:
        return {groups[0]: log_tree.MODEL}
    if len({b for _, b in groups}) == 1:
        return {g: f"{log_tree.MODEL}_{g[0]}" for g in groups}
    return {g: f"{log_tree.MODEL}_b{g[1]:d}_{g[0]}" for g in groups}


def _round(value: Optional[float], digits: int) -> Optional[float]:
    """round() that lets None through (cases without usable runs)."""
    return None if value is None else round(value, digits)


def spread(speeds: List[float]) -> Dict[str, Optional[float]]:
    """min, max, sample standard deviation and coefficient of variation.

    std and cv are None for fewer than two runs: one run says nothing about
    run-to-run variation.
    """
    if not speeds:
        return {"min": None, "max": None, "std": None, "cv": None}
    std = statistics.stdev(speeds) if len(speeds) > 1 else None
    mean = statistics.fmean(speeds)
    cv = std / mean if std is not None and mean > 0 else None
    return {"min": round(min(speeds), 2), "max": round(max(speeds), 2),
            "std": _round(std, 2), "cv": _round(cv, 4)}


def _sort_key(case: str) -> Tuple[int, int]:
    """Cases in order of device count, then node count (1n8g before 8n1g)."""
    nodes, gpus = log_tree.parse_case_name(case)
    return nodes * gpus, nodes


def pick_baseline(medians: Mapping[str, Optional[float]]) -> Optional[str]:
    """Baseline case for speedup: 1n1g if it has a median, else the smallest.

    ``medians`` maps case -> median speed or None. Returns None when no case
    has a median.
    """
    usable = [c for c, m in medians.items() if m is not None]
    if not usable:
        return None
    if BASELINE_CASE in usable:
        return BASELINE_CASE
    return min(usable, key=_sort_key)


# The environment keys the trainer's first result.json already wrote: one
# run's file without one of them differs from a file with it. A key added
# later (cpu_model, cpu_kernels_note, official_bench, ...) is missing from
# older runs' files, which says nothing about the run: it differs only
# where both runs name it. backend is compared as run_backend resolves it.
FIRST_KEYS = frozenset((
    "python", "tensorflow", "tf_keras", "platform", "cpu_count",
    "devices", "replicas_per_worker", "configured_devices", "gpu_names",
    "cuda_version", "cudnn_version", "is_cuda_build", "num_workers",
    "num_replicas", "strategy", "dtype", "horovod"))
NOT_COMPARED = frozenset(("hostname",))  # may differ without meaning
# Compared on their own, with a warning of their own (suite_versions).
SEPARATE = frozenset((SUITE_KEY,))
UNVERSIONED = "made before the suite recorded its version"


def _environment(outcomes: List[RunOutcome], warnings: List[str],
                 label: str) -> Optional[Dict[str, Any]]:
    """The case's environment from the runs' result JSONs; warn on differences.

    Hostnames may differ between runs without meaning anything, other fields
    (TensorFlow version, GPUs, CUDA) should not. One rule
    (`environment_differences`) decides what differs and names it; the
    suite's version has a warning of its own (`suite_versions`).
    """
    with_env = [o for o in outcomes if o.environment]
    if not with_env:
        return None
    first = _compared_environment(with_env[0])
    for o in with_env[1:]:
        keys = environment_differences(first, _compared_environment(o))
        if keys:
            warnings.append(f"{label}: runs report different environments "
                            f"({', '.join(keys)})")
            break
    return with_env[0].environment


def _compared_environment(o: RunOutcome) -> Dict[str, Any]:
    """A run's environment as compared: null values dropped (absent and
    null are the same), hostname left out, backend as resolved."""
    env = {k: v for k, v in o.environment.items()
           if v is not None and k not in NOT_COMPARED | SEPARATE}
    env["backend"] = run_backend.backend(o.config, o.environment, o.log_path)
    return env


def environment_differences(a: Mapping[str, Any],
                            b: Mapping[str, Any]) -> List[str]:
    """The keys two compared environments differ in, sorted: a key both
    name with other values, or a FIRST_KEYS key only one names."""
    return sorted(k for k in set(a) | set(b)
                  if (k in a and k in b and a[k] != b[k])
                  or (k in FIRST_KEYS and (k in a) != (k in b)))


def suite_versions(outcomes: List[RunOutcome], label: str
                   ) -> Optional[str]:
    """The warning for a case whose counted runs were made by different
    versions of the suite (result.json's ``environment.official_bench``),
    naming the runs of each, a run without it as made before the suite
    recorded it; None for one version (or none recorded). Runs without a
    result JSON say nothing either way."""
    by_version: Dict[Optional[str], List[int]] = {}
    for o in outcomes:
        if o.ok and o.environment:
            by_version.setdefault(o.environment.get(SUITE_KEY) or None,
                                  []).append(o.run.index)
    if len(by_version) < 2:
        return None
    parts = []
    for version, runs in by_version.items():  # in the order of first runs
        named = f"run{'s' if len(runs) > 1 else ''} " + ", ".join(
            str(i) for i in runs)
        parts.append(f"{named} {UNVERSIONED}" if version is None
                     else f"{named} by {SUITE_KEY} {version}")
    return f"{label}: the case mixes suite versions: {', '.join(parts)}"


def _measured(outcomes: List[RunOutcome]) -> Optional[Dict[str, Any]]:
    """What the case measured (model, image size, device: extract/subject.py)
    from the first run with a result JSON, counted runs first."""
    for o in sorted(outcomes, key=lambda o: not o.ok):
        if o.environment or o.config:
            return subject.describe(o.config, o.environment)
    return None


def case_entry(run: RunId, outcomes: List[RunOutcome], method: str,
               warmup_batches: int, train_batches: int
               ) -> Tuple[Entry, Optional[float]]:
    """Statistics of one case (without speedup, which needs all cases).

    Extra keys beyond DLPerf's: num_nodes, num_gpus_per_node, num_devices,
    dtype, global_batch_size, per_device_speed (median / devices), runs
    (per-run speeds rounded as DLPerf rounds them, in run order), num_runs,
    min, max, std, cv (of those), gpu_utilisation (mean GPU utilisation in
    percent over the counted runs that sampled a GPU, else None),
    images_per_second_over_window (median over the runs of images / time
    over each run's counted intervals, beside median_speed's mean of their
    rates), the ``*_unrounded`` values, run_details,
    excluded ([{log, index, reason}]), method, warmup_batches, train_batches,
    environment (when a result JSON was present), warnings (when any).
    Returns ``(entry, median_speed)``; the median is the rounded one.
    """
    arith = rounding.Arithmetic(method)
    ok = [o for o in outcomes if o.ok]
    exact = [o.speed for o in ok]
    speeds = [arith.run(s) for s in exact]
    median = arith.median(speeds) if speeds else None
    entry = {
        "average_speed": arith.average(speeds) if speeds else None,
        "median_speed": median,
        "speedup": None,
        "batch_size_per_device": run.batch_size,
        "speedup_baseline": None,
        "efficiency": None,
        "num_nodes": run.num_nodes,
        "num_gpus_per_node": run.gpus_per_node,
        "num_devices": run.num_devices,
        "dtype": run.dtype,
        "global_batch_size": (ok[0].global_batch_size if ok
                              else run.batch_size * run.num_devices),
        "per_device_speed": _round(
            median / run.num_devices if speeds else None, 2),
        "runs": speeds,
        "num_runs": len(speeds),
        "average_speed_unrounded": statistics.fmean(exact) if exact else None,
        "median_speed_unrounded": statistics.median(exact) if exact else None,
        "speedup_unrounded": None,
    }
    entry.update(spread(speeds))
    utils = [o.gpu_utilisation for o in ok if o.gpu_utilisation is not None]
    entry["gpu_utilisation"] = (_round(statistics.fmean(utils), 1) if utils
                                else None)
    waits = [o.input_wait for o in ok if o.input_wait is not None]
    entry["input_wait"] = (_round(statistics.fmean(waits), 4) if waits
                           else None)
    over = [o.over_window for o in ok if o.over_window is not None]
    entry[OVER_WINDOW_KEY] = (_round(statistics.median(over), 2) if over
                              else None)
    entry["run_details"] = [
        {"log": o.run.log_name, "index": o.run.index, "speed": speed,
         "speed_unrounded": o.speed, OVER_WINDOW_KEY: o.over_window,
         "source": o.source,
         "counted_steps": list(o.counted_steps),
         "num_intervals": o.num_intervals} for o, speed in zip(ok, speeds)]
    entry["excluded"] = [{"log": o.run.log_name, "index": o.run.index,
                          "reason": o.excluded} for o in outcomes if not o.ok]
    entry.update(method=method, warmup_batches=warmup_batches,
                 train_batches=train_batches)
    return entry, median


def add_speedups(cases: Dict[str, Entry],
                 medians: Mapping[str, Optional[float]], model_key: str,
                 warnings: List[str], method: str = "mean") -> None:
    """Fill speedup, speedup_baseline and efficiency of every case in place.

    ``medians`` are the rounded medians (DLPerf's speedup is their ratio).
    """
    arith = rounding.Arithmetic(method)
    base = pick_baseline(medians)
    if base is None:
        return
    if base != BASELINE_CASE:
        why = ("has no usable run" if BASELINE_CASE in cases
               else "is not among the cases")
        warnings.append(f"{model_key}: {BASELINE_CASE} {why}; speedup is "
                        f"against {base}")
    base_devices = cases[base]["num_devices"]
    for case, entry in cases.items():
        if medians[case] is None:
            continue
        ratio = medians[case] / medians[base]
        entry["speedup"] = arith.speedup(medians[case], medians[base])
        entry["speedup_baseline"] = base
        entry["efficiency"] = round(
            ratio / (entry["num_devices"] / base_devices), 4)
        entry["speedup_unrounded"] = (entry["median_speed_unrounded"] /
                                      cases[base]["median_speed_unrounded"])


def _spread_warning(label: str, entry: Entry,
                    spread_warn: float) -> Optional[str]:
    """Warning text when the runs of a case disagree by more than the
    threshold."""
    if entry["cv"] is None or entry["cv"] * 100 <= spread_warn:
        return None
    speeds = ", ".join(f"{s:.2f}" for s in entry["runs"])
    return (f"{label}: runs disagree: CV {entry['cv'] * 100:.2f}% > "
            f"--spread_warn {spread_warn:g}% (speeds {speeds})")


def _mfu_rate(entry: Entry) -> Optional[float]:
    """The rate a case's MFU is at, unrounded (the printed 2-decimal rate
    moves MFU's 4th digit away from the trainer's): the median of the runs'
    images / time over the window, else the median of their speeds."""
    over = [d[OVER_WINDOW_KEY] for d in entry["run_details"]
            if d[OVER_WINDOW_KEY] is not None]
    return statistics.median(over) if over else \
        entry["median_speed_unrounded"]


def summarize(outcomes: Iterable[RunOutcome], method: str = "mean",
              warmup_batches: int = 100, train_batches: int = 600,
              spread_warn: float = 5.0
              ) -> Tuple[Dict[str, Dict[str, Entry]], List[str]]:
    """Build the result dictionary from all runs' outcomes.

    Returns ``(result, warnings)``; ``warnings`` are human-readable strings
    (also stored per case under ``"warnings"``).
    """
    groups: Dict[Group, Dict[str, List[RunOutcome]]] = {}
    for o in outcomes:
        groups.setdefault(group_key(o.run), {}).setdefault(
            o.run.case, []).append(o)
    keys = model_keys(groups)
    result: Dict[str, Dict[str, Entry]] = {}
    all_warnings: List[str] = []
    for group, model_key in keys.items():  # dtype order: fp32, fp16, bf16
        by_case = groups[group]
        cases: Dict[str, Entry] = {}
        medians: Dict[str, Optional[float]] = {}
        case_warnings: Dict[str, List[str]] = {}
        for case in sorted(by_case, key=_sort_key):
            runs = sorted(by_case[case], key=lambda o: o.run.index)
            label = f"{model_key} {case}"
            warns: List[str] = []
            entry, medians[case] = case_entry(runs[0].run, runs, method,
                                              warmup_batches, train_batches)
            entry["backend"] = run_backend.backend(
                runs[0].config, runs[0].environment, runs[0].log_path)
            env = _environment(runs, warns, label)
            versions = suite_versions(runs, label)
            if versions:
                warns.append(versions)
            if env is not None:
                entry["environment"] = env
            measured = _measured(runs)
            if measured is not None:
                entry[subject.KEY] = measured
            rate = _mfu_rate(entry)
            counted = [o.flops for o in runs if o.ok]
            devices = model_flops.peak_devices(
                entry["num_nodes"], entry["num_devices"],
                (measured or {}).get("device_kind"), counted)
            flops = model_flops.case_flops(counted, rate, devices, label,
                                           warns)
            if flops is not None:
                entry[model_flops.KEY] = flops
            if medians[case] is None:
                warns.append(f"{label}: all {len(runs)} run(s) excluded")
            spread_msg = _spread_warning(label, entry, spread_warn)
            if spread_msg:
                warns.append(spread_msg)
            cases[case], case_warnings[case] = entry, warns
        group_warnings: List[str] = []
        add_speedups(cases, medians, model_key, group_warnings, method)
        for case, entry in cases.items():
            warns = case_warnings[case] + [
                w for w in group_warnings if case == entry["speedup_baseline"]]
            if warns:
                entry["warnings"] = warns
        all_warnings += group_warnings + [w for c in cases
                                          for w in case_warnings[c]]
        result[model_key] = cases
    return result, all_warnings
