"""Per-run speed, run exclusion and per-case statistics of the extractor.

Expected numbers are worked out by hand in the comments.
"""


import pytest

from official_bench.contracts import (
    log_tree,  # noqa: E402
    result_json,  # noqa: E402
)
from official_bench.extract import (
    cases,  # noqa: E402
    logparse,  # noqa: E402
    speeds,  # noqa: E402
)
from official_bench.extract.logparse import RunId  # noqa: E402
from support import logkit as kit

RUN = RunId(1, 1, 128, "fp32", 1)


def measure(lines, run=RUN, run_json=None, **kw):
    """measure_run on in-memory log lines."""
    return speeds.measure_run(run, logparse.parse_log_lines(lines), run_json,
                              **kw)


def th(a, b, eps, seconds=1.0, prefix=""):
    """A TimeHistory line with an arbitrary prefix (timestamp or none)."""
    return prefix + ("TimeHistory: %.2f seconds, %.2f examples/second between "
                     "steps %d and %d" % (seconds, eps, a, b))


FINISH = "I1121 12:00:00.000000 1 a.py:1] official_bench: run finished"


# ---- mean method, any log_steps --------------------------------------------

def test_mean_counts_only_the_window():
    # intervals 0-100 .. 600-700; counted 100-600: (100+200+300+400+500)/5
    out = measure(kit.run_lines([50, 100, 200, 300, 400, 500, 999]))
    assert out.ok and out.speed == pytest.approx(300.0)
    assert out.counted_steps == (100, 600) and out.num_intervals == 5
    assert out.source == "log" and out.warnings == []


def test_log_steps_20():
    # 35 intervals of 20 steps, interval k at 1000+k examples/s; counted
    # k = 5 (100-120) .. 29 (580-600): mean 1000 + (5+29)/2 = 1017
    out = measure(kit.run_lines([1000 + k for k in range(35)], log_steps=20))
    assert out.speed == pytest.approx(1017.0)
    assert out.num_intervals == 25 and out.counted_steps == (100, 600)


def test_log_steps_50():
    # interval k at 100+10k; counted k = 2 (100-150) .. 11 (550-600): 165
    out = measure(kit.run_lines([100 + 10 * k for k in range(14)],
                                log_steps=50))
    assert out.speed == pytest.approx(165.0)
    assert out.num_intervals == 10


def test_log_steps_not_dividing_the_window():
    # log_steps 70: 70-140 straddles warm-up, 560-630 straddles the end;
    # interval k at k+1 examples/s; counted k = 2 (140-210) .. 7 (490-560),
    # speeds 3..8: mean 5.5
    out = measure(kit.run_lines([k + 1.0 for k in range(10)], log_steps=70))
    assert out.speed == pytest.approx(5.5)
    assert out.counted_steps == (140, 560)
    assert any("start at 140, after warmup_batches 100" in w
               for w in out.warnings)
    assert any("end at 560, before train_batches 600" in w
               for w in out.warnings)


def test_custom_window():
    out = measure(kit.run_lines([1, 2, 3, 4, 5, 6]), warmup_batches=200,
                  train_batches=400)
    assert out.speed == pytest.approx(3.5)  # intervals 200-300, 300-400


# ---- complete, truncated, crashed -------------------------------------------

def test_finished_run_short_of_train_batches_counts_with_warning():
    out = measure(kit.run_lines([10, 20, 30, 40]))  # finished at step 400
    assert out.ok and out.speed == pytest.approx(30.0)
    assert any("end at 400, before train_batches 600" in w
               for w in out.warnings)


def test_unfinished_run_reaching_train_batches_counts():
    out = measure(kit.run_lines([10, 20, 20, 20, 20, 20], finished=False))
    assert out.ok and out.speed == pytest.approx(20.0)


def test_truncated_run_is_excluded():
    out = measure(kit.run_lines([10, 20, 20, 20], finished=False))
    assert not out.ok and out.speed is None
    assert out.excluded.startswith("truncated:")
    assert "ends at step 400 (train_batches is 600)" in out.excluded


def test_log_cut_in_the_middle_of_a_line_is_truncated():
    lines = kit.run_lines([10, 20, 20], finished=False)
    lines.append(kit.absl_prefix(kit.BASE_TIME) + "TimeHistory: 42.6")
    out = measure(lines)
    assert out.excluded.startswith("truncated:")


