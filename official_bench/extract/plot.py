"""PNG plot of a result: scaling against device count, and throughput over
steps.

matplotlib is an optional extra (``pip install official_bench[plot]``); it is
imported only when a plot is made, and through its object-oriented API with
the Agg canvas, so plotting neither needs a display nor changes the pyplot
backend of a notebook that imports this module.

Panels, one line per model section (dtype, batch size): median samples/s per
case (error bars min to max over runs) with the ideal ``baseline per-device
speed x devices``; speedup with the ideal ``devices / baseline devices``;
MFU against devices when result JSONs carried model FLOPs
(:mod:`official_bench.extract.model_flops`); a sweep of one device count
has no scaling to show, so one panel of bars (samples/s per section, MFU
written on each) takes the row. Legends sit outside the axes, on the right.
Below, when per-run series are given (:mod:`official_bench.extract.series`):
every interval's examples/second against its end step, the median run solid,
the others faint, the counted window shaded; intervals outside it are hollow
grey points labelled "not counted", so warm-up, jitter and disagreeing runs
show. The title says what was measured (:mod:`official_bench.extract.subject`),
so a picture passed around alone still says what it shows.

A case entry's ``speedup_bounds`` (``{"lower": x, "upper": y}``, set by the
scaling model, :mod:`official_bench.extract.scaling`) is drawn as a band in
the speedup panel; nothing here invents bounds: without the key no band.
"""

from __future__ import annotations

import importlib.util
import io
from typing import Any, Dict, Iterable, List, Optional, Tuple

from official_bench.extract import model_flops, subject, tables
from official_bench.extract.errors import ExtractError
from official_bench.extract.series import RunSeries

ModelResult = Dict[str, Dict[str, Any]]  # case -> entry of one section
Series = Dict[str, Dict[str, List[RunSeries]]]  # series.collect()

BOUNDS_KEY = "speedup_bounds"
NOT_COUNTED = "not counted (warm-up, or outside the window)"
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
    for case, e in tables.sorted_cases(model_result):
        if e.get("median_speed") is None:
            continue
        devices = tables.case_counts(case)[2]
        points.append((devices, e["median_speed"], e.get("min"), e.get("max"),
                       e.get("speedup")))
    return points


def _baseline(model_result: ModelResult) -> Optional[Tuple[int, float]]:
    """(devices, median) of the speedup baseline case, or None."""
    for case, e in model_result.items():
        if case == e.get("speedup_baseline", "1n1g") and e.get("median_speed"):
            return tables.case_counts(case)[2], e["median_speed"]
    return None


def speedup_bounds(model_result: ModelResult
                   ) -> List[Tuple[int, float, float]]:
    """``[(devices, lower, upper)]`` of the cases carrying model bounds.

    Entries without :data:`BOUNDS_KEY`, or with a lower or upper bound that is
    not a number, are left out: a band is drawn only where a model said so.
    """
    points: List[Tuple[int, float, float]] = []
    for case, e in tables.sorted_cases(model_result):
        bounds = e.get(BOUNDS_KEY)
        if not isinstance(bounds, dict):
            continue
        lower, upper = bounds.get("lower"), bounds.get("upper")
        if all(isinstance(v, (int, float)) and not isinstance(v, bool)
               for v in (lower, upper)):
            points.append((tables.case_counts(case)[2], lower, upper))
    return points


