"""The records-on-JAX check's numbers from its runs' result files: real and
synthetic img/s side by side, real/synthetic, input wait, host CPU use,
the decoder, its workers and their img/s per core, and what the host's
cores could decode against what the GPU trains.

    python3 scripts/records_summary.py OUT_DIR

Reads OUT_DIR/logs_<case>/**/rn50_b*_<dtype>_<i>.json (the run scripts'
copies of each run's result.json), OUT_DIR/result_<case>/*_result.json (the
extractor's tables of the same runs) and OUT_DIR/cpu_<case>_<dtype>
(/proc/stat's cpu line before and after each case), where <case> is
synthetic, real, or real_<label> for each real case of a sweep (real_w8,
real_w15_mps, real_gpu_trainer_w15, real_gpu_trainer_s50_w15:
gpu_records_check.sh's WORKERS, MPS and DECODES; a row each, its decode
and gpu_trainer's worker_decode_share from its result.json, against
the one synthetic case, its workers from its result.json); writes
OUT_DIR/records_summary.json and .md and prints the table.
The img/s columns are the extractor's 1n1g medians (DLPerf's number, the
one BENCHMARKS.md quotes) where it wrote them, else the median of the
runs' own images/time over their window; `*_img_s_from` says which.
"""

from __future__ import annotations

import glob
import json
import os
import re
import statistics
import sys

RUN_JSON = re.compile(r"rn50_b(\d+)_(fp32|fp16|bf16)_(\d+)\.json$")


def runs(root: str):
    """{dtype: [result dict, ...]} of the runs under `root`."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "**", "*.json"),
                                 recursive=True)):
        m = RUN_JSON.search(os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            out.setdefault(m.group(2), []).append(json.load(f))
    return out


def rate(result) -> float:
    stats = result.get("stats") or {}
    return stats.get("images_per_second_over_window") or \
        stats.get("average_examples_per_second") or 0.0


def extractor_medians(root: str):
    """{dtype: median img/s} of the 1n1g cases in the extractor's
    *_result.json files under `root`."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "*_result.json"))):
        try:
            with open(path) as f:
                tables = json.load(f)
        except (OSError, ValueError):
            continue
        for cases in tables.values():
            entry = cases.get("1n1g") if isinstance(cases, dict) else None
            if entry and entry.get("median_speed_unrounded"):
                out[entry["dtype"]] = entry["median_speed_unrounded"]
    return out


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def busy_cores(path: str):
    """Mean busy cores of the host between the two /proc/stat lines."""
    try:
        with open(path) as f:
            lines = [[int(x) for x in line.split()[1:]]
                     for line in f if line.startswith("cpu ")]
        with open(path + ".cores") as f:
            cores = int(f.read().strip())
    except (OSError, ValueError):
        return None
    if len(lines) != 2:
        return None
    delta = [b - a for a, b in zip(*lines)]
    idle = delta[3] + (delta[4] if len(delta) > 4 else 0)
    total = sum(delta[:8])
    return cores * (total - idle) / total if total else None


def _rate(results, extracted, dtype):
    """(img/s, where it came from) for one side of a precision."""
    if dtype in extracted:
        return extracted[dtype], "extractor"
    value = median([rate(x) for x in results])
    return value, "result.json" if value is not None else None


def real_cases(out: str):
    """The real cases' names (real, real_w8, real_w15_mps: their logs_
    folders), by worker count, MPS after."""
    names = [os.path.basename(p)[len("logs_"):] for p in glob.glob(
        os.path.join(out, "logs_real*")) if os.path.isdir(p)]

    def order(name):
        m = re.search(r"_w(\d+)", name)
        return (int(m.group(1)) if m else 0, name.endswith("_mps"), name)
    return sorted(names, key=order)


# gpu_records_check.sh's DECODES (cpu_window before cpu: the longer name
# first, as names are matched by their start)
DECODES = ("gpu_trainer", "gpu", "cpu_window", "cpu")