def test_crash_before_train_batches_is_excluded():
    lines = kit.run_lines([10, 20, 20, 20, 20], finished=False,
                          exception="RuntimeError: collective timed out")
    out = measure(lines)
    assert out.excluded.startswith("crashed: Traceback at line ")
    assert "RuntimeError: collective timed out" in out.excluded
    assert "ends at step 500" in out.excluded


@pytest.mark.parametrize("method", ["mean", "time"])
def test_traceback_after_train_batches_is_a_warning(method):
    # DLPerf's logs have no finish line; a shutdown-time traceback after the
    # last counted interval does not make the run a crash (DLPerf counts it).
    lines = kit.run_lines([10, 20, 20, 20, 20, 20, 20], finished=False)
    lines += ["Exception ignored in: <function Pool.__del__ at 0x7f>",
              "Traceback (most recent call last):",
              '  File "multiprocessing/pool.py", line 268, in __del__',
              "TypeError: 'NoneType' object is not callable"]
    out = measure(lines, method=method)
    assert out.ok and out.speed == pytest.approx(20.0)
    tb_line = len(lines) - 2
    assert out.warnings == [
        "Traceback at line %d (TypeError: 'NoneType' object is not callable) "
        "but the intervals reach step 700 (train_batches 600): counted as "
        "complete, as DLPerf does" % tb_line]
    # the same run cut at step 500 is still a crash
    cut = kit.run_lines([10, 20, 20, 20, 20], finished=False) + lines[-4:]
    assert measure(cut, method=method).excluded.startswith("crashed")


def test_traceback_in_a_finished_run_is_not_a_crash():
    lines = kit.run_lines([10, 20, 20, 20, 20, 20], exception="UserWarning: x")
    assert measure(lines).ok


def test_finished_run_without_throughput_lines():
    out = measure(["I1121 12:00:00.000000 1 a.py:1] starting", FINISH])
    assert out.excluded == "no TimeHistory lines (nothing to measure)"


def test_empty_unfinished_log():
    out = measure([""])
    assert out.excluded.startswith("truncated:")
    assert "there are no TimeHistory lines" in out.excluded


def test_no_interval_inside_the_window():
    out = measure(kit.run_lines([10]))  # finished after 0-100
    assert out.excluded == ("no TimeHistory interval inside steps [100, 600] "
                            "(intervals found: 0-100)")


@pytest.mark.parametrize("method", ["mean", "time"])
def test_both_methods_share_the_exclusion_rules(method):
    truncated = kit.run_lines([10, 20, 20], finished=False)
    crashed = kit.run_lines([10, 20], finished=False, exception="OSError: x")
    assert measure(truncated, method=method).excluded.startswith("truncated")
    assert measure(crashed, method=method).excluded.startswith("crashed")


# ---- malformed lines --------------------------------------------------------

def _with_line(index, text, speeds=(10, 20, 20, 20, 20, 20)):
    lines = kit.run_lines(list(speeds))
    lines[index] = text
    return lines


def test_garbage_number_inside_the_window_excludes_the_run():
    lines = _with_line(4, th(200, 300, float("nan")).replace("nan", "n/a"))
    out = measure(lines)
    assert out.excluded.startswith("malformed TimeHistory line 5: ")
    assert "'n/a' is not a number" in out.excluded


def test_garbage_outside_the_window_only_warns():
    # first interval (0-100) unreadable; counted 100-600 are all 20
    lines = _with_line(2, th(0, 100, 1).replace("1.00 examples", "x examples"))
    out = measure(lines)
    assert out.ok and out.speed == pytest.approx(20.0)
    assert any("outside the counted window ignored: line 3" in w
               for w in out.warnings)


def test_unreadable_steps_exclude_the_run():
    out = measure(_with_line(2, "TimeHistory: corrupted"))
    assert out.excluded.startswith(
        "malformed TimeHistory line 3: not in the format")


def test_steps_going_backward_exclude_the_run():
    # two workers logging into one file: every interval twice
    lines = kit.run_lines([10, 20, 20, 20, 20, 20])
    body = lines[2:-1]
    out = measure(lines[:2] + body + body + lines[-1:])
    assert out.excluded.startswith(
        "steps go backward: interval 0-100 (line 9)")


def test_missing_interval_warns_and_averages_the_rest():
    lines = _with_line(5, "", speeds=(10, 20, 30, 40, 50, 60))  # drop 300-400
    out = measure(lines)
    assert out.speed == pytest.approx((20 + 30 + 50 + 60) / 4)
    assert "no interval between steps 300 and 400" in out.warnings


