"""The extractor's plot: per-run interval series, the interval panel, model
bounds.

Series are checked without matplotlib; the drawing tests inspect the artists
matplotlib was given (lines, their data, the bounds band), not pixels.
"""

import pytest

from official_bench.extract import extractor as extract, plot, series
from support import logkit as kit


def _tree(tmp_path):
    """1n1g: three runs (warm-up 50, then 300/310/320; run 2 has a result JSON
    with unrounded speeds); 1n2g: two runs and a crashed one."""
    logs = tmp_path / "bz128"
    for index, speed in ((1, 300), (3, 320)):
        kit.write_run(logs, "1n1g", [50] + [speed] * 5, index=index)
    path = kit.write_run(logs, "1n1g", [50] + [310] * 5, index=2)
    exact = [50.004] + [310.004] * 5  # the log lines say 50.00 and 310.00
    kit.write_json(path[:-4] + ".json", kit.result_json(
        [(k * 100, k * 100 + 100, e) for k, e in enumerate(exact)], 128, 1,
        kit.environment(num_replicas=1, gpu_names=["GPU-A"], hostname="h2")))
    kit.write_run(logs, "1n2g", [90] + [600] * 5, index=1)
    kit.write_run(logs, "1n2g", [90] + [620] * 5, index=2)
    kit.write_run(logs, "1n2g", [90, 600], index=3, finished=False,
                  exception="RuntimeError: boom")
    return extract.extract(str(logs))


def test_series_hold_every_interval_from_the_measured_source(tmp_path):
    extraction = _tree(tmp_path)
    run_series = series.collect(extraction.outcomes)
    assert list(run_series) == ["rn50"]
    one = {r.index: r for r in run_series["rn50"]["1n1g"]}
    assert sorted(one) == [1, 2, 3]
    # warm-up included: the first interval (ending at step 100) is there
    assert one[1].end_steps == [100, 200, 300, 400, 500, 600]
    assert one[1].examples_per_second == [50, 300, 300, 300, 300, 300]
    # run 2's speed came from its JSON, so its points are the JSON's values
    assert one[2].examples_per_second == [50.004] + [310.004] * 5
    assert one[2].hostname == "h2" and one[1].hostname is None
    assert [r.median for r in (one[1], one[2], one[3])] == [False, True, False]


def test_crashed_runs_are_not_drawn_and_even_counts_take_the_lower_median(
        tmp_path):
    run_series = series.collect(_tree(tmp_path).outcomes)
    two = run_series["rn50"]["1n2g"]
    assert [r.index for r in two] == [1, 2]  # run 3 crashed
    assert [r.median for r in two] == [True, False]  # 600 < 620


def _axes(count=1):
    from matplotlib.figure import Figure
    fig = Figure()
    return fig.subplots(1, count) if count > 1 else fig.subplots()


