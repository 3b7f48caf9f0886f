"""The run history: the SQLite store (contracts/history_db.py) under
concurrent writers and with files it did not make, official-bench-history
(list, latest against earlier, exit status, plot, import), and the trainer's
write (real processes)."""

import json
import os
import random
import sqlite3
import subprocess
import sys

import pytest

from official_bench.contracts import exit_status, history_db
from official_bench.contracts.history_row import row_from_result
from support import logkit
from support.helpers import (
    REPO,
    TINY_OVERRIDE,
    child_env,
    cli_env,
    importable_name,
    trainer_cmd,
)

SETUP = "1n1g b8 fp32 resnet_cifar8 16px"
# _fill's rows: 5 intervals after a warm-up of 10, written from /tmp/x.
CASE = SETUP + ", tensorflow, steps 10-60, /tmp/x"


def _result(rates, warmup=10):
    """A result.json dict: a warm-up interval, then ``rates``."""
    return logkit.history_result(rates, warmup, model_dir="/tmp/x")


def _row(rates, when):
    return row_from_result(_result(rates), "trainer", "/tmp/x", when)


def _history(*args):
    return subprocess.run(
        [sys.executable, "-m", "official_bench.judge.history", *args],
        cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=300)


def _fill(db, means, spread=0.01, seed=0):
    rng = random.Random(seed)
    rows = [_row([rng.gauss(m, m * spread) for _ in range(5)], 1e9 + k * 3600)
            for k, m in enumerate(means)]
    assert history_db.append(db, rows) == len(rows)
    return rows


def test_row_from_result_and_duplicates(tmp_path):
    db = str(tmp_path / "h.sqlite")
    row = _row([100.0, 102.0, 98.0], 1e9)
    assert row.case_label == SETUP + ", tensorflow, steps 10-40, /tmp/x"
    assert row.mean_rate == pytest.approx(100.0)
    assert row.num_intervals == 3 and row.interval_rates == [100.0, 102.0,
                                                             98.0]
    assert row.images_per_second_over_window < 100.0  # harmonic, not larger
    assert history_db.append(db, [row]) == 1
    assert history_db.append(db, [row]) == 0  # the same run, stored once
    (back,) = history_db.read_rows(db)
    assert back.id == 1 and back.config_digest == row.config_digest
    conn = sqlite3.connect(db)
    # A rollback journal: no -wal/-shm files beside the history.
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert sorted(os.listdir(tmp_path)) == ["h.sqlite"]
    assert conn.execute("PRAGMA application_id").fetchone()[0] == \
        history_db.APPLICATION_ID
    conn.close()


_WRITER = """
import sys
from official_bench.contracts import history_db
from {module} import _row
db, writer = sys.argv[1], int(sys.argv[2])
for k in range(25):
    if writer < 0:  # a reader: a sound file read mid-commit stays sound
        try:
            history_db.read_rows(db)
        except history_db.HistoryError as e:
            assert "no run history at" in str(e), e
    else:
        history_db.append(db, [_row([100.0 + writer, 100.0 + k], 1e9 + k)])
"""


def test_concurrent_writers_lose_no_row(tmp_path):
    """Four processes append 25 rows each, one transaction per row, all at
    once on a file none of them created first, while two others read it."""
    db = str(tmp_path / "h.sqlite")
    code = _WRITER.format(module=importable_name(__file__))
    procs = [subprocess.Popen([sys.executable, "-c", code, db, str(w)],
                              cwd=REPO, env=child_env(),
                              stderr=subprocess.PIPE, text=True)
             for w in range(-2, 4)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert history_db.count(db) == 100
    assert len({r.run_key for r in history_db.read_rows(db)}) == 100


@pytest.mark.parametrize("kind", ["corrupt", "foreign", "truncated"])
def test_file_that_is_not_a_history_is_left_as_it_is(tmp_path, kind):
    db = tmp_path / "h.sqlite"
    if kind == "corrupt":
        db.write_bytes(b"this is no database\n" * 100)
    elif kind == "foreign":
        conn = sqlite3.connect(str(db))
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
        conn.commit()
        conn.close()
    else:
        _fill(str(db), [100.0])
        db.write_bytes(db.read_bytes()[:1000])
    before = db.read_bytes()
    out = _history("--db", str(db))
    assert out.returncode == exit_status.FAILED
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: run history "
                                                   + str(db)), out.stderr
    with pytest.raises(history_db.HistoryError, match=str(db)):
        history_db.append(str(db), [_row([1.0], 1e9)])
    out = _history("--db", str(db), "--import", str(tmp_path))
    assert out.returncode == exit_status.FAILED
    assert db.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["h.sqlite"]


