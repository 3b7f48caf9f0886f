"""The run history: one SQLite file, one row per finished run.

Written by the trainer (the chief, after its result.json) and by
``official-bench-history --import LOG_DIR``; read by official-bench-history.
A format two layers share, so it lives in contracts/ and needs nothing but
the standard library's ``sqlite3``. Where the file goes: :func:`default_path`.

Concurrent writers never lose a row: a rollback journal (no WAL: no -wal or
-shm files beside it, and fine on shared file systems with POSIX locks), a
busy timeout and retries with a growing pause. Nothing is written into a
file that is not a sound history of this format: the header, whole pages
(a cut copy) and SQLite's ``PRAGMA quick_check`` are checked first; a file
that fails is a :class:`HistoryError`, one line naming it, the file and
its folder left as they were. A zero-length file (`touch`, `mktemp`, a
first write killed before its commit: SQLite's empty database, no run in
it to keep) is a new history: read, it holds no run; written, it is one.

A row's ``run_key`` digests the run's case and intervals: a run the trainer
wrote and --import reads again is stored once. A case (:attr:`Row.case_label`)
is the setup (nodes: :func:`placement`), the backend, the counted window and
the run's tree. Format 2 added the backend; a version-1 file reads as it is
(tensorflow's runs) and its next write migrates it (:func:`_migrate`), in one
line (:func:`migration_note`); a write re-files the rows older versions filed
under a node per process (:func:`_refile`). An append whose runs are all
stored already writes nothing: no transaction, no migration.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import random
import re
import sqlite3
import sys
import time
from typing import (
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
)

from official_bench.contracts import log_tree, run_backend

# "OBH1": official_bench history; SQLite keeps it in the file's header.
APPLICATION_ID = 0x4F424831
USER_VERSION = 2  # 2: the backend column; 1 is still read and migrated
# Each format version: what it added, and the first official_bench that
# writes it (an older one refuses the file: migration_note).
_VERSIONS = {2: ("the backend column", "commit 2833e79, 2026-11-28")}
FILE_NAME = "official_bench_history.sqlite"
BUSY_SECONDS = 30.0
RETRIES = 8
_HEADER = b"SQLite format 3\x00"
TABLE = "runs"
# The trainer CLI's own model_dir when --model_dir is not given
# (classifier_trainer._default_model_dir): such runs share their parent.
_CLI_RUN_DIR = re.compile(r"run-\d{8}-\d{6}")
# Files SQLite may make beside a database (WAL mode: older histories).
_SIDECARS = ("-wal", "-shm")
# SQLite's primary result codes (sqlite3.h) read by _as_os_error.
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CANTOPEN, _SQLITE_FULL = 8, 10, 14, 13
# An I/O error with less room than this is taken for a full disk.
_LOW_SPACE = 1 << 20
_LEFT = "left as it is: move it away or set history.path"


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
    # runtime.backend (contracts/run_backend); a version-1 row: tensorflow
    backend: str = run_backend.DEFAULT
    id: Optional[int] = None  # set when read back

    @property
    def interval_rates(self) -> List[float]:
        """The counted intervals' examples/second (for judge/verdict.py)."""
        return [float(item[3]) for item in json.loads(self.intervals)]

    @property
    def window(self) -> str:
        """The counted steps, 'steps 100-600': runs of another length or
        warm-up are another case."""
        items = json.loads(self.intervals)
        return f"steps {items[0][0]}-{items[-1][1]}" if items else "no steps"

    @property
    def tree(self) -> Optional[str]:
        """The tree the run came from: the trainer's model_dir home
        (:func:`home_of`) or an imported log's LOG_DIR (:func:`log_root`);
        None when the row does not say."""
        if not self.source_path:
            return None
        if self.source == "import":
            return log_root(self.source_path)
        return home_of(self.source_path)

    @property
    def case_label(self) -> str:
        """'1n1g b128 fp32 resnet50 224px, tensorflow, steps 100-600,
        /runs/tree': the setup, the backend, the counted window and the
        tree (runs are compared only within one)."""
        text = case_label(self.nodes, self.gpus_per_node,
                          self.batch_per_device, self.precision, self.model,
                          self.image_size) + f", {self.backend}, {self.window}"
        tree = self.tree
        return f"{text}, {tree}" if tree else text


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
                "model", "image_size", "backend")
