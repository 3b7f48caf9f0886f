"""launch/sweep_report.py: the sweep's closing lines never show a failed
run's img/s, even when it logged TimeHistory intervals before failing
(a stand-in trainer, a real process, no TensorFlow)."""

from official_bench.contracts import exit_status as es
from official_bench.launch.runner import Runner


def test_a_run_that_failed_after_logging_rates_shows_no_img_s(plan_of,
                                                              capsys):
    plan = plan_of("rate_then_fail")
    runner = Runner(plan)
    assert runner.run_all() == es.FAILED
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "1n1g run 1:" in ln]
    assert any("FAILED" in ln for ln in lines), out
    assert any(ln.strip().endswith("1n1g run 1: failed") for ln in lines), out
    assert "img/s" not in out.split("done:")[1], out


def test_an_ok_run_keeps_its_img_s_in_the_summary(plan_of, capsys):
    assert Runner(plan_of("rate_then_ok")).run_all() == es.OK
    summary = capsys.readouterr().out.split("done:")[1]
    assert "1n1g run 1: ok, 10.0 img/s (median of 2 intervals" in summary
