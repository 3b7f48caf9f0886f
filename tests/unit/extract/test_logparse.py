"""Log naming and log-line parsing of the results extractor."""

import os
import re

import pytest

from official_bench.contracts.throughput import ReadInterval  # noqa: E402
from official_bench.extract import logparse  # noqa: E402
from official_bench.extract.logparse import MalformedLine  # noqa: E402
from support import logkit as kit

DLPERF_RE = re.compile(r", (\d+.\d+) examples/second ")


def test_find_logs_orders_and_reports_misnamed(tmp_path):
    for case in ("10n8g", "2n8g", "1n1g", "1n16g"):
        kit.write_run(tmp_path, case, [100, 200])
    kit.write_run(tmp_path, "1n1g", [100, 200], index=2)
    kit.write_lines(str(tmp_path / "old" / "rn50_b128_fp32_1.log"), ["x"])
    kit.write_lines(str(tmp_path / "1n1g" / "debug.log"), ["x"])
    runs, skipped = logparse.find_logs(str(tmp_path))
    assert [(r.case, r.index) for r, _ in runs] == [
        ("1n1g", 1), ("1n1g", 2), ("1n16g", 1), ("2n8g", 1), ("10n8g", 1)]
    assert runs[-1][0].num_devices == 80
    reasons = {os.path.basename(os.path.dirname(p)) + "/"
               + os.path.basename(p): r
               for p, r in skipped}
    assert set(reasons) == {"old/rn50_b128_fp32_1.log", "1n1g/debug.log"}
    assert "'old' is not named {N}n{G}g" in reasons["old/rn50_b128_fp32_1.log"]
    assert "rn50_b{B}_{fp32|fp16|bf16}_{i}.log" in reasons["1n1g/debug.log"]


def test_contract_line_parses_and_stays_dlperf_compatible():
    line = kit.throughput_line(100, 200, 1075.27, 23.81, kit.BASE_TIME)
    iv = logparse.parse_throughput_line(line, 7)
    assert (iv.start_step, iv.end_step, iv.seconds, iv.examples_per_second,
            iv.line_no) == (100, 200, 23.81, 1075.27, 7)
    assert iv.clock == "absl"
    # DLPerf's own regex reads the same number from the same line.
    assert float(DLPERF_RE.search(line + "\n").group(1)) == 1075.27


@pytest.mark.parametrize("text,problem", [
    ("TimeHistory: abc seconds, 256.00 examples/second "
     "between steps 0 and 100",
     "seconds 'abc' is not a number"),
    ("TimeHistory: 1.00 seconds, nan examples/second between steps 0 and 100",
     "examples/second 'nan' is not a finite"),
    ("TimeHistory: 1.00 seconds, inf examples/second between steps 0 and 100",
     "examples/second 'inf' is not a finite"),
    ("TimeHistory: 1.00 seconds, -5.00 examples/second "
     "between steps 0 and 100",
     "examples/second '-5.00' is not a finite non-negative"),
    ("TimeHistory: 1.00 seconds, 1.2.3 examples/second "
     "between steps 0 and 100",
     "examples/second '1.2.3' is not a number"),
    ("TimeHistory: 1.00 seconds, 5.00 examples/second "
     "between steps 0 and 1OO",
     "end step '1OO' is not a number"),
    ("TimeHistory: 1.00 seconds, 5.00 examples/second "
     "between steps 200 and 100",
     "end step 100 is not after start step 200"),
    ("TimeHistory: 12.3", "not in the format"),
])
def test_garbage_throughput_lines_are_malformed(text, problem):
    bad = logparse.parse_throughput_line(
        kit.absl_prefix(kit.BASE_TIME) + text, 3)
    assert isinstance(bad, MalformedLine)
    assert problem in bad.problem
    assert bad.describe().startswith("line 3: ")


def test_malformed_line_keeps_steps_when_readable():
    bad = logparse.parse_throughput_line(
        "TimeHistory: 1.00 seconds, x examples/second between steps 0 and 100")
    assert bad.steps == (0, 100)
    assert logparse.parse_throughput_line("TimeHistory: 12.3").steps is None


