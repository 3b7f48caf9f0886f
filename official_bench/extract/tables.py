"""Readable forms of a result dictionary: Markdown, CSV and comparisons.

Works on the result JSON's shape only (``{model: {case: {...}}}``), so it
reports this extractor's files and DLPerf's own ``*_result.json`` alike: keys
beyond DLPerf's four (``average_speed``, ``median_speed``, ``speedup``,
``batch_size_per_device``) are used when present and shown as ``n/a``
otherwise; node and device counts come from the case key (``2n8g``).

The Markdown table follows DLPerf's README tables: ``gpu_num`` is the total
device count and ``samples/s`` the median over the runs. ``GPU util`` is the
mean GPU utilisation the trainer's sampler recorded (``n/a`` without a GPU
or without result JSONs); ``input wait`` the mean share of time the training
input pipeline kept the trainer waiting (``input_wait.fraction`` of the
result JSONs; ``n/a`` under horovod and parameter_server, which do not
measure it).

Model FLOPs get a table of their own under a section's notes,
only when result JSONs carried the trainer's ``flops`` object
(:mod:`official_bench.extract.model_flops`): DLPerf's table above stays as
it is, with or without result JSONs.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from official_bench.contracts import log_tree
from official_bench.extract import model_flops, subject
from official_bench.extract.errors import ExtractError

Entry = Dict[str, Any]  # one case of a result
ModelResult = Dict[str, Entry]  # case -> entry of one section
Result = Dict[str, ModelResult]  # model key -> section

MARKDOWN_COLUMNS = ("node_num", "gpu_num", "samples/s", "speedup",
                    "efficiency", "samples/s per device", "runs", "CV",
                    "input wait", "GPU util")
CSV_COLUMNS = ("model", "dtype", "batch_size_per_device", "num_nodes",
               "num_gpus_per_node", "num_devices", "global_batch_size",
               "average_speed", "median_speed", "speedup", "speedup_baseline",
               "efficiency", "per_device_speed", "min", "max", "std", "cv",
               "num_runs", "num_excluded", "method", "gpu_utilisation",
               "input_wait", "images_per_second_over_window",
               "gflop_per_image", "achieved_tflops",
               "peak_tflops_per_device", "mfu", "backend")
# The model-FLOPs table (FLOPS_COLUMNS) and the CSV's columns from it.
FLOPS_COLUMNS = ("node_num", "gpu_num", "images/s over window", "GFLOP/image",
                 "TFLOP/s", "TFLOP/s per device", "peak TFLOP/s per device",
                 "MFU")
_CSV_FLOPS_KEYS = ("gflop_per_image", "achieved_tflops",
                   "peak_tflops_per_device", "mfu")
COMPARE_CSV_COLUMNS = ("model_a", "model_b", "num_nodes", "num_gpus_per_node",
                       "num_devices", "median_speed_a", "speedup_a",
                       "median_speed_b", "speedup_b", "ratio_b_over_a")


def case_counts(case: str) -> Tuple[int, int, int]:
    """(nodes, gpus per node, devices) of a case key such as ``"4n8g"``."""
    nodes, gpus = log_tree.parse_case_name(case)
    return nodes, gpus, nodes * gpus


def sorted_cases(model_result: ModelResult) -> List[Tuple[str, Entry]]:
    """``[(case, entry)]`` in order of device count, then node count."""
    return sorted(model_result.items(),
                  key=lambda kv: (case_counts(kv[0])[2],
                                  case_counts(kv[0])[0]))


def _fmt(value: Optional[float], spec: str = ".2f", unit: str = "") -> str:
    """Format a number for a table; ``n/a`` for missing values."""
    return "n/a" if value is None else format(value, spec) + unit


def _percent(value: Optional[float]) -> str:
    """0.9531 -> '95.31%'."""
    return "n/a" if value is None else f"{value * 100:.2f}%"


def load_result(path: str) -> Result:
    """Read a result JSON (this extractor's or DLPerf's) and check its shape.

    Raises ExtractError naming the path and what is wrong.
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ExtractError(f"cannot read result file {path}: {e}")
    except ValueError as e:
        raise ExtractError(f"result file {path} is not valid JSON: {e}")
    if not isinstance(data, dict) or not data:
        raise ExtractError(f"result file {path}: expected "
                           '{"rn50": {"1n1g": {...}}}, got '
                           f"{type(data).__name__}")
    for model, model_result in data.items():
        if not isinstance(model_result, dict) or not model_result:
            raise ExtractError(f"result file {path}: {model!r} is not a "
                               "non-empty object of cases")
        for case, entry in model_result.items():
            if log_tree.parse_case_name(case) is None:
                raise ExtractError(f"result file {path}: case key {case!r} "
                                   f"under {model!r} is not {{N}}n{{G}}g")
            if not isinstance(entry, dict) or "median_speed" not in entry:
                raise ExtractError(f"result file {path}: {model}/{case} has "
                                   "no median_speed")
            _check_speeds(path, f"{model}/{case}", entry)
    return data