def test_slow_down_exits_with_slower(tmp_path):
    db = str(tmp_path / "h.sqlite")
    _fill(db, [100.0] * 6 + [90.0])
    out = _history("--db", db)
    assert out.returncode == exit_status.SLOWER, out.stdout + out.stderr
    assert out.stdout.startswith(f"{CASE}: latest/earlier 0.9")
    assert "slower (1 vs 6 runs)" in out.stdout
    assert out.stderr == (f"error: slower than the earlier runs beyond their "
                          f"spread: {CASE}\n")


@pytest.mark.parametrize("intervals", [1, 2, 7])
def test_one_run_against_one_is_too_few_to_judge(tmp_path, intervals):
    """The second night: one earlier run, one latest: neither shows how
    much runs differ, so no interval and no "slower" (exit 0), however many
    intervals each counted. (Before, two intervals a run were judged and a
    40% drop exited 7; an A/A pair did too, on noise.) A second earlier
    run judges."""
    db = str(tmp_path / "h.sqlite")
    history_db.append(db, [_row([100.0] * intervals, 1e9),
                           _row([59.0] * (intervals - 1) + [60.0], 2e9)])
    out = _history("--db", db)
    assert out.returncode == exit_status.OK, out.stdout + out.stderr
    steps = f"10-{10 * (intervals + 1)}"
    ratio = (59.0 * (intervals - 1) + 60.0) / intervals / 100.0
    assert out.stdout.startswith(
        f"{SETUP}, tensorflow, steps {steps}, /tmp/x: latest/earlier "
        f"{ratio:.3f}, no interval: too few to judge (1 vs 1 runs): earlier "
        "and latest are one run each"), out.stdout
    assert out.stdout.rstrip().endswith("compare two or more runs a side")
    assert "[" not in out.stdout and out.stderr == ""
    history_db.append(db, [_row([100.5] * intervals, 0.5e9)])  # earlier
    out = _history("--db", db)
    assert out.returncode == exit_status.SLOWER, out.stdout + out.stderr
    assert "(1 vs 2 runs)" in out.stdout


def test_runs_that_counted_their_warm_up_are_named(tmp_path):
    """Runs too short for their warm-up steps count from step 0, the
    tracing in their first interval: a note names them (their own case)."""
    db = str(tmp_path / "h.sqlite")
    rows = []
    for k, rate in enumerate((100.0, 101.0)):
        data = _result([rate])
        data["stats"]["warmup_steps"] = 50  # more steps than the run had
        rows.append(row_from_result(data, "trainer", "/tmp/x", 1e9 + k))
    history_db.append(db, rows + [_row([100.0], 2e9)])
    out = _history("--db", db)
    assert out.returncode == exit_status.OK, out.stdout + out.stderr
    assert out.stderr == (
        f"note: {SETUP}, tensorflow, steps 0-20, /tmp/x: run(s) 1, 2 count "
        "from step 0, their warm-up (graph tracing) included (too short to "
        "leave it out, or a window from step 0): compared only with each "
        "other, and slower than a run that leaves its warm-up out\n")


