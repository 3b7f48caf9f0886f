"""The run history: one SQLite file, one row per finished run.

Written by the trainer (the chief, after its result.json) and by
``official-bench-history --import LOG_DIR``; read by official-bench-history.
A format two layers share, so it lives in contracts/ and needs nothing but
the standard library's ``sqlite3`` (no TensorFlow).

Where: ``history.path`` in the config, else :func:`default_path` of the
model_dir: the root of the run scripts' MODEL_DIR tree when the model_dir is
one of theirs (every batch and case of a sweep in one file), else the
model_dir's parent directory.

Concurrent writers (chiefs of several jobs, nodes sharing a file system) must
never lose a row: WAL mode, every connection waits up to ``BUSY_SECONDS`` for
a lock, and an append that still meets "database is locked" is retried with
a growing pause (SQLite needs working POSIX locks: NFS without them is not
safe for any SQLite file). A file this module did not make is never written:
its first bytes must be SQLite's header, then its ``application_id`` and
``user_version`` this format's; anything else is a :class:`HistoryError`
whose message is one line naming the path, and the file is left as it was.

A row's ``run_key`` is a digest of the run's case and all its intervals, so
the same run written by the trainer and imported again from its log tree's
result.json copy is stored once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import random
import sqlite3
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence

from official_bench.contracts import log_tree

# "OBH1": official_bench history; SQLite keeps it in the file's header.
APPLICATION_ID = 0x4F424831
USER_VERSION = 1
FILE_NAME = "official_bench_history.sqlite"
BUSY_SECONDS = 30.0
RETRIES = 8
_HEADER = b"SQLite format 3\x00"
TABLE = "runs"


class HistoryError(Exception):
    """The history file cannot be used; ``str()`` is one line naming it."""


@dataclasses.dataclass
class Row:
    """One finished run. Case: model .. precision; environment: tensorflow
    .. devices (and the full block as JSON); stats: mean_rate (DLPerf's mean
    of interval rates), images_per_second_over_window, the counted intervals
    as JSON [[start, end, seconds, examples/s], ...]; MFU when counted."""
    time_utc: str
    unix_time: float
    source: str  # "trainer" or "import"
    source_path: str
    run_key: str
    config_digest: Optional[str]
    model: Optional[str]
    image_size: Optional[int]
    nodes: int
    gpus_per_node: int
    batch_per_device: int
    global_batch: int
    precision: str
    strategy: Optional[str]
    tensorflow: Optional[str]
    cuda: Optional[str]
    driver: Optional[str]
    host: Optional[str]
    devices: str  # JSON list of device names
    environment: str  # JSON object
    mean_rate: float
    images_per_second_over_window: Optional[float]
    num_intervals: int
    intervals: str  # JSON
    gflop_per_image: Optional[float] = None
    mfu: Optional[float] = None
    id: Optional[int] = None  # set when read back

    @property
    def interval_rates(self) -> List[float]:
        """The counted intervals' examples/second (for judge/verdict.py)."""
        return [float(item[3]) for item in json.loads(self.intervals)]

    @property
    def case_label(self) -> str:
        """'1n1g b128 fp32 resnet 224px'."""
        return case_label(self.nodes, self.gpus_per_node,
                          self.batch_per_device, self.precision, self.model,
                          self.image_size)


def case_label(nodes: int, gpus: int, batch: int, precision: str,
               model: Optional[str], image_size: Optional[int]) -> str:
    """A case as one word list: '1n1g b128 fp32 resnet50 224px'."""
    text = f"{log_tree.case_name(nodes, gpus)} b{batch} {precision}"
    if model:
        text += f" {model}"
    if image_size:
        text += f" {image_size}px"
    return text


_COLUMNS = [f.name for f in dataclasses.fields(Row) if f.name != "id"]
_SQL_TYPES = {"int": "INTEGER", "float": "REAL", "str": "TEXT",
              "Optional[int]": "INTEGER", "Optional[float]": "REAL",
              "Optional[str]": "TEXT"}
# Columns a case is selected by (the case's key).
CASE_COLUMNS = ("nodes", "gpus_per_node", "batch_per_device", "precision",
                "model", "image_size")


def _create_sql() -> str:
    cols = []
    for f in dataclasses.fields(Row):
        if f.name == "id":
            cols.append("id INTEGER PRIMARY KEY AUTOINCREMENT")
        elif f.name == "run_key":
            cols.append("run_key TEXT NOT NULL UNIQUE")
        else:
            cols.append(f"{f.name} {_SQL_TYPES[str(f.type)]}")
    return f"CREATE TABLE {TABLE} ({', '.join(cols)})"


def default_path(model_dir: Optional[str]) -> Optional[str]:
    """Where the history goes when ``history.path`` is not set (module
    doc); None without a model_dir (nothing to put it beside)."""
    if not model_dir:
        return None
    parsed = log_tree.parse_model_dir(os.path.abspath(model_dir))
    if parsed is not None:
        return os.path.join(parsed.root, FILE_NAME)
    parent = os.path.dirname(os.path.abspath(os.path.normpath(model_dir)))
    return os.path.join(parent, FILE_NAME)