def test_timestamp_found_after_launcher_prefix_and_progress_bar():
    when = kit.BASE_TIME
    plain = logparse.parse_throughput_line(
        kit.throughput_line(0, 100, 5, 1, when))
    noisy = logparse.parse_throughput_line(
        "[1,0]<stderr>: 10/600 [>...] - loss: 1.2" +
        kit.throughput_line(0, 100, 5, 1, when))
    assert isinstance(noisy, ReadInterval)
    assert noisy.timestamp == plain.timestamp is not None


def _times(stamps):
    """Clock seconds of TimeHistory lines carrying the given prefixes."""
    lines = [p + "TimeHistory: 1.00 seconds, 5.00 examples/second between "
             "steps %d and %d" % (k * 10, k * 10 + 10)
             for k, p in enumerate(stamps)]
    return [iv.timestamp for iv in logparse.parse_log_lines(lines).intervals]


def test_absl_clock_crosses_midnight_and_new_year():
    t = _times(["I1121 23:59:50.000000 1 a.py:1] ",
                "I1122 00:00:10.500000 1 a.py:1] "])
    assert t[1] - t[0] == pytest.approx(20.5)
    t = _times(["I1231 23:59:50.000000 1 a.py:1] ",
                "I0101 00:00:10.000000 1 a.py:1] ",
                "I0101 00:01:10.000000 1 a.py:1] "])
    assert [b - a for a, b in zip(t, t[1:])] == pytest.approx([20.0, 60.0])


def test_absl_clock_handles_leap_day():
    t = _times(["I0228 23:59:00.000000 1 a.py:1] ",
                "I0229 00:01:00.000000 1 a.py:1] "])
    assert t[1] - t[0] == pytest.approx(120.0)


def test_time_only_clock_adds_a_day_at_midnight():
    t = _times(["23:59:30 ", "00:00:30 ", "00:01:30.250 "])
    assert [b - a for a, b in zip(t, t[1:])] == pytest.approx([60.0, 60.25])


def test_small_backward_step_is_not_taken_for_midnight():
    # A DST change (02:30 -> 02:10) must not stretch the run by a day.
    t = _times(["I1025 02:30:00.000000 1 a.py:1] ",
                "I1025 02:10:00.000000 1 a.py:1] "])
    assert t[1] - t[0] == pytest.approx(-1200.0)


def test_full_date_clock():
    t = _times(["2020-12-31 23:59:59.5 ", "2021-01-01 00:00:01,5 "])
    assert t[1] - t[0] == pytest.approx(2.0)


def test_line_without_timestamp_has_none():
    iv = logparse.parse_throughput_line(kit.throughput_line(0, 100, 5, 1))
    assert iv.timestamp is None and iv.clock is None


def test_finish_marker_traceback_and_exception():
    lines = kit.run_lines([100, 200], finished=False, exception=(
        "ValueError: bad input"))
    parsed = logparse.parse_log_lines(lines)
    assert not parsed.finished
    assert lines[parsed.traceback_line - 1].startswith("Traceback")
    assert parsed.exception == "ValueError: bad input"
    assert len(parsed.intervals) == 2 and parsed.malformed == []
    assert logparse.parse_log_lines(kit.run_lines([100])).finished


def test_chained_traceback_reports_last_exception():
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1',
             "KeyError: 'x'", "", "During handling of the above exception, "
             "another exception occurred:", "",
             "Traceback (most recent call last):", '  File "b.py", line 2',
             "I1121 12:00:00.000000 1 a.py:1] shutting down",
             "RuntimeError: worker 1 lost"]
    parsed = logparse.parse_log_lines(lines)
    assert parsed.traceback_line == 1
    assert parsed.exception == "RuntimeError: worker 1 lost"


def test_traceback_cut_before_exception_line():
    parsed = logparse.parse_log_lines(["Traceback (most recent call last):",
                                       '  File "a.py", line 1'])
    assert parsed.traceback_line == 1 and parsed.exception is None


def test_parse_log_file_survives_undecodable_bytes(tmp_path):
    path = tmp_path / "x.log"
    line = kit.throughput_line(0, 100, 256, 50, kit.BASE_TIME)
    path.write_bytes(b"\xff\xfe garbage\n" + line.encode() + b"\n\xe2\x82")
    parsed = logparse.parse_log_file(str(path))
    assert [iv.examples_per_second for iv in parsed.intervals] == [256.0]
    assert parsed.path == str(path)
