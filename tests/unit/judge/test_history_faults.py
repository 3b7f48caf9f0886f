"""The run history under faults (issue 40): a history of random bytes
behind SQLite's header, a copy cut in half, one with its last 100 bytes
cut, a directory in its place, a read-only file or folder, a full disk.

Each fault is met by official-bench-history (list, --import) and by the
trainer's write (training/run_history.record_run, the function the trainer
calls): one `error:` line (the CLI) or one exception whose text is that
line (the trainer's CLI prints it; tests/unit/judge/test_history.py runs
the real trainer on a corrupt history), exit 1 for a damaged file and 5 for
one that cannot be written, the file's bytes unchanged and nothing left
beside it. A full disk runs on a small tmpfs and a read-only file under
another user (root may write anything), both skipped where not allowed.
"""

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import pytest

from official_bench import classifier_trainer, config as config_lib
from official_bench.contracts import exit_status, history_db
from official_bench.contracts.history_row import row_from_result
from official_bench.host.write_errors import NotWritable
from official_bench.judge import history
from official_bench.training import run_history
from support import logkit
from support.helpers import REPO, cli_env, tiny
from support.small_disk import PAGE, leave_free, small_tmpfs


def _result(seed, rates=5):
    rng = random.Random(seed)
    return logkit.history_result([rng.gauss(100.0, 1.0)
                                  for _ in range(rates)])


def _history_file(path, runs=30):
    rows = [row_from_result(_result(k), "trainer", "/runs/a", 1e9 + k)
            for k in range(runs)]
    assert history_db.append(str(path), rows) == runs
    return path


def _log_tree(root):
    """A run-script log tree of one finished run (for --import)."""
    logkit.write_run(str(root / "tensorflow" / "resnet50" / "bz128"), "1n1g",
                     [50.0] + [100.0] * 6)
    return root


def _cut(path, keep):
    data = path.read_bytes()
    path.write_bytes(data[:keep(len(data))])


def _random_body(path):
    """SQLite's header (so the header check passes), then noise."""
    data = path.read_bytes()
    rng = random.Random(7)
    path.write_bytes(data[:100] + bytes(rng.randrange(256)
                                        for _ in range(len(data) - 100)))


def _directory(path):
    path.unlink()
    path.mkdir()
    (path / "keep").write_text("x")


