"""The result as one self-contained HTML page: tables, plot, each case's
environment.

The Markdown report is for a repository or a terminal; this page is for
people who open results in a browser or get them attached to a CI run or a
mail. It has to work as a single file, so:

* the plot is embedded as a ``data:image/png;base64`` URI and the style is
  inline; there are no links to anything;
* a Content-Security-Policy ``<meta>`` tag allows only inline style and script
  and ``data:`` images, so anything that tried to load from elsewhere would be
  blocked (and reported in the browser's console), not silently needed;
* every text taken from logs and result files (GPU names, host names,
  warnings, exclusion reasons) is escaped with :func:`html.escape`.

The title and tables say the same as the Markdown (both come from
:mod:`official_bench.extract.subject` and
:func:`official_bench.extract.tables.table_rows` / ``flops_rows``; what they
show: docs/extractor.md), plus a table of images / time over the counted
window and, per case, the environment the first counted run's result JSON
reported and the host names of all its runs. A small inline script marks
``<body data-images-decoded="n/m">`` once the page has loaded, so a headless
browser (tests/unit/extract/test_html_report.py) can check that the embedded
plot really decodes as a picture; it changes nothing visible.
"""

from __future__ import annotations

import base64
import html
from typing import (
    Any,
    Container,
    Dict,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
)

from official_bench.extract import model_flops, subject, tables
from official_bench.extract.cases import OVER_WINDOW_KEY
from official_bench.extract.series import RunSeries

ModelResult = Dict[str, Dict[str, Any]]  # case -> entry of one section

ENV_COLUMNS = ("case", "TensorFlow", "tf_keras", "Python",
               "TF built with CUDA", "cuDNN", "strategy", "workers",
               "replicas", "devices", "GPUs", "CPU", "hosts",
               "CPU kernels")
AVERAGES_COLUMNS = ("node_num", "gpu_num",
                    "samples/s (mean of interval rates)",
                    "images/s over the window (images / time)")
CPU_DEVICES = "devices (CPU)"  # gpu_num's header for a section run on CPUs
_POLICY = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
           "script-src 'unsafe-inline'")