# DLPerf's numbers in a case entry: a finite number or null each.
_SPEED_KEYS = ("median_speed", "average_speed", "speedup")


def _check_speeds(path: str, where: str, entry: Entry) -> None:
    """ExtractError naming the file and key of a speed that is neither a
    finite number nor null (a string would fail deep in the tables)."""
    for key in _SPEED_KEYS:
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise ExtractError(f"result file {path}: {where} {key} is "
                               f"{json.dumps(value)}, expected a finite "
                               "number or null")


def section_title(model_key: str, model_result: ModelResult) -> str:
    """Section title naming dtype and batch size when the entries carry
    them."""
    entry = next(iter(model_result.values()))
    details = []
    if entry.get("dtype"):
        details.append(str(entry["dtype"]))  # another tool's file: any
    if entry.get("batch_size_per_device") is not None:
        details.append(f"batch {entry['batch_size_per_device']} per device")
    return model_key + (f" ({', '.join(details)})" if details else "")


def table_rows(model_result: ModelResult) -> List[List[str]]:
    """Cells of the report table, one list per case (MARKDOWN_COLUMNS order).

    Shared by the Markdown and the HTML report so both show the same numbers.
    """
    rows: List[List[str]] = []
    for case, e in sorted_cases(model_result):
        nodes, _, devices = case_counts(case)
        runs = e.get("num_runs")
        if runs is not None and e.get("excluded"):
            runs = f"{int(runs)} (+{len(e['excluded'])} excluded)"
        rows.append([str(nodes), str(devices), _fmt(e.get("median_speed")),
                     _fmt(e.get("speedup")), _percent(e.get("efficiency")),
                     _fmt(e.get("per_device_speed")),
                     "n/a" if runs is None else str(runs),
                     _percent(e.get("cv")), _percent(e.get("input_wait")),
                     _fmt(e.get("gpu_utilisation"), ".0f", "%")])
    return rows


def mfu_text(flops: Dict[str, Any]) -> str:
    """A case's MFU for a table: '21.35%', or 'n/a (why)'."""
    if flops.get("mfu") is not None:
        return _percent(flops["mfu"])
    return f"n/a ({flops.get('mfu_note') or 'peak unknown'})"


def flops_rows(model_result: ModelResult) -> List[List[str]]:
    """Cells of the model-FLOPs table (FLOPS_COLUMNS order), one list per
    case that carries model FLOPs; shared by the Markdown and the HTML."""
    rows: List[List[str]] = []
    for case, e in sorted_cases(model_result):
        flops = e.get(model_flops.KEY)
        if not flops:
            continue
        nodes, _, devices = case_counts(case)
        rate = flops.get("images_per_second", e.get("median_speed"))
        rows.append([str(nodes), str(devices), _fmt(rate),
                     _fmt(flops.get("gflop_per_image")),
                     _fmt(flops.get("achieved_tflops"), ".3f"),
                     _fmt(flops.get("achieved_tflops_per_device"), ".3f"),
                     _fmt(flops.get("peak_tflops_per_device"), ".4g"),
                     mfu_text(flops)])
    return rows