# ---- time method -----------------------------------------------------------

def _timed(stamps, eps=999.0, seconds=40.0):
    """Lines for intervals k*100-(k+1)*100 ending at the given clock stamps."""
    return [th(k * 100, k * 100 + 100, eps, seconds, stamp)
            for k, stamp in enumerate(stamps)] + [FINISH]


RUN_1N2G = RunId(1, 2, 64, "fp16", 1)  # global batch 128


def test_time_method_by_hand():
    # counted 100-600: from the 0-100 line (12:00:50) to the 500-600 line
    # (12:04:10) = 200 s for 500 steps of 128 images: 320 images/s.
    # The printed examples/second (999) must not matter.
    stamps = ["I1121 12:00:50.000000 1 a.py:1] ",
              "I1121 12:01:30.000000 1 a.py:1] ",
              "I1121 12:02:10.000000 1 a.py:1] ",
              "I1121 12:02:50.000000 1 a.py:1] ",
              "I1121 12:03:30.000000 1 a.py:1] ",
              "I1121 12:04:10.000000 1 a.py:1] ",
              "I1121 12:04:50.000000 1 a.py:1] "]
    out = measure(_timed(stamps), run=RUN_1N2G, method="time")
    assert out.ok and out.speed == pytest.approx(320.0)
    assert measure(_timed(stamps), run=RUN_1N2G).speed == pytest.approx(999.0)


def test_time_method_without_a_line_before_the_window():
    # warm-up 0: start = first line (12:00:50) minus its 50.00 s = 12:00:00;
    # end 12:02:10; 300 steps x 128 / 130 s
    stamps = ["I1121 12:00:50.000000 1 a.py:1] ",
              "I1121 12:01:30.000000 1 a.py:1] ",
              "I1121 12:02:10.000000 1 a.py:1] "]
    out = measure(_timed(stamps, seconds=50.0), run=RUN_1N2G, method="time",
                  warmup_batches=0, train_batches=300)
    assert out.speed == pytest.approx(128 * 300 / 130.0)


@pytest.mark.parametrize("stamps", [
    ["I1121 23:59:00.000000 1 a.py:1] ", "I1121 23:59:40.000000 1 a.py:1] ",
     "I1122 00:00:20.000000 1 a.py:1] ", "I1122 00:01:00.000000 1 a.py:1] ",
     "I1122 00:01:40.000000 1 a.py:1] ", "I1122 00:02:20.000000 1 a.py:1] "],
    ["23:59:00 ", "23:59:40 ", "00:00:20 ", "00:01:00 ", "00:01:40 ",
     "00:02:20 "],
    ["I1231 23:59:00.000000 1 a.py:1] ", "I1231 23:59:40.000000 1 a.py:1] ",
     "I0101 00:00:20.000000 1 a.py:1] ", "I0101 00:01:00.000000 1 a.py:1] ",
     "I0101 00:01:40.000000 1 a.py:1] ", "I0101 00:02:20.000000 1 a.py:1] "],
], ids=["absl-date", "time-only", "new-year"])
def test_time_method_across_midnight(stamps):
    # 23:59:00 -> 00:02:20 is 200 s: 500 steps x 128 / 200 s = 320
    out = measure(_timed(stamps), run=RUN_1N2G, method="time")
    assert out.ok and out.speed == pytest.approx(320.0)


def test_time_method_needs_timestamps():
    out = measure(_timed([""] * 6), method="time")
    assert out.excluded.startswith("no clock time on TimeHistory line 2")
    assert "--method time" in out.excluded


def test_time_method_rejects_a_clock_going_backward():
    stamps = (["I1025 02:30:00.000000 1 a.py:1] "] * 5
              + ["I1025 02:10:00.000000 1 a.py:1] "])
    out = measure(_timed(stamps), method="time")
    assert out.excluded.startswith(
        "clock time does not increase from line 1 to line 6")


def test_time_method_uses_global_batch_from_result_json():
    stamps = ["I1121 12:00:%02d.000000 1 a.py:1] " % (10 * k)
              for k in range(6)]
    rj = result_json.RunResultFile("x.json", [], global_batch_size=256,
                                   num_replicas=2)
    out = measure(_timed(stamps), run=RUN_1N2G, run_json=rj, method="time")
    # 500 steps x 256 / 50 s (12:00:00 -> 12:00:50)
    assert out.speed == pytest.approx(2560.0)
    assert out.source == "log"  # clock times exist only in the log
    assert any("global_batch_size=256" in w and "2 = 128" in w
               for w in out.warnings)