def test_same_speed_passes_and_case_listing(tmp_path):
    db = str(tmp_path / "h.sqlite")
    _fill(db, [100.0] * 7)
    out = _history("--db", db, "--case", CASE)
    assert out.returncode == exit_status.OK, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"== {CASE}" and len(lines) == 2 + 7 + 1
    assert "no difference measurable at this spread" in lines[-1]
    out = _history("--db", db, "--case", SETUP)  # its windows and trees
    assert out.returncode == exit_status.OK, out.stderr
    assert out.stdout.splitlines()[0] == f"== {CASE}"
    out = _history("--db", db, "--case", "2n8g b8 fp32")
    assert out.returncode == exit_status.FAILED
    assert f"cases: {CASE}" in out.stderr
    out = _history("--db", str(tmp_path / "none.sqlite"))
    assert out.returncode == exit_status.FAILED
    assert "no run history at" in out.stderr
    assert not os.path.exists(tmp_path / "none.sqlite")


def test_plot_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    db = str(tmp_path / "h.sqlite")
    _fill(db, [100.0, 101.0, 99.0])
    png = tmp_path / "out" / "history.png"
    out = _history("--db", db, "--plot", str(png))
    assert out.returncode == exit_status.OK, out.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p for p in os.listdir(png.parent)] == ["history.png"]


def test_extractor_html_embeds_the_history(tmp_path):
    """`--history FILE` adds the history's plot to the extractor's page;
    a file that is not a history ends in one error line naming it."""
    pytest.importorskip("matplotlib")
    from official_bench.extract import extractor
    logs = tmp_path / "bz128"
    logkit.write_run(str(logs), "1n1g", [50.0] + [100.0] * 6)
    db = str(tmp_path / "h.sqlite")
    _fill(db, [100.0, 101.0, 99.0])
    out_dir = tmp_path / "result"
    assert extractor.main(["--log_dir", str(logs), "--output_dir",
                           str(out_dir), "--history", db]) == exit_status.OK
    page = (out_dir / "bz128_result.html").read_text()
    assert f"Run history ({db})" in page
    assert page.count("data:image/png;base64,") == 2
    without = tmp_path / "plain"
    assert extractor.main(["--log_dir", str(logs), "--output_dir",
                           str(without)]) == exit_status.OK
    assert "Run history" not in (without / "bz128_result.html").read_text()
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database\n")
    assert extractor.main(["--log_dir", str(logs), "--output_dir",
                           str(tmp_path / "bad"), "--history",
                           str(foreign)]) == exit_status.FAILED
    assert foreign.read_text() == "not a database\n"
    assert not (tmp_path / "bad").exists() or \
        not os.listdir(tmp_path / "bad")  # nothing half-written


def test_import_a_log_tree_once(tmp_path):
    logs = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz128"
    for k in range(3):
        logkit.write_run(str(logs), "1n1g", [50.0] + [100.0 + k] * 6,
                         index=k + 1)
    logkit.write_run(str(logs), "1n1g", [50.0, 100.0], index=4,
                     finished=False)  # truncated: left out
    db = str(tmp_path / "h.sqlite")
    out = _history("--db", db, "--import", str(tmp_path / "logs"))
    assert out.returncode == exit_status.OK, out.stderr
    assert "imported 3 new run(s) of 3 usable" in out.stdout
    assert "already" not in out.stdout
    assert "rn50_b128_fp32_4.log: left out: truncated" in out.stderr
    out = _history("--db", db, "--import", str(tmp_path / "logs"))
    assert out.stdout.startswith("imported 0 new run(s) of 3 usable")
    assert out.stdout.endswith("; 3 already in the history\n"), out.stdout
    rows = history_db.read_rows(db)
    assert [r.case_label for r in rows] == [
        f"1n1g b128 fp32, tensorflow, steps 100-600, {tmp_path / 'logs'}"
    ] * 3
    assert rows[0].num_intervals == 5  # DLPerf's window 100-600


def _trained(messages, model_dir, *override):
    """trainer.run in this process, as the CLI runs it (the CLI's own runs
    with a history: the corrupt-history test below and the run scripts'
    tests); what the CLI would print of it, from absl's records."""
    from official_bench import trainer
    first = len(messages)
    trainer.run(None, mode="train", model_dir=model_dir,
                params_override=",".join((TINY_OVERRIDE,) + override))
    return "\n".join(messages[first:])