def _draw(ax_speed: Any, ax_speedup: Any, label: str,
          model_result: ModelResult) -> None:
    """Draw one model section into both scaling panels."""
    points = _series(model_result)
    if not points:
        return
    devices = [p[0] for p in points]
    medians = [p[1] for p in points]
    low = [m - (p[2] if p[2] is not None else m)
           for m, p in zip(medians, points)]
    high = [(p[3] if p[3] is not None else m) - m
            for m, p in zip(medians, points)]
    line = ax_speed.errorbar(devices, medians, yerr=[low, high], marker="o",
                             capsize=3, label=label)[0]
    color = line.get_color()
    base = _baseline(model_result)
    if base:
        base_devices, base_median = base
        ax_speed.plot(devices,
                      [base_median / base_devices * d for d in devices],
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
                                [b[2] for b in bounds], color=color,
                                alpha=0.15, label=f"{label} model bounds")


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
    labelled_skip = False
    for model_key in result:
        by_case = series.get(model_key) or {}
        for case, _ in tables.sorted_cases(result[model_key]):
            runs = by_case.get(case) or []
            label = f"{model_key} {case}" if several else case
            color = None
            for run in sorted(runs, key=lambda r: not r.median):
                (xs, ys), (skip_x, skip_y) = split_counted(run)
                if xs:
                    drawn = ax.plot(
                        xs, ys, color=color,
                        linewidth=1.6 if run.median else 0.8,
                        alpha=1.0 if run.median else 0.35,
                        marker="." if run.median else None,
                        label=(f"{label} (median run {run.index})"
                               if run.median else None))[0]
                    color = drawn.get_color()
                if skip_x:
                    ax.plot(skip_x, skip_y, linestyle="none", marker="o",
                            markerfacecolor="none", color="0.55",
                            alpha=0.8 if run.median else 0.35,
                            label=None if labelled_skip else NOT_COUNTED)
                    labelled_skip = True
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


def split_counted(run: RunSeries) -> Tuple[Tuple[List[int], List[float]],
                                           Tuple[List[int], List[float]]]:
    """``((steps, rates) counted, (steps, rates) not counted)`` of a run:
    the warm-up interval is not a measured point and is not drawn as one."""
    counted = run.counted or [True] * len(run.end_steps)
    inside: Tuple[List[int], List[float]] = ([], [])
    outside: Tuple[List[int], List[float]] = ([], [])
    for step, rate, ok in zip(run.end_steps, run.examples_per_second, counted):
        target = inside if ok else outside
        target[0].append(step)
        target[1].append(rate)
    return inside, outside


def mfu_points(model_result: ModelResult) -> List[Tuple[int, float]]:
    """``[(devices, MFU in percent)]`` of the cases with a known MFU."""
    return [(tables.case_counts(case)[2], e[model_flops.KEY]["mfu"] * 100)
            for case, e in tables.sorted_cases(model_result)
            if (e.get(model_flops.KEY) or {}).get("mfu") is not None]


def _draw_mfu(ax: Any, result: Dict[str, ModelResult]) -> None:
    """MFU against devices, one line per section; a note when no case has
    a known peak."""
    drawn = False
    for model_key, model_result in result.items():
        points = mfu_points(model_result)
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points],
                    marker="o",
                    label=tables.section_title(model_key, model_result))
            drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "MFU n/a: no peak known for the device",
                ha="center", va="center", transform=ax.transAxes)
    ax.set_ylim(bottom=0)


def title_text(result: Dict[str, ModelResult], name: Optional[str]) -> str:
    """The figure's title: what was measured (subject), the result's name,
    then the smoke-run mark and TensorFlow's CUDA build on a second line."""
    first = subject.headline(result) + (": " + name if name else "")
    return "\n".join([first] + [" | ".join(subject.details(result))]
                     if subject.details(result) else [first])