def test_interval_panel_draws_each_case_median_solid_and_window(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    extraction = _tree(tmp_path)
    run_series = series.collect(extraction.outcomes)
    ax = _axes()
    plot._draw_intervals(ax, extraction.result, run_series)
    labelled = {line.get_label(): line for line in ax.lines
                if not line.get_label().startswith("_")}
    assert sorted(labelled) == ["1n1g (median run 2)", "1n2g (median run 1)",
                                plot.NOT_COUNTED]
    median = labelled["1n1g (median run 2)"]
    # the warm-up interval (ending at step 100) is not a point of the line
    assert list(median.get_xdata()) == [200, 300, 400, 500, 600]
    assert list(median.get_ydata()) == [310.004] * 5
    skipped = [line for line in ax.lines if line.get_linestyle() == "None"]
    assert len(skipped) == 5  # one hollow warm-up point per counted run
    assert all(list(line.get_xdata()) == [100] for line in skipped)
    assert sorted(float(line.get_ydata()[0]) for line in skipped) == \
        [50, 50, 50.004, 90, 90]
    assert all(line.get_markerfacecolor() == "none" for line in skipped)
    faint = [line for line in ax.lines if line.get_label().startswith("_")
             and line.get_linestyle() != "None"]
    assert len(faint) == 3 and all(line.get_alpha() < 1 for line in faint)
    # runs of one case share the median run's colour
    ones = [line for line in faint if list(line.get_ydata())[0] in (300, 320)]
    assert {line.get_color() for line in ones} == {median.get_color()}
    window = [p for p in ax.patches
              if p.get_label() == "counted steps 100-600"]
    assert len(window) == 1


def test_bounds_band_drawn_only_where_a_model_gave_bounds():
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    entries = {"1n1g": {"median_speed": 300.0, "speedup": 1.0,
                        "speedup_baseline": "1n1g"},
               "1n4g": {"median_speed": 1100.0, "speedup": 3.67,
                        "speedup_baseline": "1n1g"}}
    ax_speed, ax_speedup = _axes(2)
    plot._draw(ax_speed, ax_speedup, "rn50", entries)
    assert len(ax_speedup.collections) == 0  # no model, no band
    with_bounds = {c: dict(e) for c, e in entries.items()}
    with_bounds["1n1g"][plot.BOUNDS_KEY] = {"lower": 1.0, "upper": 1.0}
    with_bounds["1n4g"][plot.BOUNDS_KEY] = {"lower": 3.2, "upper": 3.9}
    ax_speed, ax_speedup = _axes(2)
    plot._draw(ax_speed, ax_speedup, "rn50", with_bounds)
    bands = [c for c in ax_speedup.collections
             if c.get_label() == "rn50 model bounds"]
    assert len(bands) == 1
    ys = {round(float(y), 2) for x, y in bands[0].get_paths()[0].vertices
          if x == 4}
    assert ys == {3.2, 3.9}


def test_bounds_that_are_not_numbers_are_ignored():
    entries = {"1n1g": {"median_speed": 1.0, plot.BOUNDS_KEY: {"lower": 1.0}},
               "1n2g": {"median_speed": 2.0, plot.BOUNDS_KEY: {"lower": "1.5",
                                                              "upper": 2.0}},
               "1n4g": {"median_speed": 3.0, plot.BOUNDS_KEY: {"lower": 3,
                                                              "upper": 3.8}}}
    assert plot.speedup_bounds(entries) == [(4, 3, 3.8)]


def test_png_without_series_has_only_the_scaling_panels():
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    import io

    from matplotlib import image
    data = plot.png_bytes({"rn50": {"1n1g": {"median_speed": 300.0,
                                             "speedup": 1.0}}})
    # One device count: one row of bars, lower than the scaling panels.
    assert image.imread(io.BytesIO(data)).shape[:2] == (250, 1100)
    data = plot.png_bytes({"rn50": {
        "1n1g": {"median_speed": 300.0, "speedup": 1.0},
        "1n2g": {"median_speed": 590.0, "speedup": 1.97}}})
    assert image.imread(io.BytesIO(data)).shape[:2] == (450, 1100)


def _entry(median, speedup, mfu, dtype="fp32"):
    return {"median_speed": median, "min": median * 0.98,
            "max": median * 1.02, "speedup": speedup, "dtype": dtype,
            "speedup_baseline": "1n1g", "batch_size_per_device": 128,
            "model_flops": {"mfu": mfu, "images_per_second": median * 0.97}}


def test_one_device_sweep_is_one_panel_of_bars_with_mfu(tmp_path):
    """A sweep of one device count has no scaling: one panel of bars per
    section (MFU written on each), not three panels of one dot each."""
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    one = {"rn50": {"1n1g": _entry(300.0, 1.0, 0.30)},
           "rn50_fp16": {"1n1g": _entry(800.0, 1.0, 0.20, "fp16")}}
    assert plot.scaling_panels(one) == 1
    fig = plot.figure(one)
    (ax,) = fig.axes
    assert len(ax.patches) == 2  # a bar per section
    texts = [t.get_text() for t in ax.texts]
    # MFU is of images / time over the window, not of the bar's median:
    # the note says so with that rate.
    assert texts[0].endswith(": 300.00 samples/s; MFU 30.0% at 291.00 "
                             "img/s over the window"), texts
    assert "800.00 samples/s; MFU 20.0% at 776.00 img/s" in texts[1]
    # With the interval series below: two panels, the bars and the series.
    extraction = _tree(tmp_path)
    only_one = {"rn50": {"1n1g": extraction.result["rn50"]["1n1g"]}}
    fig = plot.figure(only_one, series=series.collect(
        [o for o in extraction.outcomes if o.run.case == "1n1g"]))
    assert len(fig.axes) == 2


def test_legends_sit_outside_the_data_and_inside_the_figure():
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    multi = {"rn50": {c: _entry(300.0 * d, d * 0.97, 0.3)
                      for c, d in (("1n1g", 1), ("1n2g", 2), ("1n4g", 4))}}
    assert plot.scaling_panels(multi) == 3
    fig = plot.figure(multi, "a title")
    renderer = fig.canvas.get_renderer()
    fig.canvas.draw()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert len(legends) == 1  # one for the row, each label once
    labels = [t.get_text() for t in legends[0].get_texts()]
    assert len(labels) == len(set(labels)) == 2
    box = legends[0].get_window_extent(renderer)
    figure_box = fig.bbox
    assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1
    assert figure_box.y0 <= box.y0 and box.y1 <= figure_box.y1
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent(renderer))
        # nothing cut at the edges: tick labels and axis labels inside too
        tight = ax.get_tightbbox(renderer)
        assert tight.x0 >= figure_box.x0 and tight.x1 <= figure_box.x1