@pytest.mark.slow
def test_trainer_appends_its_run_and_history_off_writes_nothing(
        tmp_path, absl_messages):
    log = _trained(absl_messages, str(tmp_path / "on" / "model"))
    db = tmp_path / "on" / "model" / history_db.FILE_NAME
    assert log.count("official_bench: history: ") == 1
    assert f"official_bench: history: {db} (run appended, " in log
    (row,) = history_db.read_rows(str(db))
    assert row.source == "trainer" and row.precision == "fp32"
    assert row.case_label.startswith("1n1g b4 fp32 resnet_cifar8 16px, "
                                     "tensorflow, steps ")
    assert row.backend == "tensorflow"  # the trainer's config.runtime
    assert row.case_label.endswith(f"-6, {tmp_path / 'on' / 'model'}")
    result = json.loads((tmp_path / "on" / "model" / "result.json")
                        .read_text())
    assert row.run_key == row_from_result(result, "import", "x").run_key
    log = _trained(absl_messages, str(tmp_path / "off" / "model"),
                   "history.enabled=false")
    assert "history" not in log
    assert not os.path.exists(tmp_path / "off" / "model" /
                              history_db.FILE_NAME)


@pytest.mark.slow
def test_trainer_with_a_corrupt_history_ends_with_one_error_line(tmp_path):
    """The result is written, the file that is not a history is not; one
    error line, no traceback (--verbose shows it: test_history_faults)."""
    db = tmp_path / "not_a_history.sqlite"
    db.write_bytes(b"\x00garbage" * 64)
    before = db.read_bytes()
    out = subprocess.run(
        trainer_cmd(str(tmp_path / "model"),
                    TINY_OVERRIDE + f",history.path={db}"),
        cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=600)
    assert out.returncode == exit_status.FAILED, out.stderr[-3000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last == (f"error: official_bench: run history {db} is not an "
                    "SQLite database (corrupt, or another program's file); "
                    "left as it is: move it away or set history.path"), last
    assert "Traceback" not in out.stdout + out.stderr, out.stderr[-3000:]
    assert len([line for line in out.stderr.splitlines()
                if line.startswith("error:")]) == 1
    assert db.read_bytes() == before
    assert (tmp_path / "model" / "result.json").exists()


def test_default_path_is_the_tree_root_or_in_the_model_dir(tmp_path):
    """A sweep's runs share MODEL_DIR's root; the trainer's own
    model_dir/run-<stamp> runs share model_dir/; any other model_dir keeps
    its history inside it (README's notebook /tmp/nb: not /tmp)."""
    from official_bench.contracts import log_tree
    md = log_tree.ModelDir(str(tmp_path), 128, "2n8g",
                           log_tree.run_stem(128, "fp16", 1),
                           "20261125-120000", node=1)
    assert history_db.default_path(md.path) == str(
        tmp_path / history_db.FILE_NAME)
    assert history_db.default_path(str(tmp_path / "m1") + "/") == str(
        tmp_path / "m1" / history_db.FILE_NAME)
    assert history_db.default_path("/tmp/nb") == \
        "/tmp/nb/" + history_db.FILE_NAME
    stamped = tmp_path / "model_dir" / "run-20261126-140000"
    assert history_db.default_path(str(stamped)) == str(
        tmp_path / "model_dir" / history_db.FILE_NAME)
    assert history_db.default_path(None) is None


def test_an_ordinary_latest_run_is_rarely_called_slower():
    """Runs differ more than their intervals (2% between runs, 1% within):
    the latest run alone borrows the earlier runs' run-to-run spread, so an
    ordinary draw is seldom "slower" while a 10% slow-down still is."""
    from official_bench.judge import verdict
    rng = random.Random(1)

    def run(mean=100.0):
        m = rng.gauss(mean, 2.0)
        return [rng.gauss(m, 1.0) for _ in range(5)]

    alarms = sum(verdict.compare_runs([run() for _ in range(10)], [run()],
                                      resamples=500).verdict == verdict.SLOWER
                 for _ in range(40))
    assert alarms <= 4, alarms
    caught = sum(verdict.compare_runs([run() for _ in range(10)],
                                      [run(90.0)], resamples=500).verdict
                 == verdict.SLOWER for _ in range(20))
    assert caught >= 18, caught


def test_full_disk_becomes_the_one_not_writable_line(tmp_path):
    """SQLite's "database or disk is full" leaves as host/write_errors'
    NotWritable (the trainer's and the CLI's exit_status.NOT_WRITABLE)."""
    import errno

    from official_bench.host.write_errors import NotWritable, writing
    db = str(tmp_path / "h.sqlite")
    err = history_db._as_os_error(
        sqlite3.OperationalError("database or disk is full"), db)
    assert err.errno == errno.ENOSPC
    with pytest.raises(NotWritable, match=f"cannot write the run history "
                                          f"to {db}: no space left"):
        with writing(db, "the run history"):
            raise err
    assert history_db._as_os_error(
        sqlite3.OperationalError("no such table: runs"), db) is None


def test_other_lengths_and_trees_are_other_cases(tmp_path, capsys):
    """Runs of one setup but another counted window, or from another tree
    (a model_dir's home, an imported LOG_DIR), are never compared; --case
    with the setup alone lists each."""
    from official_bench.judge import history
    db = str(tmp_path / "h.sqlite")
    rows = [row_from_result(_result([100.0 + k] * n), "trainer", home,
                            1e9 + k)
            for k, (n, home) in enumerate(
                [(5, "/runs/a")] * 3 + [(8, "/runs/a")] * 2
                + [(5, "/runs/b")])]
    rows.append(row_from_result(
        _result([99.0] * 5), "trainer",
        "/runs/c/tensorflow/resnet50/bz8/1n1g/rn50_b8_fp32_1.20261126-"
        "120000", 2e9))
    assert history_db.append(db, rows) == 7
    labels = sorted({r.case_label for r in history_db.read_rows(db)})
    assert labels == [SETUP + ", tensorflow, steps 10-60, /runs/a",
                      SETUP + ", tensorflow, steps 10-60, /runs/b",
                      SETUP + ", tensorflow, steps 10-60, /runs/c",
                      SETUP + ", tensorflow, steps 10-90, /runs/a"]
    assert history.main(["--db", db, "--case", SETUP]) == exit_status.OK
    out = capsys.readouterr().out
    assert sorted(line for line in out.splitlines()
                  if line.startswith("== ")) == ["== " + c for c in labels]
    # Two imported log trees: two cases, each named by its LOG_DIR.
    for tree, rate in (("x", 100.0), ("y", 101.0)):
        logkit.write_run(str(tmp_path / tree / "tensorflow" / "resnet50" /
                             "bz128"), "1n1g", [50.0] + [rate] * 6)
        assert history.main(["--db", db, "--import",
                             str(tmp_path / tree)]) == exit_status.OK
    imported = [r.case_label for r in history_db.read_rows(db)
                if r.source == "import"]
    assert imported == [f"1n1g b128 fp32, tensorflow, steps 100-600, "
                        f"{tmp_path / t}"
                        for t in ("x", "y")]


def test_import_short_runs_with_window_auto(tmp_path, capsys):
    """--import --window auto counts short logs (a CPU try) over the
    longest window every run of the tree covers; DLPerf's window leaves
    them out; --window with --train_batches is bad usage."""
    from official_bench.judge import history
    logs = tmp_path / "logs" / "tensorflow" / "resnet50" / "bz16"
    for k, steps in enumerate((5, 4)):
        logkit.write_run(str(logs), "1n1g", [5.0] + [100.0 + k] * steps,
                         batch=16, index=k + 1, log_steps=10)
    db = str(tmp_path / "h.sqlite")
    assert history.main(["--db", db, "--import", str(tmp_path / "logs")]) \
        == exit_status.OK
    out, err = capsys.readouterr()
    assert "imported 0 new run(s) of 0 usable" in out
    # names the flags that count them, as the extractor and compare do
    assert ("the runs cover steps 10-50 after their first (warm-up) "
            "interval: count them with --warmup_batches 10 "
            "--train_batches 50 (or --window auto)") in err
    assert history.main(["--db", db, "--import", str(tmp_path / "logs"),
                         "--window", "auto"]) == exit_status.OK
    out, err = capsys.readouterr()
    assert "imported 2 new run(s) of 2 usable" in out
    assert "note: --window auto: counting steps 10-50" in err
    rows = history_db.read_rows(db)
    assert [r.window for r in rows] == ["steps 10-50"] * 2
    assert history.main(["--db", db, "--import", str(tmp_path / "logs"),
                         "--window", "auto", "--train_batches", "40"]) \
        == exit_status.CONFIG
    assert "--window auto chooses" in capsys.readouterr().err


def _sweep_row(root, backend, rate, when, record_backend=True):
    """The trainer's row of a run-script sweep's run under MODEL_DIR
    ``root`` (the model_dir the launcher gives it, under ``backend``/)."""
    from official_bench.contracts import log_tree
    data = _result([rate * (1 + 0.001 * k) for k in range(5)])
    if record_backend:
        data["config"]["runtime"] = {"backend": backend}
    model_dir = log_tree.ModelDir(
        str(root), 8, "1n1g", log_tree.run_stem(8, "fp32", 1),
        "20261126-120000", backend=backend).path
    data["config"]["model_dir"] = model_dir
    return row_from_result(data, "trainer", model_dir, when)


def test_a_tensorflow_and_a_jax_sweep_are_two_cases(tmp_path):
    """Issue 45: one MODEL_DIR, three TensorFlow runs then one JAX run 20%
    slower; one history. Two cases (the case line names the backend), no
    false "slower"; the trainer's rows and --import's agree."""
    root = tmp_path / "model_dir"
    db = str(root / history_db.FILE_NAME)
    rows = [_sweep_row(root, "tensorflow", 100.0 + k, 1e9 + k)
            for k in range(3)] + [_sweep_row(root, "jax", 80.0, 1e9 + 9)]
    assert history_db.append(db, rows) == 4
    out = _history("--db", db)
    assert out.returncode == exit_status.OK, out.stdout + out.stderr
    lines = sorted(out.stdout.splitlines())
    assert len(lines) == 2, out.stdout
    assert lines[0].startswith(
        f"{SETUP}, jax, steps 10-60, {root}: 1 run, nothing earlier")
    assert lines[1].startswith(f"{SETUP}, tensorflow, steps 10-60, {root}: "
                               "latest/earlier")
    assert lines[1].endswith("(1 vs 2 runs)")
    out = _history("--db", db, "--case", f"{SETUP}, jax")
    assert out.returncode == exit_status.OK, out.stderr
    assert out.stdout.splitlines()[0] == f"== {SETUP}, jax, steps 10-60, " \
        f"{root}"
    # The same runs through --import of the log tree: logs with the
    # result.json copy (the record says the backend) and a log alone
    # (its tree says it) give the same two cases.
    logs = tmp_path / "logs"
    imported = str(tmp_path / "imported.sqlite")
    for backend, rate in (("tensorflow", 100.0), ("jax", 80.0)):
        for index in (1, 2):
            log = logkit.write_run(
                str(logs / backend / "resnet50" / "bz128"), "1n1g",
                [50.0] + [rate + index] * 6, index=index)
            if index == 1:
                data = logkit.result_json(
                    [(0, 100, 50.0)] + [(100 * k, 100 * (k + 1), rate + 1)
                                        for k in range(1, 7)], 128, 1,
                    logkit.environment(num_replicas=1, num_workers=1,
                                       dtype="fp32", backend=backend))
                logkit.write_json(log[:-len(".log")] + ".json", data)
    out = _history("--db", imported, "--import", str(logs))
    assert out.returncode == exit_status.OK, out.stderr
    rows = history_db.read_rows(imported)
    assert sorted((r.backend, r.source_path.endswith("_1.log"))
                  for r in rows) == [("jax", False), ("jax", True),
                                     ("tensorflow", False),
                                     ("tensorflow", True)]
    assert {r.case_label.split(", ")[1] for r in rows} == {"tensorflow",
                                                          "jax"}


def test_a_version_1_history_reads_and_is_migrated(tmp_path):
    """A history written before the backend column (format version 1,
    tests/fixtures/history) reads as it is, its runs TensorFlow's; the
    first write adds the column (version 2), and a JAX run is its own
    case beside them."""
    import shutil
    fixture = os.path.join(REPO, "tests", "fixtures", "history", "v1.sqlite")
    db = str(tmp_path / "h.sqlite")
    shutil.copyfile(fixture, db)
    before = open(db, "rb").read()
    old = history_db.read_rows(db)
    assert [r.backend for r in old] == ["tensorflow"] * 3
    assert {r.case_label for r in old} == {
        SETUP + ", tensorflow, steps 10-50, /runs/a"}
    assert [r.id for r in history_db.read_rows(db, {"backend": "tensorflow"})
            ] == [1, 2, 3]
    out = _history("--db", db)
    assert out.returncode == exit_status.OK, out.stderr
    assert out.stdout.startswith(f"{SETUP}, tensorflow, steps 10-50, "
                                 "/runs/a: latest/earlier")
    assert open(db, "rb").read() == before  # reading changes nothing
    jax = _result([80.0] * 4)
    jax["config"]["runtime"] = {"backend": "jax"}
    assert history_db.append(db, [
        row_from_result(jax, "trainer", "/runs/a", 2e9)]) == 1
    # The fixture's first run again (a re-import): its key is unchanged by
    # the migration, so it is stored once; a new TensorFlow run is added.
    again, new = (_result([100.0 + k, 101.0, 99.0 - k, 100.5])
                  for k in (0, 5))
    assert history_db.append(db, [
        row_from_result(again, "import", "/runs/a", 2e9 + 1),
        row_from_result(new, "trainer", "/runs/a", 2e9 + 2)]) == 1
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == \
        history_db.USER_VERSION == 2
    assert [r[0] for r in conn.execute(
        "SELECT backend FROM runs ORDER BY id")] == [None] * 3 + [
            "jax", "tensorflow"]
    conn.close()
    rows = history_db.read_rows(db)
    assert [r.backend for r in rows] == ["tensorflow"] * 3 + [
        "jax", "tensorflow"]
    assert len({r.case_label for r in rows}) == 2
    # A newer format is refused, as another program's file is.
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with pytest.raises(history_db.HistoryError,
                       match="format version 3, this official_bench reads "
                             "versions 1 to 2"):
        history_db.read_rows(db)


_DIES_IN_FIRST_WRITE = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("CREATE TABLE runs (time_utc TEXT)")
os._exit(1)  # before COMMIT, as a killed first writer
"""


@pytest.mark.parametrize("how", ["touch", "first write died"])
def test_a_zero_length_file_is_a_new_history(tmp_path, how):
    """A zero-length file (`touch`, `mktemp`, a first write killed before
    its commit: SQLite's empty database) holds no run: read, it says so;
    written, it becomes a history (docs/compare_and_history.md)."""
    db = tmp_path / "h.sqlite"
    if how == "touch":
        db.touch()
    else:
        subprocess.run([sys.executable, "-c", _DIES_IN_FIRST_WRITE, str(db)],
                       check=False, timeout=60)
    assert db.stat().st_size == 0
    out = _history("--db", str(db))
    assert out.returncode == exit_status.FAILED
    assert out.stderr == f"error: the history {db} holds no run yet\n"
    assert db.stat().st_size == 0  # reading writes nothing
    logkit.write_run(str(tmp_path / "logs" / "tensorflow" / "resnet50" /
                         "bz128"), "1n1g", [50.0] + [100.0] * 6)
    out = _history("--db", str(db), "--import", str(tmp_path / "logs"))
    assert out.returncode == exit_status.OK, out.stderr
    assert history_db.count(str(db)) == 1
    assert sorted(os.listdir(tmp_path)) == ["h.sqlite", "logs"]


def test_listing_and_json_name_each_rows_framework(tmp_path, capsys):
    """A JAX case's rows say JAX and its version where a TensorFlow case's
    say TF and its; the JSON row keeps "tensorflow" and adds "framework"."""
    from official_bench.judge import history
    db = str(tmp_path / "h.sqlite")
    def jax_run(rate):
        data = _result([rate] * 5)
        data["environment"] = {"backend": "jax", "python": "3.11.7",
                               "keras": "3.15.1", "jax": "0.10.2",
                               "jaxlib": "0.10.2", "num_replicas": 1,
                               "num_workers": 1, "dtype": "float32",
                               "hostname": "vm"}
        data["config"]["runtime"] = {"backend": "jax"}
        return data
    rows = [row_from_result(jax_run(100.0 + k), "trainer", "/tmp/x", 1e9 + k)
            for k in range(2)] + [_row([90.0] * 5, 1e9 + 2)]
    assert history_db.append(db, rows) == 3
    assert history.main(["--db", db, "--case", SETUP]) == exit_status.OK
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "time (UTC)" in line)
    assert " framework " in header and " TF " not in header
    listed = [line.split()[5:7] for line in out.splitlines()
              if line.split()[:1] in (["1"], ["2"], ["3"])]
    assert sorted(listed) == [["JAX", "0.10.2"]] * 2 + [["TF", "2.21.0"]]
    assert history.main(["--db", db, "--json"]) == exit_status.OK
    latest = {c["case"].split(", ")[1]: c["latest"]
              for c in json.loads(capsys.readouterr().out)}
    assert latest["jax"]["framework"] == "JAX 0.10.2"
    assert latest["jax"]["tensorflow"] is None
    assert latest["tensorflow"]["framework"] == "TF 2.21.0"
    assert latest["tensorflow"]["tensorflow"] == "2.21.0"


def test_import_window_decides_which_result_json_runs_are_imported(
        tmp_path, capsys):
    """--import's window decides whether a run is imported, one with its
    result.json too (as its --help and docs/compare_and_history.md say);
    that run's row then keeps the trainer's own window, not the flags'."""
    from official_bench.contracts import log_tree
    from official_bench.judge import history
    logs = tmp_path / "logs"
    log = logkit.write_run(str(logs / "tensorflow" / "resnet50" / "bz8"),
                           "1n1g", [5.0] + [100.0] * 3, batch=8,
                           log_steps=10)
    data = _result([100.0] * 3)
    logkit.write_json(log_tree.json_path(log), data)
    db = str(tmp_path / "h.sqlite")
    assert history.main(["--db", db, "--import", str(logs)]) == \
        exit_status.OK
    out, err = capsys.readouterr()
    assert out.startswith("imported 0 new run(s) of 0 usable"), out
    assert f"{log}: left out: no TimeHistory interval inside steps " \
           "[100, 600]" in err
    assert history.main(["--db", db, "--import", str(logs),
                         "--warmup_batches", "20", "--train_batches", "40"]
                        ) == exit_status.OK
    assert capsys.readouterr().out.startswith("imported 1 new run(s)")
    (row,) = history_db.read_rows(db)
    assert row.window == "steps 10-40"  # the trainer's, not 20-40
    text = " ".join(history.build_parser().format_help().split())
    assert ("It decides which runs are imported: one the extractor would "
            "leave out in it (no interval inside it, cut short before its "
            "end) is not, with or without its result.json.") in text
    assert "in the trainer's own window" in text
