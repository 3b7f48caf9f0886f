"""All-reduce benchmark results in a log tree, as a bandwidth table.

`BENCH=allreduce bash run_*.sh` writes, per case directory ``{N}n{G}g``,
``allreduce_{dtype}_{i}.json`` (the chief's allreduce.json, copied beside
its log; other nodes' copies sit in ``node{k}/`` and are not read). Each
holds one entry per buffer size and dtype: ``nbytes``, ``dtype``,
``ranks``, ``seconds`` per all-reduce, and ``model`` (true for the model's
gradient size). Runs of a case are combined per (size, dtype) by the median
time; algbw and busbw follow from it (allreduce/bandwidth.py, nccl-tests'
definitions). A ``latency`` entry (a small all-reduce, seconds per
all-reduce) carries ``per_step``: the small collectives one train step of
the model issues (allreduce/bench.py; the scaling model charges each). A
file's ``compute_after_wait`` (official_bench/allreduce/compute_wait.py: the
model's step after a wait as long as the step's communication, against back to
back, side by side) gives the case's compute penalty, the median over its
runs (compute_waits), and its communication_in_step the step's
communication timed in training's pattern (allreduce/in_step.py).
"""

from __future__ import annotations

import json
import os
import statistics
from typing import Any, Dict, List, Optional, Tuple

from official_bench.allreduce import bandwidth
from official_bench.contracts import log_tree

# (nbytes, dtype, ranks, seconds, model, latency, per_step) of one entry.
Entry = Tuple[int, str, int, float, bool, bool, Optional[int]]
Row = Dict[str, Any]  # one (size, dtype) line of a case
COLUMNS = ("case", "size", "dtype", "ranks", "time ms", "algbw GB/s",
           "busbw GB/s", "runs")


def find(log_dir: str) -> List[Tuple[str, str]]:
    """``[(case, path)]`` of the all-reduce result files under log_dir."""
    found: List[Tuple[str, str]] = []
    for case in sorted(os.listdir(log_dir)):
        folder = os.path.join(log_dir, case)
        if log_tree.parse_case_name(case) is None or not os.path.isdir(folder):
            continue
        found += [(case, os.path.join(folder, n))
                  for n in sorted(os.listdir(folder))
                  if log_tree.parse_allreduce_json_name(n)]
    return found


def _load(path: str) -> Dict[str, Any]:
    """The file's record; ValueError unless it is an all-reduce result."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("kind") != "allreduce" or \
            not isinstance(data.get("results"), list):
        raise ValueError("not an all-reduce result (kind 'allreduce' with a "
                         "results list)")
    return data


def _entries(path: str) -> List[Entry]:
    """The file's result entries; ValueError naming what is wrong."""
    data = _load(path)
    out: List[Entry] = []
    for k, r in enumerate(data["results"]):
        ok = isinstance(r, dict) and all(
            isinstance(r.get(key), (int, float)) and not isinstance(
                r.get(key), bool) for key in ("nbytes", "ranks", "seconds"))
        if not ok or r["seconds"] <= 0 or r["nbytes"] <= 0 or r["ranks"] < 1:
            raise ValueError(f"results[{k}] needs nbytes > 0, ranks >= 1 and "
                             f"seconds > 0, got {r!r}")
        per_step = r.get("per_step")
        out.append((int(r["nbytes"]), str(r.get("dtype")), int(r["ranks"]),
                    float(r["seconds"]), bool(r.get("model")),
                    bool(r.get("latency")),
                    int(per_step) if isinstance(per_step, int) else None))
    return out


def collect(log_dir: str) -> Tuple[Dict[str, List[Row]], List[str]]:
    """``(table, warnings)``: table maps case -> rows (dicts with nbytes,
    dtype, ranks, seconds, algbw_gbps, busbw_gbps, runs, model), sorted by
    dtype and size; unreadable files are warnings, not errors."""
    times: Dict[str, Dict[Tuple[int, str, int, bool], List[float]]] = {}
    warnings: List[str] = []
    for case, path in find(log_dir):
        try:
            entries = _entries(path)
        except (OSError, ValueError) as e:
            warnings.append(f"{path}: unusable all-reduce result ({e})")
            continue
        for nbytes, dtype, ranks, seconds, model, latency, per_step in entries:
            key = (nbytes, dtype, ranks, model, latency, per_step)
            times.setdefault(case, {}).setdefault(key, []).append(seconds)
    table: Dict[str, List[Row]] = {}
    for case, by_key in times.items():
        rows: List[Row] = []
        for (nbytes, dtype, ranks, model, latency, per_step), secs in \
                by_key.items():
            r = bandwidth.AllReduceResult(nbytes, dtype, ranks,
                                          statistics.median(secs))
            rows.append({"nbytes": nbytes, "dtype": dtype, "ranks": ranks,
                         "seconds": r.seconds, "algbw_gbps": r.algbw,
                         "busbw_gbps": r.busbw, "runs": len(secs),
                         "model": model, "latency": latency,
                         "per_step": per_step})
        table[case] = sorted(rows, key=lambda r: (r["dtype"], r["nbytes"]))
    return table, warnings


IN_STEP_KEYS = ("gradient_seconds", "small_seconds")