def _style_scaling(axes: Iterable[Any], devices: Iterable[int]) -> None:
    """Log-2 device axis with the cases' device counts as ticks."""
    for ax, ylabel in zip(axes, ("samples/s (median over runs)", "speedup",
                                 "MFU (%)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(devices))
        ax.set_xticklabels([str(d) for d in sorted(devices)])
        ax.set_xlabel("devices")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)


def _legend_outside(axes: List[Any]) -> None:
    """One legend for a row of panels, right of its last panel: inside a
    panel it hides the data; labels shared by panels are listed once."""
    handles: Dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        axes[-1].legend(list(handles.values()), list(handles),
                        fontsize="small", loc="upper left",
                        bbox_to_anchor=(1.02, 1.0))


def scaling_panels(result: Dict[str, ModelResult]) -> int:
    """How many panels the top row has: speed and speedup against devices
    (and MFU when known), or 1 (bars per section) for one device count."""
    devices = {d for m in result.values() for d, *_ in _series(m)}
    if len(devices) <= 1:
        return 1
    return 3 if any(model_flops.has_flops(m) for m in result.values()) else 2


def _mfu_note(model_result: ModelResult, devices: int) -> str:
    """'; MFU 30.0% at 290.00 img/s over the window' for the case of
    ``devices``, or '' without an MFU."""
    for case, e in model_result.items():
        flops = e.get(model_flops.KEY) or {}
        if tables.case_counts(case)[2] == devices and \
                flops.get("mfu") is not None:
            rate = flops.get("images_per_second")
            return f"; MFU {flops['mfu'] * 100:.1f}%" + (
                "" if rate is None else
                f" at {rate:.2f} img/s over the window")
    return ""


def _draw_one_device(ax: Any, result: Dict[str, ModelResult]) -> None:
    """One device count: each section's median samples/s as a bar (min to
    max over runs as its error bar), its MFU when known written on it with
    the rate that MFU is of (images / time over the window, not the bar's
    median: model_flops)."""
    labels, medians, low, high, notes = [], [], [], [], []
    for model_key, model_result in result.items():
        for devices, median, lo, hi, _ in _series(model_result):
            labels.append(tables.section_title(model_key, model_result))
            medians.append(median)
            low.append(median - (median if lo is None else lo))
            high.append((median if hi is None else hi) - median)
            notes.append(f"{median:.2f} samples/s" + _mfu_note(
                model_result, devices))
    rows = list(range(len(labels)))
    ax.barh(rows, medians, xerr=[low, high], capsize=3, color="C0",
            alpha=0.35, height=0.7)
    # The names go on the bars, not left of the axes where they would push
    # the panel (and the one below) aside.
    for row, label, note in zip(rows, labels, notes):
        ax.text(0.01, row, f"{label}: {note}", va="center",
                transform=ax.get_yaxis_transform(), fontsize="small")
    ax.set_yticks([])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    devices = {d for m in result.values() for d, *_ in _series(m)}
    ax.set_xlabel(f"samples/s on {min(devices, default=1)} device(s) "
                  "(median over runs; bars: min to max)")
    ax.grid(True, axis="x", alpha=0.3)


def figure(result: Dict[str, ModelResult], title: Optional[str] = None,
           series: Optional[Series] = None) -> Any:
    """The plot of ``result`` as a matplotlib Figure (Agg canvas).

    ``series`` is :func:`official_bench.extract.series.collect`'s output;
    without it (a result JSON read back, DLPerf's files) only the scaling
    panels are drawn. ``title``: the result's name (``bz128``). Raises
    ExtractError when matplotlib is not installed.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ExtractError(f"--plot needs matplotlib ({e}); install it with "
                           "'pip install matplotlib' or the [plot] extra")
    top = scaling_panels(result)
    width, height = _SIZE_WITH_SERIES if series else _SIZE_SCALING
    if top == 1:  # one row of bars needs less height than the scaling plots
        height -= 2.0
    fig = Figure(figsize=(width, height), dpi=_DPI)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2 if series else 1, top, height_ratios=(
        [1, 2.2] if top == 1 else [1, 1]) if series else None)
    axes = [fig.add_subplot(grid[0, k]) for k in range(top)]
    if series:
        _draw_intervals(fig.add_subplot(grid[1, :]), result, series)
    if top == 1:
        _draw_one_device(axes[0], result)
    else:
        for model_key, model_result in result.items():
            _draw(axes[0], axes[1],
                  tables.section_title(model_key, model_result), model_result)
        if top == 3:
            _draw_mfu(axes[2], result)
        _style_scaling(axes, {d for m in result.values()
                              for d, *_ in _series(m)})
        _legend_outside(axes)
    fig.suptitle(title_text(result, title), fontsize="medium")
    fig.tight_layout()
    return fig


def png_bytes(result: Dict[str, ModelResult], title: Optional[str] = None,
              series: Optional[Series] = None) -> bytes:
    """:func:`figure` as PNG bytes."""
    buf = io.BytesIO()
    figure(result, title, series).savefig(buf, format="png")
    return buf.getvalue()