# Columns an older format version lacks, and what its rows read as.
_ADDED = {"backend": run_backend.DEFAULT}


def tree_case(source_path: str) -> Optional[Tuple[int, int]]:
    """(nodes, devices per node) of the log tree's case folder a row's
    source is in: the trainer's model_dir (log_tree.ModelDir) or an
    imported log ({N}n{G}g/[node{k}/]rn50_....log under bz{B}/); None
    where the source is not inside a tree."""
    if not source_path:
        return None
    path = os.path.normpath(source_path)
    parsed = log_tree.parse_model_dir(path)
    if parsed is not None:
        return log_tree.parse_case_name(parsed.case)
    if log_tree.parse_log_name(os.path.basename(path)) is None:
        return None
    here = os.path.dirname(path)
    if log_tree.parse_node_dir(os.path.basename(here)) is not None:
        here = os.path.dirname(here)
    batch = log_tree.BATCH_DIR.parse(os.path.basename(os.path.dirname(here)))
    return None if batch is None else \
        log_tree.parse_case_name(os.path.basename(here))


def _count(value: Any) -> Optional[int]:
    """A positive int, else None (bools, strings, 0 are not counts)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def workers_placement(environment: Dict[str, Any], replicas: int
                      ) -> Tuple[int, int]:
    """(num_workers, replicas // num_workers): the count every row was
    filed under before :func:`placement`, a node per process, and the one
    run_key still digests (history_row), so a stored run keeps its key."""
    nodes = int(environment.get("num_workers") or 1)
    return nodes, max(1, replicas // nodes)


def placement(source_path: str, environment: Dict[str, Any], replicas: int
              ) -> Tuple[int, int]:
    """A run's (nodes, devices per node), as the log tree, the extractor
    and official-bench-compare count it: the tree's case folder where the
    source is in one (:func:`tree_case`), else the Horovod block's hosts
    (size // local_size: Horovod's num_workers is its rank count), else
    num_workers; the replicas shared among the nodes."""
    case = tree_case(source_path)
    if case is not None:
        return case
    hvd = environment.get("horovod")
    if isinstance(hvd, dict) and _count(hvd.get("size")) and \
            _count(hvd.get("local_size")):
        nodes = max(1, hvd["size"] // hvd["local_size"])
        return nodes, max(1, replicas // nodes)
    return workers_placement(environment, replicas)


def refiled_placement(source_path: str, environment: str, nodes: int,
                      gpus_per_node: int) -> Optional[Tuple[int, int]]:
    """A stored row's :func:`placement` where it was filed under a node per
    process (:func:`workers_placement`) and that was wrong (Horovod, or
    several workers per node); None for any other row (one with no
    recorded environment: an imported log's case is its tree's)."""
    try:
        env = json.loads(environment or "{}")
    except ValueError:
        return None
    if not isinstance(env, dict) or "num_workers" not in env:
        return None
    replicas = _count(env.get("num_replicas")) or nodes * gpus_per_node
    try:
        if workers_placement(env, replicas) != (nodes, gpus_per_node):
            return None
        new = placement(source_path, env, replicas)
    except (TypeError, ValueError):
        return None
    return None if new == (nodes, gpus_per_node) else new


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


def home_of(model_dir: str) -> str:
    """The directory a model_dir's runs are kept together in: the root of
    the run scripts' MODEL_DIR tree (a whole sweep), the parent of the
    trainer's own ``model_dir/run-<stamp>``, else the model_dir itself
    (nothing goes outside a directory the user named). A relative path
    stays relative."""
    path = os.path.normpath(model_dir)
    parsed = log_tree.parse_model_dir(path)
    if parsed is not None:
        return os.path.normpath(parsed.root)
    if _CLI_RUN_DIR.fullmatch(os.path.basename(path)):
        return os.path.dirname(path) or "."
    return path


def log_root(log_path: str) -> str:
    """The LOG_DIR of a run-script log: its folder less the node, case,
    batch and framework folders (a folder of another shape is kept)."""
    here = os.path.dirname(os.path.normpath(log_path))
    if log_tree.parse_node_dir(os.path.basename(here)) is not None:
        here = os.path.dirname(here)
    if log_tree.parse_case_name(os.path.basename(here)):
        here = os.path.dirname(here)
    if log_tree.BATCH_DIR.parse(os.path.basename(here)) is not None:
        here = os.path.dirname(here)
        framework = os.path.dirname(here)
        if os.path.basename(here) == log_tree.FRAMEWORK_DIRS[-1] and \
                os.path.basename(framework) in log_tree.BACKEND_DIRS.values():
            here = os.path.dirname(framework)
    return here or "."


def default_path(model_dir: Optional[str]) -> Optional[str]:
    """Where the history goes when ``history.path`` is not set: in the
    model_dir's :func:`home_of`, absolute; None without a model_dir."""
    if not model_dir:
        return None
    return os.path.join(home_of(os.path.abspath(model_dir)), FILE_NAME)


def blocking_file(path: str) -> Optional[str]:
    """The nearest existing path above ``path`` when it is not a folder (a
    file where a folder must be made), else None."""
    here = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(here):
        here = os.path.dirname(here)
    return None if os.path.isdir(here) else here


def check_path(path: str) -> None:
    """HistoryError for a path no history can be at: empty, a directory,
    or below a file; checked before anything is read, made or written."""
    if not path:
        raise HistoryError("run history path is empty: give the file's name "
                           "(--db, history.path)")
    if os.path.isdir(path):
        raise HistoryError(f"run history {path} is a directory, expected "
                           f"an SQLite file; {_LEFT}")
    above = blocking_file(path)
    if above:
        raise HistoryError(f"run history {path}: {above} is not a folder")


def _check_header(path: str) -> None:
    """HistoryError unless ``path`` is absent, zero-length (a new history:
    module doc), or an SQLite file (read before SQLite opens it, so a
    foreign file stays as it was)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_HEADER))
    except FileNotFoundError:
        return
    except IsADirectoryError:
        raise HistoryError(f"run history {path} is a directory, expected "
                           f"an SQLite file; {_LEFT}") from None
    except OSError as e:
        raise HistoryError(f"run history {path}: cannot read it: "
                           f"{e.strerror}") from None
    if head and head != _HEADER:
        raise HistoryError(f"run history {path} is not an SQLite database "
                           "(corrupt, or another program's file); left as "
                           "it is: move it away or set history.path")


def _has_wal(path: str) -> bool:
    try:
        return os.path.getsize(path + "-wal") > 0
    except OSError:
        return False


def _check_sound(conn: sqlite3.Connection, path: str) -> None:
    """Under a read lock (no commit half written): whole pages, then
    :func:`_quick_check`."""
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        _check_pages(conn, path)
        _quick_check(conn, path)
    finally:
        _rollback(conn)


def _check_pages(conn: sqlite3.Connection, path: str) -> None:
    """HistoryError unless the file holds as many whole pages as SQLite's
    header says (a cut copy does not: SQLite would read the missing end as
    zeros). Asked of SQLite and os.stat, never through a second open file:
    closing one would drop this process's POSIX locks on the database,
    the read lock this check runs under among them."""
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    size = os.stat(path).st_size
    # Pages still in a WAL file (older histories) are not in the file.
    if size % page or (size < pages * page and not _has_wal(path)):
        raise HistoryError(
            f"run history {path} is cut short or damaged ({size} bytes, its "
            f"header says {pages} page(s) of {page}); {_LEFT}")


def _quick_check(conn: sqlite3.Connection, path: str) -> None:
    """HistoryError when SQLite's ``PRAGMA quick_check`` (the structure of
    every page, without cross-checking indexes: linear in the file, a few
    ms for thousands of runs) finds damage."""
    found = [r[0] for r in conn.execute("PRAGMA quick_check(3)")]
    if found != ["ok"]:
        raise HistoryError(f"run history {path} is damaged (SQLite's "
                           f"quick_check: {found[0]}); {_LEFT}")


def _version(conn: sqlite3.Connection, path: str) -> int:
    """The file's format version, 0 for a new empty database; HistoryError
    for another program's database or a version this code does not read
    (a newer one)."""
    # One statement, one snapshot: a first writer may commit in between.
    app, version, tables = conn.execute(
        "SELECT (SELECT application_id FROM pragma_application_id), "
        "(SELECT user_version FROM pragma_user_version), "
        "(SELECT count(*) FROM sqlite_master)").fetchone()
    if app == 0 and version == 0 and tables == 0:
        return 0
    if app != APPLICATION_ID:
        raise HistoryError(
            f"run history {path} is another program's SQLite database "
            f"(application_id {app:#x}, expected {APPLICATION_ID:#x}); left "
            "as it is: move it away or set history.path")
    if not 1 <= version <= USER_VERSION:
        raise HistoryError(
            f"run history {path} has format version {version}, this "
            f"official_bench reads versions 1 to {USER_VERSION}; left as "
            "it is")
    return version


def _check_identity(conn: sqlite3.Connection, path: str) -> bool:
    """True when the file is ours, False when it is a new empty database;
    HistoryError for another program's database or another version."""
    return _version(conn, path) > 0


def _is_busy(e: sqlite3.OperationalError) -> bool:
    text = str(e).lower()
    return "locked" in text or "busy" in text


def _free_bytes(path: str) -> Optional[int]:
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _as_os_error(e: sqlite3.Error, path: str) -> Optional[OSError]:
    """SQLite's error for a full disk or a file it may not write, as the
    OSError host/write_errors.writing turns into its one line; None for
    anything else. A full disk shows as SQLITE_FULL, or as an I/O error
    (a journal or fsync that failed) with under ``_LOW_SPACE`` free."""
    text = str(e).lower()
    code = (getattr(e, "sqlite_errorcode", None) or 0) & 0xFF
    if code == _SQLITE_FULL or "disk is full" in text:
        return OSError(errno.ENOSPC, str(e), path)
    if code == _SQLITE_IOERR or "disk i/o error" in text:
        free = _free_bytes(path)
        return OSError(errno.ENOSPC, str(e), path) \
            if free is not None and free < _LOW_SPACE else None
    if code in (_SQLITE_READONLY, _SQLITE_CANTOPEN) or \
            "readonly database" in text or "unable to open database" in text:
        err = _unwritable(path)
        return None if err is None else OSError(err, str(e), path)
    return None


def _unwritable(path: str) -> Optional[int]:
    """EROFS or EACCES when this process may not write ``path`` (or make
    the journal beside it), else None."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return errno.EROFS
    except OSError:
        return None
    if not os.access(directory, os.W_OK) or (
            os.path.exists(path) and not os.access(path, os.W_OK)):
        return errno.EACCES
    return None


def _drop_new_sidecars(path: str, before: Sequence[str]) -> None:
    """Remove the -wal/-shm files an open of an older (WAL mode) history
    made and left, empty, after its connection closed: they take the
    database's mode, and a 0444 pair blocks every later write."""
    wal, shm = path + "-wal", path + "-shm"
    with contextlib.suppress(OSError):
        if "-wal" not in before and os.path.getsize(wal) == 0:
            os.remove(wal)
    with contextlib.suppress(OSError):
        if "-shm" not in before and not os.path.exists(wal):
            os.remove(shm)


@contextlib.contextmanager
def _connect(path: str, read_only: bool) -> Iterator[sqlite3.Connection]:
    """A checked connection (header, whole pages, quick_check) with the
    busy timeout; SQLite errors on a damaged file become HistoryError
    naming it; sidecar files the open made are removed after it."""
    check_path(path)
    _check_header(path)
    if read_only and not os.path.exists(path):
        raise HistoryError(f"no run history at {path} (runs are recorded "
                           "there when history.enabled is true, or with "
                           "--import LOG_DIR)")
    if not read_only:
        err = _unwritable(path)
        if err is not None:  # refused before SQLite makes any file
            raise OSError(err, os.strerror(err), path)
    before = [s for s in _SIDECARS if os.path.lexists(path + s)]
    uri = f"file:{path}?mode=ro" if read_only else path
    try:
        try:
            conn = sqlite3.connect(uri, timeout=BUSY_SECONDS, uri=read_only,
                                   isolation_level=None)
        except sqlite3.OperationalError as e:
            raise (_as_os_error(e, path) or HistoryError(
                f"run history {path}: cannot open it: {e}")) from None
        try:
            _check_sound(conn, path)
            yield conn
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError) and _is_busy(e):
                raise
            raise (_as_os_error(e, path) or HistoryError(
                f"run history {path} is damaged (SQLite: {e}); {_LEFT}")
                   ) from None
        finally:
            conn.close()
    finally:
        _drop_new_sidecars(path, before)


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back what is still open (SQLite ends a transaction itself on
    some errors, a full disk among them; a second ROLLBACK would hide the
    first error behind 'no transaction is active')."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _case_index(conn: sqlite3.Connection) -> None:
    conn.execute(f"CREATE INDEX {TABLE}_case ON {TABLE} "
                 f"({', '.join(CASE_COLUMNS)}, unix_time)")


