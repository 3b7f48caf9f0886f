"""The TimeHistory line contract: byte-exact text, DLPerf's regex, our
extractor's regex, one Interval type and one timeout-line builder."""

from official_bench.contracts import throughput as T
from official_bench.extract import logparse
from official_bench.runtime import watchdog


def test_line_is_byte_identical_and_both_regexes_read_it():
    line = T.format_line(T.Interval(100, 200, 12.3456, 2073.599))
    assert line == ("TimeHistory: 12.35 seconds, 2073.60 examples/second "
                    "between steps 100 and 200")
    logged = "I1121 23:59:40.123456 1 callbacks.py:88] " + line + "\n"
    assert T.DLPERF_KEYWORD in logged
    assert T.DLPERF_RATE_RE.search(logged).group(1) == "2073.60"
    m = T.LINE_RE.search(logged)
    assert (m.group("seconds"), m.group("eps"), m.group("start"),
            m.group("end")) == ("12.35", "2073.60", "100", "200")
    assert logged.index(T.THROUGHPUT_MARK) == logged.index("TimeHistory:")


def test_extractor_interval_extends_the_contract_interval():
    got = logparse.parse_throughput_line(
        "I1121 23:59:40.123456 1 x.py:1] " + T.format_line(
            T.Interval(0, 10, 1.0, 80.0)), 7)
    assert isinstance(got, T.Interval)
    assert (got.start_step, got.end_step, got.seconds,
            got.examples_per_second, got.line_no) == (0, 10, 1.0, 80.0, 7)


def test_one_timeout_line_builder():
    msg = T.timeout_message("worker 1", 60.4, ["worker 0 at h:1", "chief at "
                            "[::1]:2"], " for the cluster")
    assert msg == ("official_bench: timeout: worker 1 waited 60 s "
                   "(runtime.peer_timeout_seconds) for the cluster; not "
                   "reachable: worker 0 at h:1; chief at [::1]:2")
    assert msg.startswith(T.TIMEOUT_MARK)
    assert watchdog.timeout_message("worker 0", 5, []).startswith(
        "official_bench: timeout: worker 0 waited 5 s "
        "(runtime.peer_timeout_seconds) for the cluster to start; not "
        "reachable: none: every peer's port answers")