def test_unknown_method_is_an_error():
    with pytest.raises(ValueError, match="mean, time"):
        measure(kit.run_lines([1]), method="median")


# ---- the trainer's result JSON ----------------------------------------------

SPEEDS_JSON = [100.0, 300.004, 310.0, 320.0, 330.0, 340.001]


def _json_for(speeds, global_batch=128, replicas=1, **env):
    data = kit.result_json([(k * 100, k * 100 + 100, e)
                            for k, e in enumerate(speeds)],
                           global_batch, replicas, kit.environment(
                               num_replicas=replicas, **env))
    return result_json._parse("x.json", data)


def test_mean_prefers_unrounded_json_intervals():
    out = measure(kit.run_lines(SPEEDS_JSON), run_json=_json_for(SPEEDS_JSON))
    assert out.source == "result_json"
    assert out.speed == pytest.approx(
        (300.004 + 310 + 320 + 330 + 340.001) / 5, abs=1e-9)
    assert out.warnings == []  # log agrees within its 2-decimal rounding
    assert out.environment["tensorflow"] == "2.21.0"


def test_json_and_log_disagreeing_is_reported():
    other = list(SPEEDS_JSON)
    other[3] = 999.0
    out = measure(kit.run_lines(SPEEDS_JSON), run_json=_json_for(other))
    assert any("disagree in 1 interval(s)" in w and "steps 300-400" in w
               for w in out.warnings)


def test_json_contradicting_directory_and_name_warns():
    out = measure(kit.run_lines(SPEEDS_JSON),
                  run_json=_json_for(SPEEDS_JSON, 256, 2, dtype="fp16"))
    text = " | ".join(out.warnings)
    assert "num_replicas=2 but directory 1n1g means 1 devices" in text
    assert "dtype fp16, file name says fp32" in text
    assert out.global_batch_size == 256


def test_trainer_warnings_in_the_json_are_passed_on():
    data = kit.result_json([(k * 100, k * 100 + 100, e)
                            for k, e in enumerate(SPEEDS_JSON)], 128, 1)
    data["warnings"] = ["loss is nan at step 200 (non-finite from a step in "
                        "101-200; ...); training went on"]
    out = measure(kit.run_lines(SPEEDS_JSON),
                  run_json=result_json._parse("x.json", data))
    assert out.ok  # a throughput-only run still counts, but says so
    assert out.warnings == ["trainer: loss is nan at step 200 (non-finite "
                            "from a step in 101-200; ...); training went on"]
    data["warnings"] = "nan"
    with pytest.raises(result_json._Invalid, match="warnings is not a list"):
        result_json._parse("x.json", data)


def test_json_without_intervals_falls_back_to_the_log():
    empty = result_json.RunResultFile("x.json", [], global_batch_size=128)
    out = measure(kit.run_lines([10, 20, 20, 20, 20, 20]), run_json=empty)
    assert out.source == "log" and out.speed == pytest.approx(20.0)
    assert "result JSON has no intervals; using the log lines" in out.warnings


@pytest.mark.parametrize("spelling", ["fp32", "float32"])
def test_tensorflow_dtype_spelling_matches_the_file_name(spelling):
    out = measure(kit.run_lines(SPEEDS_JSON),
                  run_json=_json_for(SPEEDS_JSON, dtype=spelling))
    assert out.warnings == []
    out = measure(kit.run_lines(SPEEDS_JSON),
                  run_json=_json_for(SPEEDS_JSON, dtype="mixed_bfloat16"))
    assert out.warnings == ["result JSON says dtype bf16, file name says fp32"]


def test_crashed_log_is_excluded_even_with_json():
    lines = kit.run_lines([10, 20], finished=False, exception="OSError: x")
    out = measure(lines, run_json=_json_for(SPEEDS_JSON))
    assert out.excluded.startswith("crashed")