_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; \
max-width: 1200px; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; }
th { background: #eee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.env td { font-size: 0.85em; overflow-wrap: anywhere; max-width: 22em; }
img { max-width: 100%; height: auto; border: 1px solid #ddd; }
.note { color: #555; }
.smoke { color: #a00; font-weight: bold; }
"""
_DECODE_CHECK = """
window.addEventListener("load", function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) {
    if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;
  }
  document.body.setAttribute("data-images-decoded", ok + "/" + imgs.length);
});
"""


def _e(value: Any) -> str:
    """Escape any value for element text and attribute values."""
    return html.escape(str(value), quote=True)


def _table(columns: Sequence[str], rows: Iterable[Sequence[Any]],
           css_class: str, numeric: Container[int] = ()) -> str:
    """An HTML table; cells of the ``numeric`` column indexes right-aligned."""
    out = [f'<table class="{css_class}">', "<thead><tr>"]
    out += [f"<th>{_e(c)}</th>" for c in columns]
    out.append("</tr></thead><tbody>")
    for cells in rows:
        out.append("<tr>" + "".join(
            f'<td class="num">{_e(c)}</td>' if i in numeric else
            f"<td>{_e(c)}</td>" for i, c in enumerate(cells)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _hosts(env: Dict[str, Any], case_series: List[RunSeries]) -> str:
    """Host names of the case's counted runs; the first run's as a fallback."""
    names = sorted({str(r.hostname) for r in case_series if r.hostname})
    if not names and env.get("hostname"):
        names = [str(env["hostname"])]  # another tool's record: any type
    return ", ".join(names) or "n/a"


def _or_na(value: Any) -> str:
    """Table text of an environment value: lists joined, missing as n/a."""
    if value is None or value == "" or value == []:
        return "n/a"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def cpu_kernels_cell(env: Dict[str, Any]) -> str:
    """What TensorFlow reported (environment.onednn_enabled), what the
    config asked for (runtime.cpu_kernels) and the trainer's note
    (cpu_kernels_note), as the summary line says it: e.g. "oneDNN (auto)",
    "oneDNN (auto; bf16 ops on Eigen: no AVX-512)"."""
    enabled = env.get("onednn_enabled")
    if enabled is None:
        return "n/a"
    name = "oneDNN" if enabled else "Eigen"
    said = "; ".join(str(env[k]) for k in ("cpu_kernels", "cpu_kernels_note")
                     if env.get(k))
    return f"{name} ({said})" if said else name


def environment_rows(model_result: ModelResult,
                     model_series: Optional[Dict[str, List[RunSeries]]] = None
                     ) -> List[List[str]]:
    """One row per case (ENV_COLUMNS order) from its entry's
    ``environment``."""
    rows: List[List[str]] = []
    for case, e in tables.sorted_cases(model_result):
        env = e.get("environment") or {}
        gpus = env.get("gpu_names") or []
        rows.append([case] + [_or_na(env.get(k)) for k in (
            "tensorflow", "tf_keras", "python", "cuda_version",
            "cudnn_version", "strategy", "num_workers", "num_replicas",
            "devices")] + [
            tables.gpu_summary(gpus) if gpus else "n/a",
            _or_na(env.get("cpu_model")),
            _hosts(env, (model_series or {}).get(case) or []),
            cpu_kernels_cell(env)])
    return rows


def _on_cpu(model_result: ModelResult) -> bool:
    """True when every case of a section says it ran on CPUs."""
    return all((e.get(subject.KEY) or {}).get("device_kind") == "cpu"
               for e in model_result.values())


def _columns(columns: Sequence[str], model_result: ModelResult
             ) -> List[str]:
    """Table headers with gpu_num named devices (CPU) for a CPU section."""
    cpu = _on_cpu(model_result)
    return [CPU_DEVICES if cpu and c == "gpu_num" else c for c in columns]


def averages_rows(model_result: ModelResult) -> List[List[str]]:
    """Per case: DLPerf's samples/s (median over runs of the mean of the
    interval rates) beside images / time over the counted window (median
    over runs), AVERAGES_COLUMNS order."""
    rows = []
    for case, e in tables.sorted_cases(model_result):
        nodes, _, devices = tables.case_counts(case)
        rows.append([str(nodes), str(devices), _rate(e.get("median_speed")),
                     _rate(e.get(OVER_WINDOW_KEY))])
    return rows


def _rate(value: Optional[float]) -> str:
    """A samples/s figure as the tables print it: 2 decimals, or n/a."""
    return "n/a" if value is None else f"{value:.2f}"


# samples/s's header and note under --method time (DLPerf's time script)
_TIME_HEADER = "samples/s (images / clock time)"
_TIME_NOTE = ("samples/s: DLPerf's time method, images over the clock time "
              "between the log lines around the counted intervals (median "
              "over runs); images/s over the window: images trained / the "
              "intervals' own seconds (median over runs).")
_MEAN_NOTE = ("samples/s: DLPerf's, the arithmetic mean of the counted "
              "intervals' rates (median over runs); images/s over the "
              "window: images trained / seconds over the same intervals "
              "(median over runs), never larger for equal intervals.")


def _averages(model_result: ModelResult) -> str:
    """The two averages' table, '' when no case has images / time; its
    samples/s header says which of DLPerf's methods made the number."""
    if not any(e.get(OVER_WINDOW_KEY) is not None
               for e in model_result.values()):
        return ""
    time = any(e.get("method") == "time" for e in model_result.values())
    columns = list(AVERAGES_COLUMNS)
    if time:
        columns[2] = _TIME_HEADER
    return ("<h3>Two averages</h3>"
            + _table(_columns(columns, model_result),
                     averages_rows(model_result), "averages",
                     numeric=range(len(columns)))
            + f'<p class="note">{_e(_TIME_NOTE if time else _MEAN_NOTE)}</p>')


def _flops(model_result: ModelResult) -> str:
    """The model-FLOPs table (when result JSONs carried flops), else ''."""
    if not model_flops.has_flops(model_result):
        return ""
    return ("<h3>Model FLOPs utilisation</h3>"
            + _table(_columns(tables.FLOPS_COLUMNS, model_result),
                     tables.flops_rows(model_result), "flops",
                     numeric=range(len(tables.FLOPS_COLUMNS) - 1))
            + f'<p class="note">{_e(tables.FLOPS_NOTE)}</p>')


def _section(model_key: str, model_result: ModelResult,
             model_series: Optional[Dict[str, List[RunSeries]]]) -> str:
    """Heading, numbers table, notes and environment table of one model."""
    heading = _e(tables.section_title(model_key, model_result))
    out = [f"<section><h2>{heading}</h2>",
           _table(_columns(tables.MARKDOWN_COLUMNS, model_result),
                  tables.table_rows(model_result),
                  "result", numeric=range(len(tables.MARKDOWN_COLUMNS)))]
    lines = tables.notes(model_result)
    if lines:
        items = "".join(f"<li>{_e(n)}</li>" for n in lines)
        out.append(f'<ul class="note">{items}</ul>')
    out.append(_averages(model_result))
    out.append(_flops(model_result))
    out.append("<h3>Environment</h3>")
    out.append(_table(ENV_COLUMNS,
                      environment_rows(model_result, model_series), "env"))
    out.append('<p class="note">From the result JSON the trainer wrote next '
               "to each log; n/a where there was none.</p></section>")
    return "".join(out)


def _figure(png: bytes, alt: str) -> str:
    """An embedded PNG as a data: URI with its caption."""
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img alt="{_e(alt)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_e(alt)}</figcaption></figure>")


