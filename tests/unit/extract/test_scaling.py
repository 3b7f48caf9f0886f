"""The extractor's all-reduce table, mean GPU utilisation column and
scaling model (issue 14 §1, §3, §4), on written logs (no TensorFlow)."""

import json
import os

import pytest

from official_bench.extract import (
    allreduce_logs,  # noqa: E402
    extractor as extract,
    scaling,  # noqa: E402
    tables,
)
from support import logkit as kit

SPEEDS = [90.0] + [100.0] * 6  # steps 0..700: warm-up, then 100 img/s


def write_allreduce(log_dir, case, rows, index=1, parameters=1000):
    path = os.path.join(str(log_dir), case, "allreduce_fp32_%d.json" % index)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"kind": "allreduce", "model_parameters": parameters,
                   "results": [dict(nbytes=n, dtype=d, ranks=k, seconds=s,
                                    model=m) for n, d, k, s, m in rows]}, f)
    return path


def speeds(per_device, case):
    return [s * per_device / 100.0 for s in SPEEDS]


@pytest.fixture
def tree(tmp_path):
    log_dir = tmp_path / "bz128"
    kit.write_run(log_dir, "1n1g", speeds(100, "1n1g"))   # T1 = 1.28 s
    kit.write_run(log_dir, "1n2g", speeds(150, "1n2g"))   # speedup 1.5
    kit.write_run(log_dir, "2n1g", speeds(100, "2n1g"))   # speedup 1.0
    for case, secs in (("1n2g", (0.5, 0.7)), ("2n1g", (0.5,))):
        for i, s in enumerate(secs, 1):
            write_allreduce(log_dir, case, [
                (4000, "float32", 2, s, True), (2000, "float16", 2, 9.0, True),
                (65536, "float32", 2, 0.01, False)], index=i)
    return log_dir


def test_bounds_and_words(tree):
    ex = extract.extract(str(tree))
    rn50 = ex.result["rn50"]
    # 1n2g: A = median(0.5, 0.7) = 0.6 s of float32 (not the fp16 row).
    m = rn50["1n2g"]["scaling_model"]
    assert m["allreduce_ms"] == pytest.approx(600.0)
    assert m["compute_ms"] == pytest.approx(1280.0)
    assert m["lower"] == pytest.approx(2 * 1.28 / 1.88)
    assert m["upper"] == pytest.approx(2.0)  # capped at ideal
    assert m["verdict"] == "inside"
    assert rn50["1n2g"]["speedup_bounds"] == {
        "lower": round(2 * 1.28 / 1.88, 4), "upper": 2.0}
    # hidden = (T1 + A - step) / A with step = 2 T1 / 1.5
    hidden = (1.28 + 0.6 - 2 * 1.28 / 1.5) / 0.6
    assert ("mostly compute: all-reduce of 3.9 KiB at 0.00667 MB/s bus "
            "bandwidth takes 600.0 ms, 47% of the 1-device step (1280.0 ms)"
            in m["explanation"])
    assert "measured 1.50 is inside: about %.0f%% of the all-reduce is " \
        "hidden" % (100 * hidden) in m["explanation"]
    below = rn50["2n1g"]["scaling_model"]
    assert below["verdict"] == "below"
    assert "the step takes 2560.0 ms, 780.0 ms more than compute plus " \
        "all the communication" in below["explanation"]
    assert below["small_collectives"] == 0  # no latency row: no k L term
    assert rn50["1n1g"]["speedup_bounds"] == {"lower": 1.0, "upper": 1.0}
    assert "scaling_model" not in rn50["1n1g"]
    notes = tables.notes(rn50)
    assert any(n.startswith("scaling model: 1n2g mostly compute")
               for n in notes)


