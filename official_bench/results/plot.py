"""PNG plot of a result: throughput and speedup against device count.

matplotlib is an optional extra (``pip install official_bench[plot]``); it is
imported only when a plot is made, and through its object-oriented API with
the Agg canvas, so plotting neither needs a display nor changes the pyplot
backend of a notebook that imports this module.

Left panel: median samples/s per case (error bars from min to max over runs)
and the ideal line ``baseline per-device speed x devices``. Right panel:
speedup and the ideal ``devices / baseline devices``. One line per model
section (dtype, batch size).
"""

import importlib.util

from official_bench.results import atomic
from official_bench.results import report
from official_bench.results.errors import ExtractError


def matplotlib_available():
    """True when matplotlib can be imported (without importing it)."""
    return importlib.util.find_spec("matplotlib") is not None


def _series(model_result):
    """Per-case points of one model section, cases without a median skipped."""
    points = []
    for case, e in report.sorted_cases(model_result):
        if e.get("median_speed") is None:
            continue
        devices = report.case_counts(case)[2]
        points.append((devices, e["median_speed"], e.get("min"), e.get("max"),
                       e.get("speedup")))
    return points


def _baseline(model_result):
    """(devices, median) of the speedup baseline case, or None."""
    for case, e in model_result.items():
        if case == e.get("speedup_baseline", "1n1g") and e.get("median_speed"):
            return report.case_counts(case)[2], e["median_speed"]
    return None


def _draw(ax_speed, ax_speedup, label, model_result):
    """Draw one model section into both panels."""
    points = _series(model_result)
    if not points:
        return
    devices = [p[0] for p in points]
    medians = [p[1] for p in points]
    low = [m - (p[2] if p[2] is not None else m) for m, p in zip(medians, points)]
    high = [(p[3] if p[3] is not None else m) - m for m, p in zip(medians, points)]
    line = ax_speed.errorbar(devices, medians, yerr=[low, high], marker="o",
                             capsize=3, label=label)[0]
    base = _baseline(model_result)
    if base:
        base_devices, base_median = base
        ax_speed.plot(devices, [base_median / base_devices * d for d in devices],
                      linestyle="--", color=line.get_color(), alpha=0.6,
                      label="%s ideal" % label)
        ax_speedup.plot(devices, [d / base_devices for d in devices],
                        linestyle="--", color=line.get_color(), alpha=0.6,
                        label="%s ideal" % label)
    speedups = [(p[0], p[4]) for p in points if p[4] is not None]
    if speedups:
        ax_speedup.plot([s[0] for s in speedups], [s[1] for s in speedups],
                        marker="o", color=line.get_color(), label=label)


def plot_png(result, path, title=None):
    """Write the plot of ``result`` to ``path`` (PNG, atomically).

    Raises ExtractError when matplotlib is not installed.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ExtractError("--plot needs matplotlib (%s); install it with "
                           "'pip install matplotlib' or the [plot] extra" % e)
    fig = Figure(figsize=(11, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax_speed, ax_speedup = fig.subplots(1, 2)
    all_devices = set()
    for model_key, model_result in result.items():
        _draw(ax_speed, ax_speedup, report.section_title(model_key, model_result),
              model_result)
        all_devices.update(d for d, *_ in _series(model_result))
    for ax, ylabel in ((ax_speed, "samples/s (median over runs)"),
                       (ax_speedup, "speedup")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(all_devices))
        ax.set_xticklabels([str(d) for d in sorted(all_devices)])
        ax.set_xlabel("devices")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("ResNet-50 v1.5 scaling" + (": " + title if title else ""))
    fig.tight_layout()
    with atomic.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