def _compute_wait(data: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The record's compute_after_wait (None when it has none), with its
    communication_in_step (None in older records); ValueError naming what
    is wrong."""
    wait = data.get("compute_after_wait")
    if wait is None:
        return None
    keys = ("gap_seconds", "after_wait_seconds", "back_to_back_seconds")
    if not isinstance(wait, dict) or not _numbers(wait, keys) \
            or wait["back_to_back_seconds"] <= 0:
        raise ValueError(f"compute_after_wait needs {', '.join(keys)} >= 0 "
                         f"(back_to_back_seconds > 0), got {wait!r}")
    out: Dict[str, Any] = {k: float(wait[k]) for k in keys}
    out["penalty"] = out["after_wait_seconds"] / out["back_to_back_seconds"]
    in_step = wait.get("communication_in_step")
    if in_step is not None and not (isinstance(in_step, dict) and
                                    _numbers(in_step, IN_STEP_KEYS)):
        raise ValueError(f"compute_after_wait.communication_in_step needs "
                         f"{', '.join(IN_STEP_KEYS)} >= 0, got {in_step!r}")
    out["in_step"] = {k: float(in_step[k]) for k in IN_STEP_KEYS} \
        if in_step else None
    return out


def _numbers(d: Dict[str, Any], keys) -> bool:
    """Each key holds a number >= 0 (not a bool)."""
    return all(isinstance(d.get(k), (int, float)) and
               not isinstance(d.get(k), bool) and d[k] >= 0 for k in keys)


def compute_waits(log_dir: str) -> Tuple[Dict[str, Dict[str, Any]],
                                         List[str]]:
    """``(waits, warnings)``: case -> penalty (median over the case's runs
    of after-wait / back-to-back), gap_seconds and back_to_back_seconds
    (the chief's step back to back; their medians), runs,
    in_step: the communication in training's pattern (per key the median
    over the runs; None unless every run measured it), and per_run: each
    run's penalty and in_step (the scaling model's run-to-run spread), for
    the cases whose all-reduce results measured compute after a wait."""
    found: Dict[str, List[Dict[str, Any]]] = {}
    warnings: List[str] = []
    for case, path in find(log_dir):
        try:
            data = _load(path)
        except (OSError, ValueError):
            continue  # collect() warns about the file
        try:
            wait = _compute_wait(data)
        except ValueError as e:
            warnings.append(f"{path}: unusable compute_after_wait ({e})")
            continue
        if wait is not None:
            found.setdefault(case, []).append(wait)
    waits = {case: {
        "penalty": statistics.median(w["penalty"] for w in ws),
        "gap_seconds": statistics.median(w["gap_seconds"] for w in ws),
        "back_to_back_seconds": statistics.median(
            w["back_to_back_seconds"] for w in ws),
        "runs": len(ws),
        "in_step": {k: statistics.median(w["in_step"][k] for w in ws)
                    for k in IN_STEP_KEYS}
        if all(w["in_step"] for w in ws) else None,
        "per_run": [{"penalty": w["penalty"], "in_step": w["in_step"]}
                    for w in ws]}
        for case, ws in found.items()}
    return waits, warnings


def size_text(nbytes: int) -> str:
    """1048576 -> '1 MiB', 312168 -> '304.9 KiB'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            value = nbytes / scale
            if value == int(value):
                return f"{int(value)} {unit}"
            return f"{value:.1f} {unit}"
    return f"{int(nbytes)} B"


def table_rows(table: Dict[str, List[Row]]) -> List[List[str]]:
    """Cells in COLUMNS order, cases by device count."""
    def order(case: str) -> Tuple[int, int]:
        nodes, gpus = log_tree.parse_case_name(case)
        return nodes * gpus, nodes
    rows: List[List[str]] = []
    for case in sorted(table, key=order):
        for r in table[case]:
            label = " (model)" if r["model"] else ""
            if r.get("latency"):
                per_step = r.get("per_step")
                label = (" (latency)" if per_step is None
                         else f" (latency, {per_step} per step)")
            rows.append([case, size_text(r["nbytes"]) + label,
                         r["dtype"], str(r["ranks"]),
                         f"{r['seconds'] * 1e3:.3f}", f"{r['algbw_gbps']:.3f}",
                         f"{r['busbw_gbps']:.3f}", str(r["runs"])])
    return rows


def markdown(table: Dict[str, List[Row]]) -> str:
    """The bandwidth section of the Markdown report ('' without results)."""
    if not table:
        return ""
    lines = ["\n## All-reduce bandwidth\n\n",
             "| " + " | ".join(COLUMNS) + " |\n",
             "| " + " | ".join("-" * len(c) for c in COLUMNS) + " |\n"]
    lines += ["| " + " | ".join(cells) + " |\n" for cells in table_rows(table)]
    lines.append("\n- time: median over the case's runs of the mean time of "
                 "one all-reduce; algbw = bytes / time; busbw = algbw x "
                 "2(n-1)/n (nccl-tests); (model): the model's gradient; "
                 "(latency): a small all-reduce, time per all-reduce, with "
                 "the number of small collectives in one train step\n")
    return "".join(lines)