def _bandwidth_section(table: Dict[str, List[Dict[str, Any]]]) -> str:
    """The all-reduce bandwidth table (BENCH=allreduce results)."""
    from official_bench.extract import allreduce_logs
    columns = allreduce_logs.COLUMNS
    return ("<section><h2>All-reduce bandwidth</h2>"
            + _table(columns, allreduce_logs.table_rows(table), "bandwidth",
                     numeric=range(3, len(columns)))
            + '<p class="note">time: median over the case\'s runs of one '
            "all-reduce; algbw = bytes / time; busbw = algbw x 2(n-1)/n "
            "(nccl-tests); (model): the model's gradient</p></section>")


def page_title(result: Dict[str, ModelResult], name: Optional[str]) -> str:
    """"Throughput of <what was measured>: <name>" (subject.headline)."""
    return (f"Throughput of {subject.headline(result)}"
            + (": " + name if name else ""))


def html_report(result: Dict[str, ModelResult], name: Optional[str] = None,
                images: Iterable[Tuple[bytes, str]] = (),
                plot_note: Optional[str] = None,
                series: Optional[Dict[str, Dict[str, List[RunSeries]]]] = None,
                bandwidth: Optional[Dict[str, List[Dict[str, Any]]]] = None
                ) -> str:
    """The whole page as text.

    ``images``: ``[(png_bytes, caption)]`` to embed; ``plot_note``: shown
    instead when there is no plot (say why); ``series``:
    :func:`official_bench.extract.series.collect`'s output, for the hosts;
    ``bandwidth``: :func:`official_bench.extract.allreduce_logs.collect`'s
    table, shown as its own section.
    """
    title = page_title(result, name)
    out = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
           '<meta http-equiv="Content-Security-Policy" '
           f'content="{_e(_POLICY)}">',
           f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>{_e(title)}</h1>"]
    out += [f'<p class="{"smoke" if line == subject.SMOKE_TEXT else "note"}">'
            f"{_e(line)}</p>" for line in subject.details(result)]
    out += [_figure(png, caption) for png, caption in images]
    if plot_note:
        out.append(f'<p class="note">{_e(plot_note)}</p>')
    for model_key, model_result in result.items():
        out.append(_section(model_key, model_result,
                            (series or {}).get(model_key)))
    if bandwidth:
        out.append(_bandwidth_section(bandwidth))
    out.append(f"<script>{_DECODE_CHECK}</script></body></html>\n")
    return "\n".join(out)