def label(name: str) -> str:
    """A real case's label in the table: 'w15 mps' for real_w15_mps,
    'gpu_trainer w15' for real_gpu_trainer_w15, 'gpu_trainer s50 w15' for
    real_gpu_trainer_s50_w15 (worker_decode_share 0.5)."""
    if "_" not in name:
        return "-"
    rest = name[len("real_"):]
    decode = next((d for d in DECODES
                   if rest == d or rest.startswith(d + "_")), None)
    if decode:
        rest = rest[len(decode) + 1:]
    return " ".join(filter(None, [decode] + rest.split("_")))


def case(out: str, dtype: str, real, synthetic, extracted=None,
         name: str = "real"):
    """One precision's row for the real case `name`; `extracted`:
    {case name or "synthetic": the extractor's medians}."""
    extracted = extracted or {}
    r_rate, r_from = _rate(real, extracted.get(name, {}), dtype)
    s_rate, s_from = _rate(synthetic, extracted.get("synthetic", {}), dtype)
    feed = next((x.get("input") for x in real if x.get("input")), {}) or {}
    per_core = median([(x.get("input") or {}).get(
        "decode_images_per_cpu_second") for x in real])
    workers = feed.get("num_workers")
    wait = median([(x.get("input_wait") or {}).get("fraction")
                   for x in real])
    row = {
        "dtype": dtype, "case": label(name), "mps": name.endswith("_mps"),
        "runs": len(real),
        "real_img_s": r_rate, "synthetic_img_s": s_rate,
        "real_img_s_from": r_from, "synthetic_img_s_from": s_from,
        "real_over_synthetic": (r_rate / s_rate) if r_rate and s_rate
        else None,
        "input_wait_fraction": wait,
        "host_busy_cores_real": busy_cores(
            os.path.join(out, f"cpu_{name}_{dtype}")),
        "host_busy_cores_synthetic": busy_cores(
            os.path.join(out, f"cpu_synthetic_{dtype}")),
        "decode": feed.get("decode"),
        "worker_decode_share": feed.get("worker_decode_share"),
        "decoder": feed.get("decoder"), "workers": workers,
        "decode_img_s_per_core": per_core,
    }
    if per_core and workers and s_rate:
        # What the workers' cores could decode, against the GPU's rate.
        row["cores_x_per_core_over_synthetic"] = \
            workers * per_core / s_rate
    return row


def _fmt(v, spec="{:,.0f}"):
    return "-" if v is None else spec.format(v)


def _decode(row) -> str:
    """The decode column: gpu_trainer's share of the workers with it."""
    share = row.get("worker_decode_share")
    return (row.get("decode") or "-") + (f" (workers {share:g})" if share
                                         else "")


def table(rows) -> str:
    head = ("| precision | real case | real img/s | synthetic img/s | "
            "real/synthetic | "
            "input wait | host busy cores, real (whole case, start-up "
            "too) | decode | decoder | workers | decode img per worker "
            "CPU-s | workers x per-worker rate / synthetic |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r['dtype']} | {r.get('case') or '-'} | "
            f"{_fmt(r['real_img_s'])} | "
            f"{_fmt(r['synthetic_img_s'])} | "
            f"{_fmt(r['real_over_synthetic'], '{:.3f}')} | "
            f"{_fmt(r['input_wait_fraction'], '{:.1%}')} | "
            f"{_fmt(r['host_busy_cores_real'], '{:.1f}')} | "
            f"{_decode(r)} | {r['decoder'] or '-'} | "
            f"{_fmt(r['workers'], '{}')} | "
            f"{_fmt(r['decode_img_s_per_core'], '{:.0f}')} | "
            f"{_fmt(r.get('cores_x_per_core_over_synthetic'), '{:.2f}')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out = argv[0]
    names = real_cases(out)
    real = {n: runs(os.path.join(out, f"logs_{n}")) for n in names}
    synthetic = runs(os.path.join(out, "logs_synthetic"))
    extracted = {n: extractor_medians(os.path.join(out, f"result_{n}"))
                 for n in names + ["synthetic"]}
    rows = []
    for d in ("bf16", "fp16", "fp32"):
        cases = [n for n in names if d in real[n]] or (
            ["real"] if d in synthetic else [])
        rows += [case(out, d, real.get(n, {}).get(d, []),
                      synthetic.get(d, []), extracted, n) for n in cases]
    text = table(rows)
    with open(os.path.join(out, "records_summary.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(out, "records_summary.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