def _migrate(conn: sqlite3.Connection) -> None:
    """A version-1 file to this version, inside the caller's transaction:
    the backend column (its rows keep NULL, read as tensorflow) and the
    case index with it."""
    have = {r[1] for r in conn.execute(f"PRAGMA table_info({TABLE})")}
    for column in _ADDED:
        if column not in have:
            conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN {column} TEXT")
    conn.execute(f"DROP INDEX IF EXISTS {TABLE}_case")
    _case_index(conn)
    conn.execute(f"PRAGMA user_version = {USER_VERSION}")


def migration_note(path: str, old: int) -> str:
    """The one line a write that migrated ``path`` from format ``old``
    says: the versions, what changed, and which official_bench can no
    longer read or write the file."""
    added = "; ".join(_VERSIONS[v][0] for v in range(old + 1,
                                                     USER_VERSION + 1))
    since = _VERSIONS[old + 1][1]
    return (f"run history {path}: format version {old} -> {USER_VERSION} "
            f"({added}); an official_bench older than that ({since}) reads "
            f"version {old} only and can no longer read or write it")


def _say(line: str) -> None:
    """append's default for ``on_migrate``: the line on stderr."""
    print(f"official_bench: {line}", file=sys.stderr, flush=True)


def _initialise(conn: sqlite3.Connection, path: str) -> int:
    """Make a new file ours, migrate an older version, or check it (under
    a write lock, so two first writers cannot both create the table);
    returns the version migrated from, 0 when none was."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _version(conn, path)
        if version == 0:
            conn.execute(_create_sql())
            _case_index(conn)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {USER_VERSION}")
        elif version < USER_VERSION:
            _migrate(conn)
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    return version if 0 < version < USER_VERSION else 0


def _all_stored(conn: sqlite3.Connection, rows: Sequence[Row]) -> bool:
    """Whether every row's run_key is in the file already (one of ours,
    version 1 or later): the append has nothing to write."""
    keys = {row.run_key for row in rows}
    return all(conn.execute(f"SELECT 1 FROM {TABLE} WHERE run_key = ?",
                            (key,)).fetchone() for key in keys)


def _append_once(path: str, rows: Sequence[Row],
                 on_migrate: Callable[[str], None]) -> int:
    with _connect(path, read_only=False) as conn:
        # Identity first: changing the journal mode writes to the file.
        # Nothing new to store: nothing written, not even the migration.
        if _check_identity(conn, path) and _all_stored(conn, rows):
            return 0
        # A rollback journal: a history made in WAL mode by an earlier
        # version is turned back (its -wal and -shm go away).
        conn.execute("PRAGMA journal_mode=DELETE")
        old = _initialise(conn, path)
        if old:  # said at once: a retried insert finds it migrated
            on_migrate(migration_note(path, old))
        sql = (f"INSERT OR IGNORE INTO {TABLE} ({', '.join(_COLUMNS)}) "
               f"VALUES ({', '.join('?' * len(_COLUMNS))})")
        conn.execute("BEGIN IMMEDIATE")
        try:
            added = 0
            for row in rows:
                cur = conn.execute(sql, [getattr(row, c) for c in _COLUMNS])
                added += cur.rowcount
            moved = _refile(conn)
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        if moved:
            on_migrate(refile_note(path, moved))
        return added


def _refile(conn: sqlite3.Connection) -> Dict[Tuple[str, str], int]:
    """Inside the caller's write: every row filed under a node per process
    (refiled_placement) gets its nodes and devices per node, its run_key
    kept; returns {(old case, new case): rows}. Idempotent, and a file
    with no such row is left as it is; only a row of more than one node
    can be one (a node per process counts at least the nodes)."""
    moved: Dict[Tuple[str, str], int] = {}
    found = conn.execute(f"SELECT id, source_path, environment, nodes, "
                         f"gpus_per_node FROM {TABLE} WHERE nodes > 1")
    for rowid, source_path, environment, nodes, gpus in found.fetchall():
        new = refiled_placement(source_path, environment, nodes, gpus)
        if new is None:
            continue
        conn.execute(f"UPDATE {TABLE} SET nodes = ?, gpus_per_node = ? "
                     "WHERE id = ?", (new[0], new[1], rowid))
        move = (log_tree.case_name(nodes, gpus), log_tree.case_name(*new))
        moved[move] = moved.get(move, 0) + 1
    return moved


def refile_note(path: str, moved: Dict[Tuple[str, str], int]) -> str:
    """The one line a write that re-filed rows (_refile) says."""
    cases = ", ".join(f"{old} -> {new} ({n})"
                      for (old, new), n in sorted(moved.items()))
    return (f"run history {path}: {sum(moved.values())} run(s) filed by an "
            "older official_bench under a node per process (Horovod, or "
            f"several workers per node) re-filed under their nodes: {cases}"
            "; their run keys are kept, so each is still stored once")


def append(path: str, rows: Sequence[Row],
           on_migrate: Optional[Callable[[str], None]] = None) -> int:
    """Append ``rows`` (one transaction); returns how many were new (a row
    whose run_key is already stored is skipped; when all are, the file is
    not written at all). A write that migrates an older format hands
    :func:`migration_note` to ``on_migrate`` (default: stderr), one that
    re-files rows (:func:`_refile`) :func:`refile_note`. Retries
    while another writer holds the lock; HistoryError for a file that is
    not a sound history (nothing written); OSError (no space, read-only,
    permission) passes through for the caller's
    host/write_errors.writing."""
    check_path(path)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    pause = 0.05
    for attempt in range(RETRIES + 1):
        try:
            return _append_once(path, rows, on_migrate or _say)
        except sqlite3.OperationalError as e:
            if not _is_busy(e) or attempt == RETRIES:
                raise HistoryError(f"run history {path}: still locked "
                                   f"after {attempt + 1} tries: {e}"
                                   ) from None
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 2.0)
    raise AssertionError("unreachable")


def _checked(row: Row, path: str) -> Row:
    """The row, or HistoryError when its JSON columns do not decode (a
    damaged record that SQLite's structure check does not see)."""
    try:
        row.interval_rates
        json.loads(row.environment)
        json.loads(row.devices)
    except (ValueError, TypeError, IndexError, KeyError) as e:
        raise HistoryError(f"run history {path}: run {row.id} is damaged "
                           f"({type(e).__name__}: {e}); {_LEFT}") from None
    return row


def _expressions(conn: sqlite3.Connection) -> Dict[str, str]:
    """Each column as SQL reads it from this file: a column an older
    version lacks (or a row left NULL by the migration) as its value
    then (_ADDED)."""
    have = {r[1] for r in conn.execute(f"PRAGMA table_info({TABLE})")}
    out = {c: c for c in _COLUMNS}
    for column, then in _ADDED.items():
        out[column] = (f"COALESCE({column}, '{then}')" if column in have
                       else f"'{then}'")
    return out


def read_rows(path: str, where: Optional[Dict[str, Any]] = None
              ) -> List[Row]:
    """Rows in time order, optionally those whose columns equal ``where``'s
    values (None matches NULL). Opens the file read-only; a version-1
    file's rows read as tensorflow's."""
    for key in where or {}:
        if key not in _COLUMNS:
            raise ValueError(f"unknown history column {key!r}")
    with _connect(path, read_only=True) as conn:
        if not _check_identity(conn, path):
            return []
        expr = _expressions(conn)
        clauses, values = [], []
        for key, value in (where or {}).items():
            if value is None:
                clauses.append(f"{expr[key]} IS NULL")
            else:
                clauses.append(f"{expr[key]} = ?")
                values.append(value)
        sql = (f"SELECT id, {', '.join(expr[c] for c in _COLUMNS)} "
               f"FROM {TABLE}")
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY unix_time, id"
        out = []
        for record in conn.execute(sql, values):
            row = Row(*record[1:])
            row.id = record[0]
            out.append(_checked(row, path))
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