def test_bandwidth_table_outputs(tree, tmp_path, capsys):
    out = tmp_path / "out"
    assert extract.main(["--log_dir", str(tree), "--output_dir", str(out),
                         "--no_plot"]) == 0
    # On stdout after the result JSON, with the Markdown table.
    stdout = capsys.readouterr().out
    _, end = json.JSONDecoder().raw_decode(stdout)
    assert "## All-reduce bandwidth" in stdout[end:]
    # 1n2g float32 model row: median 0.6 s, 4000 B -> algbw 6.667e-6 GB/s
    assert "| 1n2g | 3.9 KiB (model) | float32 | 2 | 600.000 | 0.000 | " \
        "0.000 | 2 |" in stdout[end:]
    md = (out / "bz128_result.md").read_text()
    assert "| 2n1g | 64 KiB | float32 | 2 | 10.000 | 0.007 | 0.007 | 1 |" \
        in md
    assert "scaling model: 2n1g" in md
    html = (out / "bz128_result.html").read_text()
    assert "<h2>All-reduce bandwidth</h2>" in html and "scaling model" in html
    saved = json.loads((out / "bz128_result.json").read_text())
    assert saved["rn50"]["1n2g"]["speedup_bounds"]["upper"] == 2.0


def test_allreduce_only_tree(tmp_path, capsys):
    log_dir = tmp_path / "bz4"
    write_allreduce(log_dir, "2n1g", [(1 << 20, "float32", 2, 0.001,
                                       False)])
    out = tmp_path / "out"
    # 1 MiB in 1 ms: algbw 1.049 GB/s, busbw the same for 2 ranks
    row = "| 2n1g | 1 MiB | float32 | 2 | 1.000 | 1.049 | 1.049 | 1 |"
    assert extract.main(["--log_dir", str(log_dir), "--output_dir",
                         str(out)]) == 0
    captured = capsys.readouterr()
    printed, end = json.JSONDecoder().raw_decode(captured.out)
    assert printed == {} and row in captured.out[end:]
    assert "no plot: all-reduce results only" in captured.err
    # --json_only: stdout is the JSON alone, the table goes to stderr.
    assert extract.main(["--log_dir", str(log_dir), "--output_dir",
                         str(out), "--json_only"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "{}\n" and row in captured.err


def test_bad_allreduce_file_is_a_warning(tree):
    path = os.path.join(str(tree), "1n2g", "allreduce_fp32_3.json")
    with open(path, "w") as f:
        json.dump({"kind": "allreduce", "results": [{"nbytes": 4}]}, f)
    ex = extract.extract(str(tree))
    assert any("allreduce_fp32_3.json: unusable all-reduce result" in w
               for w in ex.warnings)
    assert ex.result["rn50"]["1n2g"]["scaling_model"]["allreduce_ms"] == \
        pytest.approx(600.0)


def write_latency(log_dir, case, seconds, per_step, index=2):
    """A run's latency row (allreduce/bench.py: 4 bytes, chained, per_step)."""
    path = os.path.join(str(log_dir), case, "allreduce_fp32_%d.json" % index)
    with open(path, "w") as f:
        json.dump({"kind": "allreduce", "results": [dict(
            nbytes=4, dtype="float32", ranks=2, seconds=seconds, model=False,
            latency=True, chain=8, per_step=per_step)]}, f)


def test_small_collectives_add_latency(tree):
    # 2n1g: T1 1.28 s, A 0.5 s, 9 collectives x 0.2 s = 1.8 s per step.
    write_latency(tree, "2n1g", 0.2, 9)
    write_latency(tree, "2n1g", 0.4, 9, index=3)  # median of 0.2, 0.4
    ex = extract.extract(str(tree))
    m = ex.result["rn50"]["2n1g"]["scaling_model"]
    assert (m["small_collectives"], m["latency_ms"]) == (9, pytest.approx(300))
    tail = 9 * 0.3
    assert m["lower"] == pytest.approx(2 * 1.28 / (1.28 + 0.5 + tail))
    assert m["upper"] == pytest.approx(2 * 1.28 / (1.28 + tail))
    # measured 1.0 (step 2.56 s) was "below" without the term; with it the
    # no-overlap step is 4.48 s, so the measured speed is above even that.
    assert m["verdict"] == "above"
    assert m["explanation"].startswith(
        "2n1g latency-dominated: 9 collectives x 300.00 ms = 2700.0 ms per "
        "step (the step's small all-reduces, such as metric results), and "
        "the gradient's "
        "all-reduce of 3.9 KiB")
    # The bandwidth table names the row and its count.
    rows = [r for r in ex.bandwidth["2n1g"] if r.get("latency")]
    assert [(r["per_step"], r["runs"]) for r in rows] == [(9, 2)]
    assert ["2n1g", "4 B (latency, 9 per step)", "float32", "2", "300.000"] \
        in [cells[:5] for cells in allreduce_logs.table_rows(ex.bandwidth)]


def test_latency_words_when_the_gradient_dominates():
    row = {"seconds": 0.3, "nbytes": 10, "busbw_gbps": 1.0,
           "dtype": "float32"}
    lat = {"seconds": 0.002, "per_step": 9}
    m = scaling.explain("2n1g", 1.0, 0.2, row, 2, lat)
    assert m["explanation"].startswith(
        "2n1g communication-dominated: all-reduce of 10 B at 1 GB/s bus "
        "bandwidth takes 300.0 ms, and 9 small collectives x 2.00 ms add "
        "18.0 ms; together 159% of the 1-device step (200.0 ms)")
    assert m["lower"] == pytest.approx(0.4 / 0.518)
    assert m["verdict"] == "inside"


@pytest.mark.parametrize("share, latency, label", [
    (0.049, False, "compute-bound"), (0.05, False, "mostly compute"),
    (0.08, True, "mostly compute"), (0.49, False, "mostly compute"),
    (0.5, False, "communication-heavy"), (0.99, True, "latency-heavy"),
    (1.0, False, "communication-dominated"), (3.0, True, "latency-dominated")])
def test_share_labels(share, latency, label):
    # "-bound" is never said of communication under 100% of the step.
    assert scaling._weight(share, latency) == label


def test_model_arithmetic():
    # A > T1: even full overlap leaves max(T1, A) per step.
    assert scaling.bounds(0.1, 0.3, 2) == pytest.approx((0.5, 2 / 3))
    m = scaling.explain("2n1g", 0.9, 0.1, {"seconds": 0.3, "nbytes": 10,
                                           "busbw_gbps": 1.0,
                                           "dtype": "float32"}, 2)
    assert m["verdict"] == "above"
    assert m["explanation"].startswith("2n1g communication-dominated")


def test_gpu_utilisation_column(tmp_path):
    log_dir = tmp_path / "bz128"
    path = kit.write_run(log_dir, "1n1g", speeds(100, "1n1g"))
    data = kit.result_json([(k * 100, k * 100 + 100, s)
                            for k, s in enumerate(speeds(100, "1n1g"))],
                           128, 1)
    data["utilisation"] = {"gpu": {"utilisation_percent": {
        "mean": 87.44, "p10": 80, "p90": 95}}}
    kit.write_json(path[:-4] + ".json", data)
    kit.write_run(log_dir, "1n2g", speeds(150, "1n2g"))  # no JSON
    rn50 = extract.extract(str(log_dir)).result["rn50"]
    assert rn50["1n1g"]["gpu_utilisation"] == 87.4
    assert rn50["1n2g"]["gpu_utilisation"] is None
    rows = tables.table_rows(rn50)
    assert tables.MARKDOWN_COLUMNS[-1] == "GPU util"
    assert [r[-1] for r in rows] == ["87%", "n/a"]


def write_compute_wait(log_dir, case, after, back, gap=0.5, index=4,
                       in_step=None):
    """A run's compute_after_wait (official_bench/allreduce/compute_wait.py),
    with in_step (gradient_seconds, small_seconds) as its
    communication_in_step (official_bench/allreduce/in_step.py)."""
    path = os.path.join(str(log_dir), case, "allreduce_fp32_%d.json" % index)
    wait = {"gap_seconds": gap, "after_wait_seconds": after,
            "back_to_back_seconds": back, "cycles": 20}
    if in_step is not None:
        wait["communication_in_step"] = {
            "gradient_seconds": in_step[0], "small_seconds": in_step[1],
            "small_collectives": 6, "cycles": 20}
    with open(path, "w") as f:
        json.dump({"kind": "allreduce", "results": [],
                   "compute_after_wait": wait}, f)


def test_communication_in_the_step_pattern_is_what_the_bounds_charge(tree):
    # 2n1g: T1 1.28 s, A alone 0.5 s, no latency row. Timed between
    # compute steps the all-reduce averaged 0.7 and 0.9 s (median 0.8) and
    # the small collectives 0.1 s: the no-overlap step is 1.28 + 0.8 + 0.1
    # = 2.18 s, full overlap max(1.28, 0.8) + 0.1 = 1.38 s.
    write_compute_wait(tree, "2n1g", 0.1, 0.1, gap=0.8, in_step=(0.7, 0.1))
    write_compute_wait(tree, "2n1g", 0.1, 0.1, gap=0.9, in_step=(0.9, 0.1),
                       index=5)
    m = extract.extract(str(tree)).result["rn50"]["2n1g"]["scaling_model"]
    assert m["allreduce_ms"] == pytest.approx(500.0)  # alone, as measured
    assert m["allreduce_in_step_ms"] == pytest.approx(800.0)
    assert m["small_in_step_ms"] == pytest.approx(100.0)
    assert m["lower"] == pytest.approx(2 * 1.28 / 2.18)
    assert m["upper"] == pytest.approx(2 * 1.28 / 1.38)
    assert ("all-reduce of 3.9 KiB at 0.008 MB/s bus bandwidth takes "
            "500.0 ms alone, 800.0 ms on average between compute steps as "
            "in training" in m["explanation"])
    # the measured step (2.56 s) is 0.38 s over that, not 0.68 s
    assert "380.0 ms more than compute plus all the communication" in \
        m["explanation"]
    # a run without the in-step timing: the case falls back to A alone
    write_compute_wait(tree, "2n1g", 0.1, 0.1, index=6)
    m = extract.extract(str(tree)).result["rn50"]["2n1g"]["scaling_model"]
    assert m["allreduce_in_step_ms"] is None
    assert m["lower"] == pytest.approx(2 * 1.28 / 1.78)


def test_bad_communication_in_step_is_a_warning_naming_the_file(tree):
    write_compute_wait(tree, "2n1g", 0.1, 0.1, in_step=(-1.0, 0.1))
    ex = extract.extract(str(tree))
    assert any("allreduce_fp32_4.json: unusable compute_after_wait "
               "(compute_after_wait.communication_in_step needs "
               "gradient_seconds, small_seconds >= 0" in w
               for w in ex.warnings)
    assert ex.result["rn50"]["2n1g"]["scaling_model"][
        "allreduce_in_step_ms"] is None


def test_compute_after_a_wait_widens_the_no_overlap_bound(tree):
    # 2n1g: T1 1.28 s, A 0.5 s; measured 1.0 means a 2.56 s step, 0.78 s
    # more than T1 + A ("below" in test_bounds_and_words). Compute after a
    # wait measured 1.5x and 1.7x (median 1.6) the back-to-back step: the
    # no-overlap step is 1.6 x 1.28 + 0.5 = 2.548 s, so 1.0 is at it.
    write_compute_wait(tree, "2n1g", 0.15, 0.1)
    write_compute_wait(tree, "2n1g", 0.17, 0.1, index=5)
    ex = extract.extract(str(tree))
    m = ex.result["rn50"]["2n1g"]["scaling_model"]
    assert m["compute_penalty"] == pytest.approx(1.6)
    assert m["lower"] == pytest.approx(2 * 1.28 / (1.6 * 1.28 + 0.5))
    assert m["upper"] == pytest.approx(2 * 1.28 / 1.28)  # full overlap: T1
    assert m["verdict"] == "inside"
    assert ("compute after a 500.0 ms wait took 1.60x the back-to-back "
            "step (measured beside the all-reduce), so no overlap charges "
            "2048.0 ms of compute" in m["explanation"])
    # 1n2g measured nothing after a wait: the model is unchanged.
    other = ex.result["rn50"]["1n2g"]["scaling_model"]
    assert other["compute_penalty"] == 1.0
    assert other["compute_wait"] is None
    assert m["compute_wait"] == {"gap_ms": 500.0, "measured_penalty":
                                 pytest.approx(1.6), "back_to_back_ms": 100.0,
                                 "runs": 2}
    assert other["lower"] == pytest.approx(2 * 1.28 / 1.88)
    assert "after a" not in other["explanation"]


def test_a_device_slower_beside_the_all_reduce_is_named_in_a_miss(tree):
    # 2n1g: T1 1.28 s, measured 1.0 is below (test_bounds_and_words).
    # Beside the all-reduce the chief's step back to back took 1.9 and
    # 2.1 s (median 2.0, 1.56x T1): the machine ran slower than during the
    # 1n1g run, and the explanation says so with the numbers.
    write_compute_wait(tree, "2n1g", 1.9, 1.9)
    write_compute_wait(tree, "2n1g", 2.1, 2.1, index=5)
    m = extract.extract(str(tree)).result["rn50"]["2n1g"]["scaling_model"]
    assert m["verdict"] == "below"
    assert m["compute_wait"]["back_to_back_ms"] == pytest.approx(2000.0)
    assert m["explanation"].endswith(
        "; beside the all-reduce a device computed the step back to back "
        "in 2000.0 ms, 1.56x the 1n1g step (1280.0 ms): the devices "
        "computed slower here than in the 1n1g run (other load, clocks, or "
        "processes sharing a machine), which the bounds do not charge")
    # within SPEED_DIFFERENCE of T1 (1.1x): a miss is not put on the speed
    write_compute_wait(tree, "2n1g", 1.4, 1.4)
    write_compute_wait(tree, "2n1g", 1.4, 1.4, index=5)
    m = extract.extract(str(tree)).result["rn50"]["2n1g"]["scaling_model"]
    assert m["verdict"] == "below"
    assert "beside the all-reduce a device" not in m["explanation"]


def test_a_1n1g_step_longer_than_the_compute_is_named_above_the_bounds():
    # bounds 0.5 to 0.667 with T1 0.1 s, A 0.3 s; measured 0.8 is above.
    row = {"seconds": 0.3, "nbytes": 10, "busbw_gbps": 1.0,
           "dtype": "float32"}
    wait = {"penalty": 1.0, "gap_seconds": 0.3, "back_to_back_seconds": 0.07}
    m = scaling.explain("2n1g", 0.8, 0.1, row, 2, wait=wait)
    assert m["verdict"] == "above"
    assert m["explanation"].endswith(
        "a device computed the step back to back in 70.0 ms, 0.70x the "
        "1n1g step (100.0 ms): the 1n1g step is longer than the device's "
        "compute (input or host overhead the 1n1g run paid, or a slower "
        "machine then)")
    # inside the bounds the speeds are not compared
    m = scaling.explain("2n1g", 0.6, 0.1, row, 2, wait=wait)
    assert m["verdict"] == "inside"
    assert "back to back in" not in m["explanation"]


def test_compute_faster_after_a_wait_does_not_tighten_the_bound(tree):
    write_compute_wait(tree, "2n1g", 0.09, 0.1)  # 0.9x: noise, not a gain
    m = extract.extract(str(tree)).result["rn50"]["2n1g"]["scaling_model"]
    assert m["compute_penalty"] == 1.0
    assert m["compute_wait"]["measured_penalty"] == pytest.approx(0.9)
    assert m["lower"] == pytest.approx(2 * 1.28 / 1.78)
    assert "took 0.90x the back-to-back step (measured beside the " \
        "all-reduce), so no overlap charges the 1n1g step's compute" \
        in m["explanation"]


def test_bad_compute_wait_is_a_warning_naming_the_file(tree):
    write_compute_wait(tree, "2n1g", 0.15, 0.0)  # back to back 0 s
    ex = extract.extract(str(tree))
    assert any("allreduce_fp32_4.json: unusable compute_after_wait "
               "(compute_after_wait needs" in w for w in ex.warnings)
    assert ex.result["rn50"]["2n1g"]["scaling_model"]["compute_penalty"] \
        == 1.0


def test_the_runs_spread_widens_at_the_bound(tmp_path):
    # T1 1.28 s (1n1g, two identical runs: no spread). The benchmark ran
    # twice: gradient 0.8 and 1.0 s between compute steps, small
    # collectives 0.1 s, no compute penalty: no-overlap steps 2.18 and
    # 2.38 s (cv 0.062), the bound from their median 2 x 1.28 / 2.28 =
    # 1.123. The 2n1g runs: 98 and 108 img/s against 100, speedup 1.03
    # (cv 0.0687): 8% below the bound, more than 3%, less than twice
    # the combined spread sqrt(0.0687^2 + 0.062^2) = 9.25% (19%).
    log_dir = tmp_path / "bz128"
    for i in (1, 2):
        kit.write_run(log_dir, "1n1g", speeds(100, "1n1g"), index=i)
    kit.write_run(log_dir, "2n1g", speeds(98, "2n1g"), index=1)
    write_allreduce(log_dir, "2n1g", [(4000, "float32", 2, 0.5, True)])
    write_compute_wait(log_dir, "2n1g", 0.1, 0.1, gap=0.9, in_step=(0.8, 0.1))
    # one run of each: 0.98 against 2 x 1.28 / 2.18 = 1.174 is below
    m = extract.extract(str(log_dir)).result["rn50"]["2n1g"]["scaling_model"]
    assert (m["verdict"], m["run_spread"], m["tolerance"]) == \
        ("below", 0.0, scaling.TOLERANCE)
    assert "is below (not within 3%)" in m["explanation"]
    kit.write_run(log_dir, "2n1g", speeds(108, "2n1g"), index=2)
    write_compute_wait(log_dir, "2n1g", 0.1, 0.1, gap=1.1, in_step=(1.0, 0.1),
                       index=5)
    m = extract.extract(str(log_dir)).result["rn50"]["2n1g"]["scaling_model"]
    assert m["lower"] == pytest.approx(2 * 1.28 / 2.28)
    assert m["measured"] == pytest.approx(1.03)
    steps_cv = 0.1 * 2 ** 0.5 / 2.28  # stdev(2.18, 2.38) / mean
    assert m["run_spread"] == pytest.approx(
        (0.0687 ** 2 + steps_cv ** 2) ** 0.5, rel=1e-3)
    assert m["tolerance"] == pytest.approx(2 * m["run_spread"])
    assert m["verdict"] == "inside"
    assert "measured 1.03 is at the no-overlap bound (within 19%, twice " \
        "the runs' spread)" in m["explanation"]


def test_spread_arithmetic():
    wait = {"per_run": [{"penalty": 0.9, "in_step": {"gradient_seconds": 1.0,
                                                     "small_seconds": 0.0}},
                        {"penalty": 2.0, "in_step": {"gradient_seconds": 1.0,
                                                     "small_seconds": 1.0}},
                        {"penalty": 1.5, "in_step": None}]}
    # steps: max(1, 0.9) x 1 + 1 = 2 and 2 x 1 + 2 = 4 (the run without
    # the in-step timing has no step): cv = stdev(2, 4) / 3 (to 4 digits,
    # as the cases' cv)
    assert scaling.spread(None, None, 1.0, wait) == pytest.approx(
        2 ** 0.5 / 3, abs=1e-4)
    assert scaling.spread(0.03, 0.04, 1.0, None) == pytest.approx(0.05)
    assert scaling.spread(None, None, 1.0, {"per_run": []}) == 0.0


def test_near_the_no_overlap_bound_no_share_is_claimed_hidden():
    # bounds 0.5 (no overlap) to 0.667; 0.55 is 10% above the lower one.
    row = {"seconds": 0.3, "nbytes": 10, "busbw_gbps": 1.0,
           "dtype": "float32"}
    m = scaling.explain("2n1g", 0.55, 0.1, row, 2)
    assert m["verdict"] == "inside"
    # step 0.3636 s against 0.4 s without overlap: 0.0364 of 0.1 hidden
    assert "measured 0.55 is inside: about 36% of the all-reduce is " \
        "hidden behind compute" in m["explanation"]
    # the same when the runs moved by 6%: 10% is within their spread
    m = scaling.explain("2n1g", 0.55, 0.1, row, 2, run_spread=0.06)
    assert m["verdict"] == "inside"
    assert "measured 0.55 is at the no-overlap bound (within 12%, twice " \
        "the runs' spread): no measurable part of the all-reduce is " \
        "hidden behind compute" in m["explanation"]
