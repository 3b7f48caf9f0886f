"""A version-1 run history (tests/fixtures/history/v1.sqlite) and the
writes that meet it: one that stores no new run leaves it byte for byte
as it is (no write, no migration); one that stores a run migrates it to
version 2 and says so in one line, from the store (stderr), from
official-bench-history --import (a note) and from the trainer's write
(beside its "run appended" line)."""

import os
import shutil
import sqlite3

from official_bench import config as config_lib
from official_bench.contracts import exit_status, history_db
from official_bench.contracts.history_row import row_from_result
from official_bench.judge import history
from official_bench.training import run_history
from support import logkit
from support.helpers import REPO, tiny

FIXTURE = os.path.join(REPO, "tests", "fixtures", "history", "v1.sqlite")
# The words of the one line a migration says (history_db.migration_note).
MIGRATED = ("format version 1 -> 2 (the backend column); an official_bench "
            "older than that (commit 2833e79, 2026-11-28) reads version 1 "
            "only and can no longer read or write it")


def _v1(tmp_path, name="h.sqlite"):
    db = str(tmp_path / name)
    shutil.copyfile(FIXTURE, db)
    return db


def _version(db):
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def _result(rates):
    """A result.json dict of the fixture's case (its first run's rates
    give that run again: the same run_key)."""
    return logkit.history_result(rates)


def test_an_append_of_stored_runs_leaves_a_version_1_file_as_it_is(
        tmp_path, capsys):
    db = _v1(tmp_path)
    before = open(db, "rb").read()
    said = []
    again = row_from_result(_result([100.0, 101.0, 99.0, 100.5]), "import",
                            "/runs/a", 2e9)
    assert history_db.append(db, [again], on_migrate=said.append) == 0
    assert history_db.append(db, [], on_migrate=said.append) == 0
    assert open(db, "rb").read() == before and _version(db) == 1
    assert said == [] and sorted(os.listdir(tmp_path)) == ["h.sqlite"]
    # A new run: stored, the file migrated, said once.
    new = row_from_result(_result([90.0] * 4), "trainer", "/runs/a", 2e9)
    assert history_db.append(db, [again, new], on_migrate=said.append) == 1
    assert said == [f"run history {db}: {MIGRATED}"]
    assert _version(db) == 2
    assert history_db.append(db, [row_from_result(
        _result([91.0] * 4), "trainer", "/runs/a", 2e9 + 1)],
        on_migrate=said.append) == 1
    assert len(said) == 1  # version 2 already: nothing more to say
    assert capsys.readouterr().err == ""
    # Without on_migrate the line goes to stderr.
    other = _v1(tmp_path, "other.sqlite")
    assert history_db.append(other, [new]) == 1
    assert capsys.readouterr().err == \
        f"official_bench: run history {other}: {MIGRATED}\n"


def _downgraded(db):
    """``db``, a version-2 history, turned back into version 1 (no backend
    column, the version-1 case index), its rows kept."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP INDEX runs_case")
    conn.execute("ALTER TABLE runs DROP COLUMN backend")
    conn.execute("CREATE INDEX runs_case ON runs (nodes, gpus_per_node, "
                 "batch_per_device, precision, model, image_size, "
                 "unix_time)")
    conn.execute("PRAGMA user_version = 1")
    conn.close()


def test_import_of_stored_runs_does_not_migrate_and_a_new_one_says_so(
        tmp_path, capsys):
    logs = tmp_path / "logs"
    tree = logs / "tensorflow" / "resnet50" / "bz128"
    logkit.write_run(str(tree), "1n1g", [50.0] + [100.0] * 6)
    db = str(tmp_path / "h.sqlite")
    assert history.main(["--db", db, "--import", str(logs)]) == \
        exit_status.OK
    capsys.readouterr()
    _downgraded(db)
    before = open(db, "rb").read()
    assert history.main(["--db", db, "--import", str(logs)]) == \
        exit_status.OK
    out, err = capsys.readouterr()
    assert out.startswith("imported 0 new run(s) of 1 usable") and err == ""
    assert open(db, "rb").read() == before and _version(db) == 1
    logkit.write_run(str(tree), "1n1g", [50.0] + [101.0] * 6, index=2)
    assert history.main(["--db", db, "--import", str(logs)]) == \
        exit_status.OK
    out, err = capsys.readouterr()
    assert out.startswith("imported 1 new run(s) of 2 usable"), out
    assert err == f"note: run history {db}: {MIGRATED}\n"
    assert _version(db) == 2


def test_the_trainers_write_says_it_migrated(tmp_path, absl_messages):
    """training/run_history.record_run, the trainer's one write: the
    migration's line, then its "run appended" line."""
    db = _v1(tmp_path)
    cfg = config_lib.load_config(tiny(history={"path": db},
                                      model_dir=str(tmp_path / "m")))
    assert run_history.record_run(cfg, _result([95.0] * 4), True) == db
    lines = [m for m in absl_messages if "history" in m]
    assert lines[0] == f"official_bench: run history {db}: {MIGRATED}"
    assert lines[1].startswith(f"official_bench: history: {db} (run "
                               "appended, ")
    assert len(lines) == 2 and _version(db) == 2
    assert run_history.record_run(cfg, _result([96.0] * 4), True) == db
    assert [m for m in absl_messages if "format version" in m] == lines[:1]