def _check_header(path: str) -> None:
    """HistoryError unless ``path`` is absent, empty, or starts as SQLite
    files do; read before SQLite opens it, so a foreign file stays as it
    was."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_HEADER))
    except FileNotFoundError:
        return
    except IsADirectoryError:
        raise HistoryError(f"run history {path} is a directory, expected "
                           "an SQLite file") from None
    except OSError as e:
        raise HistoryError(f"run history {path}: cannot read it: "
                           f"{e.strerror}") from None
    if head and head != _HEADER[:len(head)] or 0 < len(head) < len(_HEADER):
        raise HistoryError(f"run history {path} is not an SQLite database "
                           "(corrupt, or another program's file); left as "
                           "it is: move it away or set history.path")


def _check_identity(conn: sqlite3.Connection, path: str) -> bool:
    """True when the file is ours, False when it is a new empty database;
    HistoryError for another program's database or another version."""
    app = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    if app == 0 and version == 0 and tables == 0:
        return False
    if app != APPLICATION_ID:
        raise HistoryError(
            f"run history {path} is another program's SQLite database "
            f"(application_id {app:#x}, expected {APPLICATION_ID:#x}); left "
            "as it is: move it away or set history.path")
    if version != USER_VERSION:
        raise HistoryError(
            f"run history {path} has format version {version}, this "
            f"official_bench reads version {USER_VERSION}; left as it is")
    return True


def _is_busy(e: sqlite3.OperationalError) -> bool:
    text = str(e).lower()
    return "locked" in text or "busy" in text


def _as_os_error(e: sqlite3.Error, path: str) -> Optional[OSError]:
    """SQLite's words for a full disk or a file it may not write, as the
    OSError host/write_errors.writing turns into its one line; None for
    anything else."""
    text = str(e).lower()
    if "disk is full" in text:
        return OSError(errno.ENOSPC, str(e), path)
    if "readonly database" in text or "unable to open database" in text:
        directory = os.path.dirname(os.path.abspath(path))
        try:
            read_only = bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
        except OSError:
            return None
        if read_only:
            return OSError(errno.EROFS, str(e), path)
        if not os.access(directory, os.W_OK) or (
                os.path.exists(path) and not os.access(path, os.W_OK)):
            return OSError(errno.EACCES, str(e), path)
    return None


@contextlib.contextmanager
def _connect(path: str, read_only: bool) -> Iterator[sqlite3.Connection]:
    """A connection with the busy timeout; SQLite errors on a damaged file
    become HistoryError naming it."""
    _check_header(path)
    if read_only and not os.path.exists(path):
        raise HistoryError(f"no run history at {path} (runs are recorded "
                           "there when history.enabled is true, or with "
                           "--import LOG_DIR)")
    uri = f"file:{path}?mode=ro" if read_only else path
    try:
        conn = sqlite3.connect(uri, timeout=BUSY_SECONDS, uri=read_only,
                               isolation_level=None)
    except sqlite3.OperationalError as e:
        raise (_as_os_error(e, path) or HistoryError(
            f"run history {path}: cannot open it: {e}")) from None
    try:
        yield conn
    except sqlite3.DatabaseError as e:
        if isinstance(e, sqlite3.OperationalError) and _is_busy(e):
            raise
        raise (_as_os_error(e, path) or HistoryError(
            f"run history {path}: {e} (corrupt?); left as it is")) from None
    finally:
        conn.close()


def _initialise(conn: sqlite3.Connection, path: str) -> None:
    """Make a new file ours, or check an existing one (under a write lock,
    so two first writers cannot both create the table)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not _check_identity(conn, path):
            conn.execute(_create_sql())
            conn.execute(f"CREATE INDEX {TABLE}_case ON {TABLE} "
                         f"({', '.join(CASE_COLUMNS)}, unix_time)")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {USER_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _append_once(path: str, rows: Sequence[Row]) -> int:
    with _connect(path, read_only=False) as conn:
        # Identity first: journal_mode=WAL writes to the file.
        _check_identity(conn, path)
        conn.execute("PRAGMA journal_mode=WAL")
        _initialise(conn, path)
        sql = (f"INSERT OR IGNORE INTO {TABLE} ({', '.join(_COLUMNS)}) "
               f"VALUES ({', '.join('?' * len(_COLUMNS))})")
        conn.execute("BEGIN IMMEDIATE")
        try:
            added = 0
            for row in rows:
                cur = conn.execute(sql, [getattr(row, c) for c in _COLUMNS])
                added += cur.rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return added


def append(path: str, rows: Sequence[Row]) -> int:
    """Append ``rows`` (one transaction); returns how many were new (a row
    whose run_key is already stored is skipped). Retries while another
    writer holds the lock; HistoryError for a file that is not ours;
    OSError (e.g. no space) passes through for the caller's
    host/write_errors.writing."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    pause = 0.05
    for attempt in range(RETRIES + 1):
        try:
            return _append_once(path, rows)
        except sqlite3.OperationalError as e:
            if not _is_busy(e) or attempt == RETRIES:
                raise HistoryError(f"run history {path}: still locked "
                                   f"after {attempt + 1} tries: {e}"
                                   ) from None
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 2.0)
    raise AssertionError("unreachable")


def read_rows(path: str, where: Optional[Dict[str, Any]] = None
              ) -> List[Row]:
    """Rows in time order, optionally those whose columns equal ``where``'s
    values (None matches NULL). Opens the file read-only."""
    clauses, values = [], []
    for key, value in (where or {}).items():
        if key not in _COLUMNS:
            raise ValueError(f"unknown history column {key!r}")
        if value is None:
            clauses.append(f"{key} IS NULL")
        else:
            clauses.append(f"{key} = ?")
            values.append(value)
    sql = f"SELECT id, {', '.join(_COLUMNS)} FROM {TABLE}"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += " ORDER BY unix_time, id"
    with _connect(path, read_only=True) as conn:
        if not _check_identity(conn, path):
            return []
        out = []
        for record in conn.execute(sql, values):
            row = Row(*record[1:])
            row.id = record[0]
            out.append(row)
        return out


def count(path: str) -> int:
    """Rows stored (0 for a new empty file)."""
    with _connect(path, read_only=True) as conn:
        if not _check_identity(conn, path):
            return 0
        return conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]


def dumps(value: Any) -> str:
    """JSON for a row's JSON columns (sorted keys: stable digests)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