def test_load_run_json_variants(tmp_path):
    path = str(tmp_path / "r.json")
    assert result_json.load_run_json(path) == (None, None)
    good = kit.result_json([(0, 100, 5.0)], 8, 1)
    kit.write_json(path, good)
    loaded, warning = result_json.load_run_json(path)
    assert warning is None and loaded.global_batch_size == 8
    assert (loaded.intervals[0].examples_per_second == 5.0
            and loaded.dtype == "fp32")
    bad_cases = {
        '{"schema": "official_bench.result/1", "stats": {"intervals": [}':
            "unusable result JSON",
        '[1, 2]': "top level is not an object",
        '{"schema": "other/2", "stats": {}}': "schema is 'other/2'",
        '{"schema": "official_bench.result/1"}': "stats is missing",
        '{"schema": "official_bench.result/1", "stats": {"intervals": '
        '[{"start_step": 0, "end_step": 100, "seconds": 1, '
        '"examples_per_second": NaN}]}}': "examples_per_second is nan",
        '{"schema": "official_bench.result/1", "stats": {"intervals": '
        '[{"start_step": true, "end_step": 100, "seconds": 1, '
        '"examples_per_second": 1}]}}': "start_step=True",
        '{"schema": "official_bench.result/1", "stats": {"intervals": [], '
        '"global_batch_size": 0}}': "global_batch_size is 0",
    }
    for text, expected in bad_cases.items():
        kit.write_json(path, text)
        loaded, warning = result_json.load_run_json(path)
        assert loaded is None, text
        assert (path in warning and expected in warning
                and "using the log" in warning)


# ---- per-case statistics ----------------------------------------------------

def outcome(case, index, speed, dtype="fp32", batch=128, excluded=None,
            env=None):
    nodes, gpus = log_tree.parse_case_name(case)
    run = RunId(nodes, gpus, batch, dtype, index)
    return speeds.RunOutcome(run, "x.log", speed=speed, excluded=excluded,
                               counted_steps=(100, 600), num_intervals=5,
                               global_batch_size=batch * nodes * gpus,
                               environment=env)


def test_case_statistics_by_hand():
    outcomes = [outcome("1n1g", 1, 300.0), outcome("1n1g", 2, 320.0),
                outcome("1n1g", 3, 310.0), outcome("1n8g", 1, 2400.0),
                outcome("1n8g", 2, 2500.0), outcome("2n8g", 1, 4800.0),
                outcome("2n8g", 2, None, excluded="truncated: x")]
    result, warnings = cases.summarize(outcomes, spread_warn=50)
    assert list(result) == ["rn50"] and warnings == []
    r = result["rn50"]
    assert list(r) == ["1n1g", "1n8g", "2n8g"]
    one = r["1n1g"]
    assert (one["average_speed"], one["median_speed"], one["speedup"],
            one["batch_size_per_device"]) == (310.0, 310.0, 1.0, 128)
    assert one["runs"] == [300.0, 320.0, 310.0]  # run order
    assert (one["min"], one["max"], one["std"], one["cv"]) == (300.0, 320.0,
                                                               10.0, 0.0323)
    eight = r["1n8g"]
    # 2450 / 310 = 7.9032; / 8 devices = 0.98790
    assert (eight["median_speed"], eight["speedup"], eight["efficiency"]) == \
        (2450.0, 7.9, 0.9879)
    assert (eight["std"], eight["cv"], eight["per_device_speed"]) == \
        (70.71, 0.0289, 306.25)  # stdev(2400, 2500) = 70.711; / 2450
    two = r["2n8g"]
    # 4800 / 310 = 15.4839; / 16 = 0.96774
    assert (two["speedup"], two["efficiency"], two["per_device_speed"]) == \
        (15.48, 0.9677, 300.0)
    assert two["std"] is None and two["cv"] is None and two["num_runs"] == 1
    assert two["excluded"] == [{"log": "rn50_b128_fp32_2.log", "index": 2,
                                "reason": "truncated: x"}]
    assert two["num_nodes"] == 2 and two["num_gpus_per_node"] == 8
    assert two["num_devices"] == 16 and two["global_batch_size"] == 2048
    assert all(e["speedup_baseline"] == "1n1g" for e in r.values())


def test_no_1n1g_uses_the_smallest_case_and_says_so():
    outcomes = [outcome("2n4g", 1, 2000.0), outcome("1n2g", 1, 600.0),
                outcome("1n4g", 1, 1100.0)]
    result, warnings = cases.summarize(outcomes)
    r = result["rn50"]
    assert list(r) == ["1n2g", "1n4g", "2n4g"]
    assert {e["speedup_baseline"] for e in r.values()} == {"1n2g"}
    # 1100/600 = 1.8333 over 4/2 devices; 2000/600 = 3.3333 over 8/2
    assert (r["1n4g"]["speedup"], r["1n4g"]["efficiency"]) == (1.83, 0.9167)
    assert (r["2n4g"]["speedup"], r["2n4g"]["efficiency"]) == (3.33, 0.8333)
    assert r["1n2g"]["speedup"] == 1.0
    assert warnings == ["rn50: 1n1g is not among the cases; speedup is "
                        "against 1n2g"]
    assert r["1n2g"]["warnings"] == warnings


