"""PNG plot of a result: scaling against device count, and throughput over steps.

matplotlib is an optional extra (``pip install official_bench[plot]``); it is
imported only when a plot is made, and through its object-oriented API with
the Agg canvas, so plotting neither needs a display nor changes the pyplot
backend of a notebook that imports this module.

Top left: median samples/s per case (error bars from min to max over runs)
and the ideal line ``baseline per-device speed x devices``. Top right: speedup
and the ideal ``devices / baseline devices``. One line per model section
(dtype, batch size).

Bottom (when per-run series are given, see
:mod:`official_bench.extract.series`): examples/second of every interval
against its end step, one colour per case, the median run drawn solid and the
other runs faint, with the counted window ``[warmup_batches, train_batches]``
shaded, so warm-up, jitter and disagreeing runs are visible.

Model bounds (hook): a case entry may carry ``speedup_bounds`` =
``{"lower": x, "upper": y}``, the speedup a scaling model predicts at worst and
at best; where present they are drawn as a band in the speedup panel. The
extractor's scaling model (:mod:`official_bench.extract.scaling`) sets them
from the 1n1g compute time and the measured all-reduce time; nothing here
invents them: without the key no band is drawn.
"""

from __future__ import annotations

import importlib.util
import io
from typing import Any, Dict, Iterable, List, Optional, Tuple

from official_bench.host import atomic
from official_bench.extract import tables as report
from official_bench.extract.errors import ExtractError
from official_bench.extract.series import RunSeries

ModelResult = Dict[str, Dict[str, Any]]  # case -> entry of one section
Series = Dict[str, Dict[str, List[RunSeries]]]  # runseries.collect()

BOUNDS_KEY = "speedup_bounds"
_SIZE_SCALING = (11, 4.5)  # inches at _DPI
_SIZE_WITH_SERIES = (11, 8.5)
_DPI = 100


def matplotlib_available() -> bool:
    """True when matplotlib can be imported (without importing it)."""
    return importlib.util.find_spec("matplotlib") is not None


def _series(model_result: ModelResult) -> List[Tuple[int, float, Any, Any,
                                                    Any]]:
    """Per-case points of one model section, cases without a median skipped."""
    points: List[Tuple[int, float, Any, Any, Any]] = []
    for case, e in report.sorted_cases(model_result):
        if e.get("median_speed") is None:
            continue
        devices = report.case_counts(case)[2]
        points.append((devices, e["median_speed"], e.get("min"), e.get("max"),
                       e.get("speedup")))
    return points


def _baseline(model_result: ModelResult) -> Optional[Tuple[int, float]]:
    """(devices, median) of the speedup baseline case, or None."""
    for case, e in model_result.items():
        if case == e.get("speedup_baseline", "1n1g") and e.get("median_speed"):
            return report.case_counts(case)[2], e["median_speed"]
    return None


def speedup_bounds(model_result: ModelResult
                   ) -> List[Tuple[int, float, float]]:
    """``[(devices, lower, upper)]`` of the cases carrying model bounds.

    Entries without :data:`BOUNDS_KEY`, or with a lower or upper bound that is
    not a number, are left out: a band is drawn only where a model said so.
    """
    points: List[Tuple[int, float, float]] = []
    for case, e in report.sorted_cases(model_result):
        bounds = e.get(BOUNDS_KEY)
        if not isinstance(bounds, dict):
            continue
        lower, upper = bounds.get("lower"), bounds.get("upper")
        if all(isinstance(v, (int, float)) and not isinstance(v, bool)
               for v in (lower, upper)):
            points.append((report.case_counts(case)[2], lower, upper))
    return points


def _draw(ax_speed: Any, ax_speedup: Any, label: str,
          model_result: ModelResult) -> None:
    """Draw one model section into both scaling panels."""
    points = _series(model_result)
    if not points:
        return
    devices = [p[0] for p in points]
    medians = [p[1] for p in points]
    low = [m - (p[2] if p[2] is not None else m) for m, p in zip(medians, points)]
    high = [(p[3] if p[3] is not None else m) - m for m, p in zip(medians, points)]
    line = ax_speed.errorbar(devices, medians, yerr=[low, high], marker="o",
                             capsize=3, label=label)[0]
    color = line.get_color()
    base = _baseline(model_result)
    if base:
        base_devices, base_median = base
        ax_speed.plot(devices, [base_median / base_devices * d for d in devices],
                      linestyle="--", color=color, alpha=0.6,
                      label=f"{label} ideal")
        ax_speedup.plot(devices, [d / base_devices for d in devices],
                        linestyle="--", color=color, alpha=0.6,
                        label=f"{label} ideal")
    speedups = [(p[0], p[4]) for p in points if p[4] is not None]
    if speedups:
        ax_speedup.plot([s[0] for s in speedups], [s[1] for s in speedups],
                        marker="o", color=color, label=label)
    bounds = speedup_bounds(model_result)
    if bounds:
        ax_speedup.fill_between([b[0] for b in bounds], [b[1] for b in bounds],
                                [b[2] for b in bounds], color=color, alpha=0.15,
                                label=f"{label} model bounds")


