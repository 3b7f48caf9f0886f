"""The result as one self-contained HTML page: tables, plot, each case's environment.

The Markdown report is for a repository or a terminal; this page is for
people who open results in a browser or get them attached to a CI run or a
mail. It has to work as a single file, so:

* the plot is embedded as a ``data:image/png;base64`` URI and the style is
  inline; there are no links to anything;
* a Content-Security-Policy ``<meta>`` tag allows only inline style and script
  and ``data:`` images, so if anything ever tried to load from elsewhere the
  browser would block it (and say so in its console) instead of showing a page
  that depends on a network;
* every text taken from logs and result files (GPU names, host names,
  warnings, exclusion reasons) is escaped with :func:`html.escape`.

The tables hold the Markdown's numbers (both come from
:func:`official_bench.extract.tables.table_rows`) and its notes. The
environment table shows, per case, what the result JSON next to the first
counted log reported; the hosts column lists the host names of all counted
runs of the case that had a result JSON.

A small inline script marks ``<body data-images-decoded="n/m">`` once the
page has loaded: n of the m images decoded. It changes nothing visible; it
lets a headless browser (tests/unit/extract/test_html_report.py) check that the embedded
plot really is a picture, not only that an ``<img>`` element exists.
"""

from __future__ import annotations

import base64
import html
from typing import Any, Container, Dict, Iterable, List, Optional, Sequence, Tuple

from official_bench.extract import tables as report
from official_bench.extract.series import RunSeries

ModelResult = Dict[str, Dict[str, Any]]  # case -> entry of one section

ENV_COLUMNS = ("case", "TensorFlow", "tf_keras", "Python", "CUDA", "cuDNN",
               "strategy", "workers", "replicas", "devices", "GPUs", "hosts",
               "CPU kernels")
_POLICY = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
           "script-src 'unsafe-inline'")
_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; }
th { background: #eee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.env td { font-size: 0.85em; overflow-wrap: anywhere; max-width: 22em; }
img { max-width: 100%; height: auto; border: 1px solid #ddd; }
.note { color: #555; }
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
    names = sorted({r.hostname for r in case_series if r.hostname})
    if not names and env.get("hostname"):
        names = [env["hostname"]]
    return ", ".join(names) or "n/a"


def _or_na(value: Any) -> str:
    """Table text of an environment value: lists joined, missing as n/a."""
    if value is None or value == "" or value == []:
        return "n/a"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def cpu_kernels_cell(env: Dict[str, Any]) -> str:
    """What TensorFlow reported (environment.onednn_enabled) and what the
    config asked for (runtime.cpu_kernels), e.g. "oneDNN (auto)"."""
    enabled = env.get("onednn_enabled")
    if enabled is None:
        return "n/a"
    name = "oneDNN" if enabled else "Eigen"
    return f"{name} ({env['cpu_kernels']})" if env.get("cpu_kernels") \
        else name


def environment_rows(model_result: ModelResult,
                     model_series: Optional[Dict[str, List[RunSeries]]] = None
                     ) -> List[List[str]]:
    """One row per case (ENV_COLUMNS order) from its entry's ``environment``."""
    rows: List[List[str]] = []
    for case, e in report.sorted_cases(model_result):
        env = e.get("environment") or {}
        gpus = env.get("gpu_names") or []
        rows.append([case] + [_or_na(env.get(k)) for k in (
            "tensorflow", "tf_keras", "python", "cuda_version", "cudnn_version",
            "strategy", "num_workers", "num_replicas", "devices")] + [
            report.gpu_summary(gpus) if gpus else "n/a",
            _hosts(env, (model_series or {}).get(case) or []),
            cpu_kernels_cell(env)])
    return rows


def _section(model_key: str, model_result: ModelResult,
             model_series: Optional[Dict[str, List[RunSeries]]]) -> str:
    """Heading, numbers table, notes and environment table of one model."""
    heading = _e(report.section_title(model_key, model_result))
    out = [f"<section><h2>{heading}</h2>",
           _table(report.MARKDOWN_COLUMNS, report.table_rows(model_result),
                  "result", numeric=range(len(report.MARKDOWN_COLUMNS)))]
    lines = report.notes(model_result)
    if lines:
        items = "".join(f"<li>{_e(n)}</li>" for n in lines)
        out.append(f'<ul class="note">{items}</ul>')
    out.append("<h3>Environment</h3>")
    out.append(_table(ENV_COLUMNS, environment_rows(model_result, model_series),
                      "env"))
    out.append('<p class="note">From the result JSON the trainer wrote next to '
               "each log; n/a where there was none.</p></section>")
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
    title = "ResNet-50 v1.5 throughput" + (": " + name if name else "")
    out = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
           f'<meta http-equiv="Content-Security-Policy" content="{_e(_POLICY)}">',
           f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>{_e(title)}</h1>"]
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