def _markdown_grid(columns: Sequence[str], rows: List[List[str]]) -> str:
    """A Markdown table: header, dashes as wide as each header, rows."""
    lines = ["| " + " | ".join(columns) + " |",
             "| " + " | ".join("-" * len(c) for c in columns) + " |"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n"


def markdown_table(model_result: ModelResult) -> str:
    """DLPerf-style table of one model's cases, one row per case."""
    return _markdown_grid(MARKDOWN_COLUMNS, table_rows(model_result))


FLOPS_NOTE = ("TFLOP/s: images/s over window (images / time over the "
              "counted intervals, median of the runs: the rate of the "
              "trainer's MFU, not the mean of interval rates above) x "
              "training GFLOP per image (3 x 2 x forward multiply-adds) / "
              "1000; MFU: TFLOP/s / "
              "(dense peak per device x devices), the trainer's peak for the "
              "run's precision and its devices: gpu_num on GPUs; on CPUs "
              "the trainer's count, one per worker process (a process's "
              "logical CPU devices share one CPU)")


def markdown_flops(model_result: ModelResult) -> str:
    """The model-FLOPs table of one section, '' when no case has FLOPs."""
    if not model_flops.has_flops(model_result):
        return ""
    return ("\n### Model FLOPs utilisation\n\n"
            + _markdown_grid(FLOPS_COLUMNS, flops_rows(model_result))
            + f"\n- {FLOPS_NOTE}\n")


def _environment_line(env: Dict[str, Any]) -> str:
    """One line summarising a run environment from the trainer's result
    JSON."""
    parts = []
    for key, label in (("tensorflow", "TensorFlow"), ("tf_keras", "tf_keras"),
                       ("keras", "Keras"), ("jax", "JAX"),
                       ("jaxlib", "jaxlib"),
                       ("python", "Python"),
                       ("cuda_version", "TensorFlow built with CUDA"),
                       ("cudnn_version", "cuDNN"), ("strategy", "strategy")):
        if env.get(key):
            parts.append(f"{label} {env[key]}")
    gpus = env.get("gpu_names") or []
    if gpus:
        parts.append("GPUs: " + gpu_summary(gpus))
    return ", ".join(parts)


def gpu_summary(gpu_names: List[str]) -> str:
    """``["A100", "A100"]`` -> ``"2 x A100"``; several models
    comma-separated."""
    return ", ".join(f"{gpu_names.count(n)} x {n}"
                     for n in sorted(set(gpu_names)))


def counted_steps_text(model_result: ModelResult) -> str:
    """"steps 10-30": the steps the section's runs counted; the window
    asked beside them when the runs counted less (they ended before
    --train_batches, or logged off its steps)."""
    first = next(iter(model_result.values()))
    asked = (first.get("warmup_batches"), first.get("train_batches"))
    counted: List[Tuple[int, int]] = []
    for e in model_result.values():
        for run in e.get("run_details") or []:
            steps = tuple(run.get("counted_steps") or ())
            if len(steps) == 2 and steps not in counted:
                counted.append(steps)
    if not counted or counted == [asked]:
        return f"steps {asked[0]}-{asked[1]}"
    return ("steps " + ", ".join(f"{a}-{b}" for a, b in sorted(counted))
            + f" (the window asked was {asked[0]}-{asked[1]})")


def notes(model_result: ModelResult) -> List[str]:
    """Notes under a table (method, baseline, exclusions, warnings), as
    text."""
    found = []
    first = next(iter(model_result.values()))
    if "method" in first:
        kind = "mean interval" if first["method"] == "mean" else "clock-time"
        found.append(f"samples/s: median over runs of the per-run {kind} "
                     f"throughput, {counted_steps_text(model_result)}")
    baselines = {e.get("speedup_baseline") for e in model_result.values()}
    baselines.discard(None)
    if baselines and baselines != {"1n1g"}:
        found.append(f"speedup and efficiency against "
                     f"{', '.join(sorted(baselines))} (no usable 1n1g)")
    envs: List[str] = []
    for case, e in sorted_cases(model_result):
        if (e.get("scaling_model") or {}).get("explanation"):
            found.append("scaling model: " + e["scaling_model"]["explanation"])
        for ex in e.get("excluded") or []:
            found.append(f"excluded {case}/{ex['log']}: {ex['reason']}")
        for w in e.get("warnings") or []:
            found.append(f"warning: {w}")
        line = _environment_line(e.get("environment") or {})
        if line and line not in envs:
            envs.append(line)
    return found + ["environment: " + line for line in envs]


def markdown_report(result: Result, name: Optional[str] = None) -> str:
    """The whole Markdown report: one section with table and notes per model.

    Under the title, when result JSONs said what was measured, the same
    words as the plot's and the HTML page's (extract/subject.py); without
    them the report is as before, line for line.
    """
    out = [f"# ResNet-50 v1.5 throughput{': ' + name if name else ''}\n"]
    if subject.recorded(result):
        out.append(f"\nMeasured: {subject.headline(result)}\n")
        out += [f"\n**{line}**\n" if line == subject.SMOKE_TEXT
                else f"\n{line}\n" for line in subject.details(result)]
    for model_key, model_result in result.items():
        out.append(f"\n## {section_title(model_key, model_result)}\n\n")
        out.append(markdown_table(model_result))
        lines = notes(model_result)
        if lines:
            out.append("\n" + "".join(f"- {n}\n" for n in lines))
        out.append(markdown_flops(model_result))
    return "".join(out)


def _csv(rows: List[Dict[str, Any]], columns: Sequence[str]) -> str:
    """Render dict rows as CSV text (missing values as empty cells)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n",
                            extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buf.getvalue()


def csv_rows(result: Result) -> List[Dict[str, Any]]:
    """One flat dict per (model, case), with CSV_COLUMNS' keys."""
    rows: List[Dict[str, Any]] = []
    for model_key, model_result in result.items():
        for case, e in sorted_cases(model_result):
            nodes, gpus, devices = case_counts(case)
            row = {k: e.get(k) for k in CSV_COLUMNS}
            flops = e.get(model_flops.KEY) or {}
            row.update({k: flops.get(k) for k in _CSV_FLOPS_KEYS})
            row.update(model=model_key, num_nodes=nodes,
                       num_gpus_per_node=gpus, num_devices=devices,
                       num_excluded=len(e.get("excluded") or []))
            rows.append(row)
    return rows


def csv_text(result: Result) -> str:
    """The result as CSV, one row per model and case."""
    return _csv(csv_rows(result), CSV_COLUMNS)


def compare_labels(path_a: str, path_b: str) -> Tuple[str, str]:
    """Short column labels for two result files (``bz128`` vs ``bz256``).

    When the file names are equal (two TensorFlow versions in two
    directories) the parent directory is prepended; as a last resort A and B.
    """
    def base(path: str) -> str:
        name = os.path.basename(path)
        for suffix in ("_result.json", ".json"):
            if name.endswith(suffix):
                return name[:-len(suffix)]
        return name

    a, b = base(path_a), base(path_b)
    if a != b:
        return a, b
    pa = os.path.basename(os.path.dirname(os.path.abspath(path_a)))
    pb = os.path.basename(os.path.dirname(os.path.abspath(path_b)))
    if pa != pb:
        return f"{pa}/{a}", f"{pb}/{b}"
    return "A", "B"


def pair_models(a: Result, b: Result
                ) -> Tuple[List[Tuple[str, str]], List[str]]:
    """Which model sections of A and B to put side by side.

    Two single-section files (the usual fp32 vs fp16 directories, both "rn50")
    pair with each other; otherwise sections with the same key pair up.
    Returns ``(pairs, unmatched)``.
    """
    if len(a) == 1 and len(b) == 1:
        return [(next(iter(a)), next(iter(b)))], []
    pairs = [(k, k) for k in a if k in b]
    unmatched = ["A:" + k for k in a if k not in b] + \
                ["B:" + k for k in b if k not in a]
    return pairs, unmatched


def compare_rows(a_model: ModelResult,
                 b_model: ModelResult) -> List[Dict[str, Any]]:
    """One row per case in either file: medians, speedups and their ratio."""
    case_names = sorted(set(a_model) | set(b_model),
                        key=lambda c: (case_counts(c)[2], case_counts(c)[0]))
    rows: List[Dict[str, Any]] = []
    for case in case_names:
        ea, eb = a_model.get(case, {}), b_model.get(case, {})
        ma, mb = ea.get("median_speed"), eb.get("median_speed")
        nodes, gpus, devices = case_counts(case)
        rows.append({"num_nodes": nodes, "num_gpus_per_node": gpus,
                     "num_devices": devices, "median_speed_a": ma,
                     "speedup_a": ea.get("speedup"), "median_speed_b": mb,
                     "speedup_b": eb.get("speedup"),
                     "ratio_b_over_a": (round(mb / ma, 2) if ma and mb
                                        else None)})
    return rows


def compare_markdown(a: Result, b: Result, label_a: str = "A",
                     label_b: str = "B") -> str:
    """Side-by-side Markdown table(s) of two result dictionaries."""
    pairs, unmatched = pair_models(a, b)
    out = [f"# {label_a} vs {label_b}\n"]
    columns = ("node_num", "gpu_num", f"{label_a} samples/s",
               f"{label_a} speedup", f"{label_b} samples/s",
               f"{label_b} speedup", f"{label_b} / {label_a}")
    for ka, kb in pairs:
        out.append(f"\n## {section_title(ka, a[ka])} vs "
                   f"{section_title(kb, b[kb])}\n\n")
        out.append("| " + " | ".join(columns) + " |\n")
        out.append("| " + " | ".join("-" * len(c) for c in columns) + " |\n")
        for r in compare_rows(a[ka], b[kb]):
            cells = [str(r["num_nodes"]), str(r["num_devices"]),
                     _fmt(r["median_speed_a"]), _fmt(r["speedup_a"]),
                     _fmt(r["median_speed_b"]), _fmt(r["speedup_b"]),
                     _fmt(r["ratio_b_over_a"])]
            out.append("| " + " | ".join(cells) + " |\n")
    if unmatched:
        out.append(f"\nnot compared (only in one file): "
                   f"{', '.join(unmatched)}\n")
    return "".join(out)


def compare_csv(a: Result, b: Result, label_a: str = "A",
                label_b: str = "B") -> str:
    """The comparison as CSV; model_a/model_b carry the labels and sections."""
    rows: List[Dict[str, Any]] = []
    for ka, kb in pair_models(a, b)[0]:
        for r in compare_rows(a[ka], b[kb]):
            r.update(model_a=f"{label_a}:{ka}", model_b=f"{label_b}:{kb}")
            rows.append(r)
    return _csv(rows, COMPARE_CSV_COLUMNS)