def _counted_window(result: Dict[str, ModelResult]
                    ) -> Optional[Tuple[Any, Any]]:
    """(warmup_batches, train_batches) of the result, None if not recorded."""
    for model_result in result.values():
        for e in model_result.values():
            if e.get("warmup_batches") is not None and e.get("train_batches"):
                return e["warmup_batches"], e["train_batches"]
    return None


def _draw_intervals(ax: Any, result: Dict[str, ModelResult],
                    series: Series) -> None:
    """Bottom panel: examples/second per interval against end step."""
    several = len(series) > 1
    for model_key in result:
        by_case = series.get(model_key) or {}
        for case, _ in report.sorted_cases(result[model_key]):
            runs = by_case.get(case) or []
            label = f"{model_key} {case}" if several else case
            color = None
            for run in sorted(runs, key=lambda r: not r.median):
                if not run.end_steps:
                    continue
                drawn = ax.plot(run.end_steps, run.examples_per_second,
                                color=color, linewidth=1.6 if run.median else 0.8,
                                alpha=1.0 if run.median else 0.35,
                                marker="." if run.median else None,
                                label=(f"{label} (median run {run.index})"
                                       if run.median else None))[0]
                color = drawn.get_color()
    window = _counted_window(result)
    if window:
        ax.axvspan(window[0], window[1], color="0.5", alpha=0.08,
                   label=f"counted steps {int(window[0])}-{int(window[1])}")
    ax.set_xlabel("step (end of interval)")
    ax.set_ylabel("examples/s (all devices)")
    ax.set_title("throughput per interval (faint: other runs of the case)",
                 fontsize="medium")
    ax.grid(True, alpha=0.3)
    # Outside the axes: with several cases a legend inside hides their lines.
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _style_scaling(axes: Iterable[Any], devices: Iterable[int]) -> None:
    """Log-2 device axis with the cases' device counts as ticks."""
    for ax, ylabel in zip(axes, ("samples/s (median over runs)", "speedup")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(devices))
        ax.set_xticklabels([str(d) for d in sorted(devices)])
        ax.set_xlabel("devices")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")


def png_bytes(result: Dict[str, ModelResult], title: Optional[str] = None,
              series: Optional[Series] = None) -> bytes:
    """The plot of ``result`` as PNG bytes (the bottom panel needs ``series``).

    ``series`` is :func:`official_bench.extract.series.collect`'s output;
    without it (a result JSON read back, DLPerf's files) only the scaling
    panels are drawn. Raises ExtractError when matplotlib is not installed.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ExtractError(f"--plot needs matplotlib ({e}); install it with "
                           "'pip install matplotlib' or the [plot] extra")
    fig = Figure(figsize=_SIZE_WITH_SERIES if series else _SIZE_SCALING,
                 dpi=_DPI)
    FigureCanvasAgg(fig)
    if series:
        grid = fig.add_gridspec(2, 2)
        ax_speed, ax_speedup = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
        _draw_intervals(fig.add_subplot(grid[1, :]), result, series)
    else:
        ax_speed, ax_speedup = fig.subplots(1, 2)
    all_devices: set = set()
    for model_key, model_result in result.items():
        _draw(ax_speed, ax_speedup, report.section_title(model_key, model_result),
              model_result)
        all_devices.update(d for d, *_ in _series(model_result))
    _style_scaling((ax_speed, ax_speedup), all_devices)
    fig.suptitle("ResNet-50 v1.5 scaling" + (": " + title if title else ""))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def plot_png(result: Dict[str, ModelResult], path: str,
             title: Optional[str] = None,
             series: Optional[Series] = None) -> bytes:
    """Write the plot of ``result`` to ``path`` atomically; returns the bytes.

    Raises ExtractError when matplotlib is not installed.
    """
    data = png_bytes(result, title, series)
    atomic.write_bytes_atomic(path, data)
    return data