FAULTS = {
    "random": (_random_body, "is damaged (SQLite: "),
    # SQLite's read of the schema may meet the missing half first.
    "half": (lambda p: _cut(p, lambda n: n // 2), " damaged ("),
    "last100": (lambda p: _cut(p, lambda n: n - 100),
                "is cut short or damaged"),
    "directory": (_directory, "is a directory, expected an SQLite file"),
}


def _snapshot(folder):
    """Every file below ``folder`` with its bytes and mode."""
    out = {}
    for here, _, files in os.walk(folder):
        for name in files:
            p = os.path.join(here, name)
            with open(p, "rb") as f:
                out[p] = (f.read(), os.stat(p).st_mode)
    return out


def _cli(argv, capsys):
    """official-bench-history in-process: (status, stdout, stderr)."""
    status = history.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def _one_error_line(err, words):
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert [line for line in lines if line.startswith("error:")] == \
        [lines[-1]], err
    assert words in lines[-1], lines[-1]
    return lines[-1]


def _cfg(db, model_dir):
    return config_lib.load_config(tiny(history={"path": str(db)},
                                       model_dir=str(model_dir)))


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_damaged_history_is_one_line_and_left_as_it_is(tmp_path, capsys,
                                                       fault):
    damage, words = FAULTS[fault]
    db = _history_file(tmp_path / "h" / "history.sqlite")
    damage(db)
    logs = _log_tree(tmp_path / "logs")
    before = _snapshot(tmp_path / "h")
    status, out, err = _cli(["--db", str(db)], capsys)
    assert status == exit_status.FAILED
    line = _one_error_line(err, words)
    assert f"run history {db} " in line and "left as it is" in line
    status, out, err = _cli(["--db", str(db), "--import", str(logs)], capsys)
    assert status == exit_status.FAILED, out + err
    _one_error_line(err, words)
    # The trainer's write: the same words, nothing written.
    with pytest.raises(run_history.HistoryWriteError) as e:
        run_history.record_run(_cfg(db, tmp_path / "m"), _result(99), True)
    assert str(e.value).startswith(f"official_bench: run history {db} ")
    assert words in str(e.value)
    assert _snapshot(tmp_path / "h") == before  # bytes, modes, no sidecar


def test_cli_process_on_a_cut_history_ends_in_one_line(tmp_path):
    """The real command on the cut copy that once ended in a JSONDecodeError
    traceback: exit 1, one line."""
    db = _history_file(tmp_path / "history.sqlite")
    _cut(db, lambda n: n - 100)
    p = subprocess.run([sys.executable, "-m", "official_bench.judge.history",
                        "--db", str(db)], cwd=REPO, env=cli_env(),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == exit_status.FAILED, p.stderr
    assert p.stdout == ""
    assert p.stderr.count("\n") == 1
    _one_error_line(p.stderr, "is cut short or damaged")


def test_a_damaged_row_is_one_line(tmp_path, capsys):
    """A record SQLite's structure check passes but whose JSON is cut."""
    db = _history_file(tmp_path / "history.sqlite", runs=3)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET intervals = '[[10, 20, 0.1' "
                     "WHERE id = 2")
    conn.close()
    status, _, err = _cli(["--db", str(db)], capsys)
    assert status == exit_status.FAILED
    _one_error_line(err, f"run history {db}: run 2 is damaged")


def test_full_disk_is_exit_5_naming_the_path_and_free_space(tmp_path,
                                                            capsys):
    mount = tmp_path / "small"
    logs = _log_tree(tmp_path / "logs")
    with small_tmpfs(str(mount), 32 * PAGE):
        db = mount / "history.sqlite"
        shutil.copy(_history_file(tmp_path / "seed.sqlite"), db)
        for free in (0, PAGE):
            leave_free(str(mount), free)
            before = _snapshot(mount)
            status, _, err = _cli(["--db", str(db), "--import", str(logs)],
                                  capsys)
            assert status == exit_status.NOT_WRITABLE, err
            line = _one_error_line(
                err, f"cannot write the run history to {db}: no space left")
            assert line.endswith(" free there)"), line
            with pytest.raises(NotWritable, match="no space left"):
                run_history.record_run(_cfg(db, tmp_path / "m"),
                                       _result(99, rates=400), True)
            assert _snapshot(mount) == before
            os.remove(mount / ".filler")
        assert history_db.count(str(db)) == 30  # readable, nothing lost


def test_read_only_mount_refuses_and_reads(tmp_path, capsys):
    mount = tmp_path / "ro"
    logs = _log_tree(tmp_path / "logs")
    with small_tmpfs(str(mount), 64 * PAGE):
        db = mount / "history.sqlite"
        shutil.copy(_history_file(tmp_path / "seed.sqlite"), db)
        ro = subprocess.run(["mount", "-o", "remount,ro", str(mount)],
                            capture_output=True, text=True)
        if ro.returncode:
            pytest.skip(f"cannot remount read-only: {ro.stderr.strip()}")
        status, _, err = _cli(["--db", str(db), "--import", str(logs)],
                              capsys)
        assert status == exit_status.NOT_WRITABLE
        _one_error_line(err, f"cannot write the run history to {db}: the "
                             "file system is read-only")
        with pytest.raises(NotWritable, match="read-only"):
            run_history.record_run(_cfg(db, tmp_path / "m"), _result(99),
                                   True)
        status, out, _ = _cli(["--db", str(db)], capsys)
        assert status == exit_status.OK and "latest/earlier" in out


def _bound_by_modes():
    """(a folder every user may read, the command prefix under which file
    modes bind): root ignores a 0444 mode, so root runs the command
    without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv)."""
    prefix = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root needs setpriv to run a command that file "
                        "modes bind")
        # Root without the capabilities that skip file modes: still able
        # to read the checkout (a clone under a 0700 mktemp folder, as CI
        # makes, is closed to nobody), refused a 0444 file it does not own.
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    folder = tempfile.mkdtemp(prefix="history-ro-")
    os.chmod(folder, 0o755)
    return folder, prefix


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_read_only_file_refused_leaves_nothing_behind(tmp_path, journal):
    """A 0444 history (also one an older version left in WAL mode): the
    import is refused in one line, exit 5, and leaves no -wal/-shm (they
    would take mode 0444 and refuse every write after a chmod 644)."""
    top, prefix = _bound_by_modes()
    try:
        folder = os.path.join(top, "h")
        os.mkdir(folder)
        os.chmod(folder, 0o777)
        db = os.path.join(folder, "history.sqlite")
        _history_file(db)
        if journal == "wal":
            with sqlite3.connect(db) as conn:
                conn.execute("PRAGMA journal_mode=WAL")
            conn.close()
        logs = _log_tree(tmp_path.__class__(top) / "logs")
        os.chmod(db, 0o444)

        def cli(*argv):
            return subprocess.run(
                prefix + [sys.executable, "-m", "official_bench.judge.history",
                          "--db", db, *argv], cwd=REPO, env=cli_env(),
                capture_output=True, text=True, timeout=120)

        p = cli("--import", str(logs))
        assert p.returncode == exit_status.NOT_WRITABLE, p.stderr
        _one_error_line(p.stderr, f"cannot write the run history to {db}: "
                                  "permission denied")
        assert os.listdir(folder) == ["history.sqlite"]
        p = cli()  # reading a read-only history works, and leaves nothing
        assert p.returncode == exit_status.OK, p.stderr
        assert os.listdir(folder) == ["history.sqlite"]
        os.chmod(db, 0o644)
        p = cli("--import", str(logs))
        assert p.returncode == exit_status.OK, p.stderr
        assert "imported 1 new run(s)" in p.stdout
        assert os.listdir(folder) == ["history.sqlite"]
    finally:
        shutil.rmtree(top)


def test_verbose_puts_the_traceback_above_the_line(capsys):
    """The trainer CLI's one line; --verbose adds the traceback for a bug
    report (the NaN stop's process test checks there is none without)."""
    try:
        raise RuntimeError("official_bench: boom")
    except RuntimeError as e:
        error = e
    flag = classifier_trainer.flags.FLAGS["verbose"]
    assert classifier_trainer._fail("official_bench: boom", 1, error) == 1
    assert capsys.readouterr().err == "error: official_bench: boom\n"
    flag.value = True
    try:
        classifier_trainer._fail("official_bench: boom", 1, error)
    finally:
        flag.value = False
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "Traceback (most recent call last):"
    assert err[-2:] == ["RuntimeError: official_bench: boom",
                        "error: official_bench: boom"]



# --db and --plot paths no file can be written at, and the one error line
# ({afile}: the absolute path). Each failed with an OSError traceback, the
# plot ones after the listing.
BAD_PATHS = [
    (["--db", "h.sqlite", "--plot", "afile/x.png"],
     "--plot afile/x.png: {afile} is not a folder"),
    (["--db", "h.sqlite", "--plot", "logs"],
     "--plot logs is a directory: give the PNG's file name"),
    (["--db", "afile/x.sqlite", "--import", "logs", "--window", "auto"],
     "run history afile/x.sqlite: {afile} is not a folder"),
    (["--db", "", "--import", "logs"],
     "run history path is empty: give the file's name (--db, "
     "history.path)"),
]


@pytest.mark.parametrize("argv,line", BAD_PATHS)
def test_db_and_plot_paths_are_checked_first(tmp_path, capsys, monkeypatch,
                                             argv, line):
    monkeypatch.chdir(tmp_path)
    _history_file(tmp_path / "h.sqlite", runs=3)
    _log_tree(tmp_path / "logs")
    (tmp_path / "afile").write_text("keep")
    before = _snapshot(tmp_path)
    status, out, err = _cli(argv, capsys)
    line = line.format(afile=tmp_path / "afile")
    assert (status, out, err) == (exit_status.FAILED, "", f"error: {line}\n")
    assert _snapshot(tmp_path) == before


def test_a_plot_path_that_cannot_be_written_is_named_as_given(
        tmp_path, capsys, monkeypatch):
    """Under /proc the temporary file beside the PNG fails (ENOENT); the
    error named that file, not --plot's. It is a place nothing can be
    written (host/write_errors.py names /proc's file system): exit 5."""
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    monkeypatch.chdir(tmp_path)
    _history_file(tmp_path / "h.sqlite", runs=3)
    status, out, err = _cli(["--db", "h.sqlite", "--plot", "/proc/x.png"],
                            capsys)
    assert status == exit_status.NOT_WRITABLE
    line = _one_error_line(err, "/proc/x.png")
    assert line == ("error: cannot write the history plot to /proc/x.png: "
                    "/proc is on the kernel's proc file system, which takes "
                    "no new files or folders")


def test_the_trainers_write_below_a_file_is_one_line(tmp_path):
    """history.path below a file: HistoryError (FileExistsError before)."""
    (tmp_path / "afile").write_text("keep")
    with pytest.raises(history_db.HistoryError,
                       match=f"^run history {tmp_path}/afile/x.sqlite: "
                             f"{tmp_path}/afile is not a folder$"):
        history_db.append(str(tmp_path / "afile" / "x.sqlite"),
                          [row_from_result(_result(0), "trainer", "/runs/a",
                                           1e9)])