def test_1n1g_with_only_excluded_runs():
    outcomes = [outcome("1n1g", 1, None, excluded="crashed: y"),
                outcome("1n2g", 1, 600.0), outcome("1n4g", 1, 1200.0)]
    result, warnings = cases.summarize(outcomes)
    r = result["rn50"]
    assert r["1n1g"]["median_speed"] is None and r["1n1g"]["speedup"] is None
    assert r["1n1g"]["warnings"] == ["rn50 1n1g: all 1 run(s) excluded"]
    assert (r["1n4g"]["speedup"] == 2.0
            and r["1n4g"]["speedup_baseline"] == "1n2g")
    assert "rn50: 1n1g has no usable run; speedup is against 1n2g" in warnings


def test_spread_warning_threshold():
    # stdev(100, 130) = 21.213, mean 115: CV 18.45 %
    outcomes = [outcome("1n1g", 1, 100.0), outcome("1n1g", 2, 130.0)]
    result, warnings = cases.summarize(outcomes, spread_warn=5)
    assert result["rn50"]["1n1g"]["cv"] == 0.1845
    assert warnings == ["rn50 1n1g: runs disagree: CV 18.45% > "
                        "--spread_warn 5% (speeds 100.00, 130.00)"]
    assert cases.summarize(outcomes, spread_warn=20)[1] == []


@pytest.mark.parametrize("groups,keys", [
    ([("fp16", 256)], ["rn50"]),
    ([("fp16", 256), ("fp32", 256)], ["rn50_fp32", "rn50_fp16"]),
    ([("bf16", 128), ("fp32", 128), ("fp16", 128)],
     ["rn50_fp32", "rn50_fp16", "rn50_bf16"]),
    ([("fp32", 256), ("fp32", 128)], ["rn50_b128_fp32", "rn50_b256_fp32"]),
])
def test_model_keys_keep_dtypes_and_batches_apart(groups, keys):
    outcomes = [outcome("1n1g", 1, 100.0, dtype=d, batch=b) for d, b in groups]
    result, _ = cases.summarize(outcomes)
    assert list(result) == keys
    for key, entry in ((k, v["1n1g"]) for k, v in result.items()):
        assert key == "rn50" or entry["dtype"] in key


def test_mixed_dtypes_have_their_own_baselines():
    outcomes = [outcome("1n1g", 1, 300.0), outcome("1n8g", 1, 2400.0),
                outcome("1n1g", 1, 1000.0, dtype="fp16"),
                outcome("1n8g", 1, 6000.0, dtype="fp16")]
    result, _ = cases.summarize(outcomes)
    assert result["rn50_fp32"]["1n8g"]["speedup"] == 8.0
    assert result["rn50_fp16"]["1n8g"]["speedup"] == 6.0


def test_multi_digit_cases_sort_by_devices():
    outcomes = [outcome(c, 1, float(log_tree.parse_case_name(c)[0]
                                    * log_tree.parse_case_name(c)[1]) * 100)
                for c in ("10n8g", "2n8g", "1n16g", "1n1g", "12n1g")]
    r = cases.summarize(outcomes)[0]["rn50"]
    assert list(r) == ["1n1g", "12n1g", "1n16g", "2n8g", "10n8g"]
    assert r["10n8g"]["speedup"] == 80.0 and r["10n8g"]["efficiency"] == 1.0


def test_environment_differences_are_reported():
    env_a = kit.environment(hostname="a")
    env_b = kit.environment(hostname="b")
    env_c = kit.environment(hostname="c", tensorflow="2.18.1")
    same = cases.summarize([outcome("1n1g", 1, 1.0, env=env_a),
                            outcome("1n1g", 2, 1.0, env=env_b)])
    assert same[1] == [] and same[0]["rn50"]["1n1g"]["environment"] == env_a
    differ = cases.summarize([outcome("1n1g", 1, 1.0, env=env_a),
                              outcome("1n1g", 2, 1.0, env=env_c)])
    assert differ[1] == ["rn50 1n1g: runs report different environments "
                         "(tensorflow)"]


def test_no_environment_key_without_result_json():
    r = cases.summarize([outcome("1n1g", 1, 1.0)])[0]["rn50"]["1n1g"]
    assert "environment" not in r and "warnings" not in r

