"""All-reduce benchmark results in a log tree, as a bandwidth table.

`BENCH=allreduce bash run_*.sh` writes, per case directory ``{N}n{G}g``,
``allreduce_{dtype}_{i}.json`` (the chief's allreduce.json, copied beside
its log; other nodes' copies sit in ``node{k}/`` and are not read). Each
holds one entry per buffer size and dtype: ``nbytes``, ``dtype``,
``ranks``, ``seconds`` per all-reduce, and ``model`` (true for the model's
gradient size). Runs of a case are combined per (size, dtype) by the median
time; algbw and busbw follow from it (results/bandwidth.py, nccl-tests'
definitions). A ``latency`` entry (a small all-reduce, seconds per
all-reduce) carries ``per_step``: the small collectives one train step of
the model issues (allreduce_bench; the scaling model charges each).
"""

import json
import os
import re
import statistics

from official_bench.results import bandwidth
from official_bench.results import logparse

FILE_RE = re.compile(r"^allreduce_(%s)_(\d+)\.json$" % "|".join(logparse.DTYPES))
COLUMNS = ("case", "size", "dtype", "ranks", "time ms", "algbw GB/s",
           "busbw GB/s", "runs")


def find(log_dir):
    """``[(case, path)]`` of the all-reduce result files under log_dir."""
    found = []
    for case in sorted(os.listdir(log_dir)):
        folder = os.path.join(log_dir, case)
        if logparse.parse_case_name(case) is None or not os.path.isdir(folder):
            continue
        found += [(case, os.path.join(folder, n))
                  for n in sorted(os.listdir(folder)) if FILE_RE.match(n)]
    return found


def _entries(path):
    """The file's result entries; ValueError naming what is wrong."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("kind") != "allreduce" or \
            not isinstance(data.get("results"), list):
        raise ValueError("not an all-reduce result (kind 'allreduce' with a "
                         "results list)")
    out = []
    for k, r in enumerate(data["results"]):
        ok = isinstance(r, dict) and all(
            isinstance(r.get(key), (int, float)) and not isinstance(
                r.get(key), bool) for key in ("nbytes", "ranks", "seconds"))
        if not ok or r["seconds"] <= 0 or r["nbytes"] <= 0 or r["ranks"] < 1:
            raise ValueError("results[%d] needs nbytes > 0, ranks >= 1 and "
                             "seconds > 0, got %r" % (k, r))
        per_step = r.get("per_step")
        out.append((int(r["nbytes"]), str(r.get("dtype")), int(r["ranks"]),
                    float(r["seconds"]), bool(r.get("model")),
                    bool(r.get("latency")),
                    int(per_step) if isinstance(per_step, int) else None))
    return out


def collect(log_dir):
    """``(table, warnings)``: table maps case -> rows (dicts with nbytes,
    dtype, ranks, seconds, algbw_gbps, busbw_gbps, runs, model), sorted by
    dtype and size; unreadable files are warnings, not errors."""
    times, warnings = {}, []
    for case, path in find(log_dir):
        try:
            entries = _entries(path)
        except (OSError, ValueError) as e:
            warnings.append("%s: unusable all-reduce result (%s)" % (path, e))
            continue
        for nbytes, dtype, ranks, seconds, model, latency, per_step in entries:
            key = (nbytes, dtype, ranks, model, latency, per_step)
            times.setdefault(case, {}).setdefault(key, []).append(seconds)
    table = {}
    for case, by_key in times.items():
        rows = []
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


def size_text(nbytes):
    """1048576 -> '1 MiB', 312168 -> '304.9 KiB'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            value = nbytes / scale
            return ("%d %s" if value == int(value) else "%.1f %s") % (value, unit)
    return "%d B" % nbytes


def table_rows(table):
    """Cells in COLUMNS order, cases by device count."""
    def order(case):
        nodes, gpus = logparse.parse_case_name(case)
        return nodes * gpus, nodes
    rows = []
    for case in sorted(table, key=order):
        for r in table[case]:
            label = " (model)" if r["model"] else ""
            if r.get("latency"):
                label = " (latency%s)" % (
                    "" if r.get("per_step") is None else
                    ", %d per step" % r["per_step"])
            rows.append([case, size_text(r["nbytes"]) + label,
                         r["dtype"], str(r["ranks"]), "%.3f" % (r["seconds"] * 1e3),
                         "%.3f" % r["algbw_gbps"], "%.3f" % r["busbw_gbps"],
                         str(r["runs"])])
    return rows


def markdown(table):
    """The bandwidth section of the Markdown report ('' without results)."""
    if not table:
        return ""
    lines = ["\n## All-reduce bandwidth\n\n",
             "| " + " | ".join(COLUMNS) + " |\n",
             "| " + " | ".join("-" * len(c) for c in COLUMNS) + " |\n"]
    lines += ["| " + " | ".join(cells) + " |\n" for cells in table_rows(table)]
    lines.append("\n- time: median over the case's runs of the mean time of "
                 "one all-reduce; algbw = bytes / time; busbw = algbw x "
                 "2(n-1)/n (nccl-tests); (model): the model's gradient; (latency): "
                 "a small all-reduce, time per all-reduce, with the number "
                 "of small collectives in one train step\n")
    return "".join(lines)
