"""launch/sweep_report.py: the sweep's closing lines never show a failed
run's img/s, even when it logged TimeHistory intervals before failing
(a stand-in trainer, a real process, no TensorFlow)."""

from official_bench.contracts import exit_status as es
from official_bench.launch.runner import Runner
from support.launch_stand_in import two_launchers


def test_a_run_that_failed_after_logging_rates_shows_no_img_s(plan_of,
                                                              capsys):
    plan = plan_of("rate_then_fail")
    runner = Runner(plan)
    assert runner.run_all() == es.FAILED
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "1n1g run 1:" in ln]
    assert any("FAILED" in ln for ln in lines), out
    summary = out.split("done:")[1]
    # the summary keeps why, as the run's own line does
    assert "1n1g run 1: failed (exit " in summary, out
    assert "img/s" not in summary, out


def test_an_ok_run_keeps_its_img_s_in_the_summary(plan_of, capsys):
    assert Runner(plan_of("rate_then_ok")).run_all() == es.OK
    summary = capsys.readouterr().out.split("done:")[1]
    assert "1n1g run 1: ok, 10.0 img/s (median of 2 intervals" in summary


def test_a_run_that_failed_on_another_node_shows_no_img_s(tmp_path, capsys):
    """Node 0's trainer logs rates and ends ok, node 1's fails: node 0's
    lines show no img/s for that run (two launchers meeting through a real
    barrier on 127.0.0.1, each a thread here)."""
    results, _ = two_launchers(tmp_path, ("rate_then_ok", "fail"))
    assert results == {0: es.FAILED, 1: es.FAILED}
    out = capsys.readouterr().out
    mine = [ln for ln in out.splitlines()
            if ln.startswith("[launch node 0/2]") and "run 1:" in ln]
    assert any("2n1g run 1: this node: ok" in ln for ln in mine), out
    assert not any("img/s" in ln for ln in mine), mine


def test_the_extract_line_keeps_backends_apart(plan_of, capsys):
    """A JAX sweep's extract line writes under result/jax, so it does not
    replace the TensorFlow sweep's result/bz4_result.* (same batch, same
    name); a TensorFlow sweep's keeps DLPerf's ./result."""
    import shlex
    for backend, expected in (("jax", ["--output_dir", "result/jax"]),
                              ("tensorflow", [])):
        assert Runner(plan_of("rate_then_ok", backend=backend)).run_all() \
            == es.OK
        line = [ln for ln in capsys.readouterr().out.splitlines()
                if "extract: " in ln][-1]
        argv = shlex.split(line.split("extract: ", 1)[1])
        given = argv[argv.index("--output_dir"):][:2] \
            if "--output_dir" in argv else []
        assert given == expected, (backend, argv)
        assert f"/{backend}/resnet50/bz4" in argv[argv.index("--log_dir") + 1]


def test_an_allreduce_sweeps_extract_line_takes_the_trees_window(plan_of,
                                                                  capsys):
    """BENCH=allreduce runs log no TimeHistory intervals: the line said to
    run more steps and gave no window flags, so the command it printed
    exited 1 on the tree's own training runs; it gives --window auto."""
    import shlex
    plan = plan_of("allreduce_ok", bench="allreduce")
    assert Runner(plan).run_all() == es.OK
    line = [ln for ln in capsys.readouterr().out.splitlines()
            if "extract: " in ln][-1]
    assert "run more steps" not in line, line
    argv = shlex.split(line.split("extract: ", 1)[1].split("  (")[0])
    assert argv[argv.index("--window") + 1] == "auto", argv
