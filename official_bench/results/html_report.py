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
:func:`official_bench.results.report.table_rows`) and its notes. The
environment table shows, per case, what the result JSON next to the first
counted log reported; the hosts column lists the host names of all counted
runs of the case that had a result JSON.

A small inline script marks ``<body data-images-decoded="n/m">`` once the
page has loaded: n of the m images decoded. It changes nothing visible; it
lets a headless browser (tests/test_extract_html.py) check that the embedded
plot really is a picture, not only that an ``<img>`` element exists.
"""

import base64
import html

from official_bench.results import report

ENV_COLUMNS = ("case", "TensorFlow", "tf_keras", "Python", "CUDA", "cuDNN",
               "strategy", "workers", "replicas", "devices", "GPUs", "hosts")
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


def _e(value):
    """Escape any value for element text and attribute values."""
    return html.escape(str(value), quote=True)


def _table(columns, rows, css_class, numeric=()):
    """An HTML table; cells of the ``numeric`` column indexes right-aligned."""
    out = ['<table class="%s">' % css_class, "<thead><tr>"]
    out += ["<th>%s</th>" % _e(c) for c in columns]
    out.append("</tr></thead><tbody>")
    for cells in rows:
        out.append("<tr>" + "".join(
            '<td class="num">%s</td>' % _e(c) if i in numeric else
            "<td>%s</td>" % _e(c) for i, c in enumerate(cells)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _hosts(env, case_series):
    """Host names of the case's counted runs; the first run's as a fallback."""
    names = sorted({r.hostname for r in case_series if r.hostname})
    if not names and env.get("hostname"):
        names = [env["hostname"]]
    return ", ".join(names) or "n/a"


def _or_na(value):
    """Table text of an environment value: lists joined, missing as n/a."""
    if value is None or value == "" or value == []:
        return "n/a"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def environment_rows(model_result, model_series=None):
    """One row per case (ENV_COLUMNS order) from its entry's ``environment``."""
    rows = []
    for case, e in report.sorted_cases(model_result):
        env = e.get("environment") or {}
        gpus = env.get("gpu_names") or []
        rows.append([case] + [_or_na(env.get(k)) for k in (
            "tensorflow", "tf_keras", "python", "cuda_version", "cudnn_version",
            "strategy", "num_workers", "num_replicas", "devices")] + [
            report.gpu_summary(gpus) if gpus else "n/a",
            _hosts(env, (model_series or {}).get(case) or [])])
    return rows


def _section(model_key, model_result, model_series):
    """Heading, numbers table, notes and environment table of one model."""
    out = ["<section><h2>%s</h2>" % _e(report.section_title(model_key, model_result)),
           _table(report.MARKDOWN_COLUMNS, report.table_rows(model_result),
                  "result", numeric=range(len(report.MARKDOWN_COLUMNS)))]
    lines = report.notes(model_result)
    if lines:
        out.append('<ul class="note">%s</ul>'
                   % "".join("<li>%s</li>" % _e(n) for n in lines))
    out.append("<h3>Environment</h3>")
    out.append(_table(ENV_COLUMNS, environment_rows(model_result, model_series),
                      "env"))
    out.append('<p class="note">From the result JSON the trainer wrote next to '
               "each log; n/a where there was none.</p></section>")
    return "".join(out)


def _figure(png, alt):
    """An embedded PNG as a data: URI with its caption."""
    data = base64.b64encode(png).decode("ascii")
    return ('<figure><img alt="%s" src="data:image/png;base64,%s">'
            "<figcaption>%s</figcaption></figure>" % (_e(alt), data, _e(alt)))


def _bandwidth_section(table):
    """The all-reduce bandwidth table (BENCH=allreduce results)."""
    from official_bench.results import allreduce_logs
    columns = allreduce_logs.COLUMNS
    return ("<section><h2>All-reduce bandwidth</h2>"
            + _table(columns, allreduce_logs.table_rows(table), "bandwidth",
                     numeric=range(3, len(columns)))
            + '<p class="note">time: median over the case\'s runs of one '
            "all-reduce; algbw = bytes / time; busbw = algbw x 2(n-1)/n "
            "(nccl-tests); (model): the model's gradient</p></section>")


def html_report(result, name=None, images=(), plot_note=None, series=None,
                bandwidth=None):
    """The whole page as text.

    ``images``: ``[(png_bytes, caption)]`` to embed; ``plot_note``: shown
    instead when there is no plot (say why); ``series``:
    :func:`official_bench.results.runseries.collect`'s output, for the hosts;
    ``bandwidth``: :func:`official_bench.results.allreduce_logs.collect`'s
    table, shown as its own section.
    """
    title = "ResNet-50 v1.5 throughput" + (": " + name if name else "")
    out = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
           '<meta http-equiv="Content-Security-Policy" content="%s">' % _e(_POLICY),
           "<title>%s</title><style>%s</style></head><body>" % (_e(title), _STYLE),
           "<h1>%s</h1>" % _e(title)]
    out += [_figure(png, caption) for png, caption in images]
    if plot_note:
        out.append('<p class="note">%s</p>' % _e(plot_note))
    for model_key, model_result in result.items():
        out.append(_section(model_key, model_result,
                            (series or {}).get(model_key)))
    if bandwidth:
        out.append(_bandwidth_section(bandwidth))
    out.append("<script>%s</script></body></html>\n" % _DECODE_CHECK)
    return "\n".join(out)
