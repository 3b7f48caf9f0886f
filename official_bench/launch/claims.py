"""One log, one writer: a launcher claims each case directory it writes.

Two launchers on the same case of the same log tree (two Slurm jobs sharing
a results directory, a second terminal) would write the same
rn50_b{B}_{dtype}_{i}.log, and one run would be lost without a word. Before any
run, each launcher creates, with O_CREAT | O_EXCL, a claim file in every
case directory it will write (per node, batch, dtype and bench):

    {case dir}/.rn50_b{B}_{dtype}.claim     {"host", "pid", "started", ...}

and removes it when it ends. O_EXCL creation is atomic on local file systems
and on NFS (v3 and later), unlike fcntl locks, which some NFS set-ups do not
support; the file is a dot-file without .log, so neither the extractor's
*/*.log glob nor DLPerf's scripts see it.

A claim whose launcher is gone is stale. On the same host the launcher can
tell (`stale_because`): no process with that pid; a zombie (a launcher
killed with SIGKILL whose parent has not reaped it yet, or never will, as
under a container's PID 1 without an init); or another program under a
reused pid (its start time, /proc/<pid>/stat's field 22, is not the one
the claim recorded; a claim without that field is compared by wall
time). It takes the stale claim over, saying why. A claim from another
host cannot be checked from here, so it stops, naming host, pid and start
time and the way out (remove the file once that launcher is known to be
gone).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from typing import List, Optional

from official_bench.contracts import log_tree
from official_bench.host.write_errors import writing

CLAIM_SUFFIX = ".claim"


class ClaimError(Exception):
    """Another launcher holds a case directory; str() is the one line."""


@dataclasses.dataclass(frozen=True)
class Holder:
    """Who holds a claim: what its file says (`proc_start`: its process's
    start time in clock ticks after boot, None in claims written before
    it was recorded)."""
    host: str
    pid: int
    started: float  # time.time() when it claimed
    script: str = ""
    session: str = ""
    proc_start: Optional[int] = None

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S",
                             time.localtime(self.started))
        return (f"{self.script or 'a launcher'} on host {self.host}, pid "
                f"{self.pid}, started {when}")


def claim_name(batch: int, dtype: str, bench: str = "") -> str:
    """'.rn50_b8_fp32.claim': the run stem without its index, as a
    dot-file (allreduce runs: '.allreduce_fp32.claim')."""
    stem = log_tree.run_stem(batch, dtype, 0, bench)
    return "." + stem[:stem.rindex("_")] + CLAIM_SUFFIX


def _pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists (a zombie does)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


@dataclasses.dataclass(frozen=True)
class ProcStat:
    """What /proc/<pid>/stat says of a process: its state (field 3: R, S,
    D, Z for a zombie, X for dead, ...) and its start time in clock ticks
    after boot (field 22)."""
    state: str
    start_ticks: int

    @classmethod
    def read(cls, pid: int) -> Optional["ProcStat"]:
        """None off Linux, for no such process, or when it cannot be
        read."""
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii",
                      errors="replace") as f:
                stat = f.read()
            # The fields after "(comm)", which may hold spaces and ")":
            # state is field 3, starttime field 22.
            fields = stat[stat.rindex(")") + 2:].split()
            return cls(fields[0], int(fields[19]))
        except (OSError, ValueError, IndexError):
            return None

    def started_at(self) -> Optional[float]:
        """The start time in seconds since the epoch (/proc/stat's
        btime + ticks), or None when it cannot be read."""
        try:
            with open("/proc/stat", encoding="ascii", errors="replace") as f:
                btime = next(int(line.split()[1]) for line in f
                             if line.startswith("btime "))
            return btime + self.start_ticks / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError, StopIteration):
            return None


def stale_because(holder: Holder, host: str) -> Optional[str]:
    """Why a claim of this host is stale (its launcher no longer runs),
    or None: held, or of another host, which cannot be told from here."""
    if holder.host != host:
        return None
    if not _pid_alive(holder.pid):
        return "no such process"
    stat = ProcStat.read(holder.pid)
    if stat is None:
        return None  # alive, and nothing more can be told
    if stat.state in ("Z", "X"):
        return "its process is a zombie: killed, not reaped by its parent"
    if holder.proc_start is not None:
        if stat.start_ticks != holder.proc_start:
            return "that pid is now another program"
        return None
    # A claim without proc_start: a process started after the claim took
    # the dead launcher's pid.
    start = stat.started_at()
    if start is not None and start > holder.started + 2.0:
        return "that pid is now another program"
    return None


def is_stale(holder: Holder, host: str) -> bool:
    """A claim of this host whose launcher no longer runs."""
    return stale_because(holder, host) is not None


def read_holder(path: str) -> Optional[Holder]:
    """The claim's holder, or None when the file is gone or unreadable (a
    launcher that died between creating and writing it)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        proc_start = data.get("proc_start")
        return Holder(str(data["host"]), int(data["pid"]),
                      float(data["started"]), str(data.get("script", "")),
                      str(data.get("session", "")),
                      None if proc_start is None else int(proc_start))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Claims:
    """The claims this launcher holds; release() removes them."""

    def __init__(self, script: str, session: str,
                 host: Optional[str] = None):
        self.script = script
        self.session = session
        self.host = host or socket.gethostname()
        self.held: List[str] = []
        # (folder, the first of its ancestors that did not exist): what
        # release() removes again when no run wrote into it.
        self._made: List[tuple] = []
        self.notes: List[str] = []  # stale claims taken over

    def take(self, folder: str, name: str,
             root: Optional[str] = None) -> None:
        """Claims `folder` (created if needed). ClaimError when another
        live launcher, or one on another host, holds it; NotWritable when
        the claim cannot be written. `root` (LOG_DIR): see _removable_top."""
        path = os.path.join(folder, name)
        top = _removable_top(folder, root)
        self._made.append((folder, top))
        for _ in range(2):
            if self._make_and_create(folder, path, top):
                self.held.append(path)
                return
            holder = read_holder(path)
            if holder is None:
                if not os.path.exists(path):
                    continue  # released meanwhile: try again
                raise ClaimError(
                    f"{folder} is claimed by a launcher whose claim file "
                    f"{path} cannot be read; if no launcher writes there, "
                    f"remove {path}, or use another LOG_DIR")
            why = stale_because(holder, self.host)
            if why is None:
                raise ClaimError(
                    f"{folder} is in use by another launcher: "
                    f"{holder.describe()}; wait for it to end or use "
                    f"another LOG_DIR (if it is gone, e.g. its node "
                    f"rebooted, remove {path})")
            self.notes.append(f"took over the stale claim of "
                              f"{holder.describe()} ({why}) on {folder}")
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
        raise ClaimError(f"{folder}: another launcher claimed it at the "
                         f"same moment ({path}); use another LOG_DIR")

    def _make_and_create(self, folder: str, path: str,
                         top: Optional[str]) -> bool:
        """Makes `folder` and creates the claim in it; again when another
        launcher's end removed the folder, empty, in between."""
        for attempt in range(3):
            with writing(folder, "the case directory"):
                os.makedirs(folder, exist_ok=True)
            try:
                return self._create(path, top)
            except FileNotFoundError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _create(self, path: str, top: Optional[str] = None) -> bool:
        """Creates the claim file exclusively; False when it exists. It
        names the highest folder this launcher made (`made`), which a
        launcher ending after it may then remove."""
        record = {"host": self.host, "pid": os.getpid(),
                  "started": time.time(), "script": self.script,
                  "session": self.session, "made": top}
        me = ProcStat.read(os.getpid())
        if me is not None:
            record["proc_start"] = me.start_ticks
        with writing(path, "the launcher's claim on this case"):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                             0o644)
            except FileExistsError:
                return False
            try:
                os.write(fd, (json.dumps(record) + "\n").encode())
                os.fsync(fd)
            except OSError:
                os.close(fd)
                os.remove(path)
                raise
            os.close(fd)
        return True

    def release(self) -> None:
        """Removes the claims this launcher still holds (not a claim that
        another launcher took over), then the empty folders up to each
        _removable_top: what it made, and what a launcher that shared them
        made and could not remove while this one held them."""
        for path in self.held:
            holder = read_holder(path)
            if holder is not None and holder.session == self.session and \
                    holder.pid == os.getpid():
                try:
                    os.remove(path)
                except OSError:
                    pass
        self.held = []
        for folder, top in self._made:
            _remove_empty(folder, top)
        self._made = []


def _first_missing(folder: str) -> Optional[str]:
    """The highest ancestor of `folder` (or itself) that does not exist;
    None when `folder` exists."""
    folder = os.path.abspath(folder)
    missing = None
    while not os.path.exists(folder):
        missing = folder
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return missing


def _only_claims(folder: str) -> Optional[List[str]]:
    """The claim files under `folder` when it holds nothing else but
    folders; None when it holds any other file."""
    claims = []
    for here, _, files in os.walk(folder):
        for name in files:
            if not name.endswith(CLAIM_SUFFIX):
                return None
            claims.append(os.path.join(here, name))
    return claims


def _made_by(claim: str) -> Optional[str]:
    """The highest folder the claim's launcher made (its `made`), or None."""
    try:
        with open(claim, encoding="utf-8") as f:
            made = json.load(f).get("made")
    except (OSError, ValueError, AttributeError):
        return None
    return os.path.abspath(made) if isinstance(made, str) else None


def _removable_top(folder: str, root: Optional[str]) -> Optional[str]:
    """The highest folder from `folder` up that release() may remove again
    when empty: the highest missing one and, where `root` (LOG_DIR) is
    given, above it every one strictly below root holding nothing but
    folders and claims, and the highest folder those claims say their
    launchers made. Another launcher made those: it may end while this
    one's claim keeps them from being empty, and leave them. A folder in
    use holds a claim, so rmdir leaves it."""
    top = _first_missing(folder)
    if root is None:
        return top
    root = os.path.abspath(root).rstrip(os.sep) + os.sep
    probe = os.path.dirname(top) if top else os.path.abspath(folder)
    while probe.startswith(root):
        claims = _only_claims(probe)
        if claims is None:
            break
        made = [m for m in map(_made_by, claims)
                if m and (probe + os.sep).startswith(m.rstrip(os.sep)
                                                     + os.sep)]
        top = min([probe] + made, key=len)
        probe = os.path.dirname(probe)
    return top


def _remove_empty(folder: str, top: Optional[str]) -> None:
    """Removes `folder` and its parents up to `top` while they are empty:
    a launcher that stopped before any run leaves no trace."""
    if top is None:
        return
    folder = os.path.abspath(folder)
    while True:
        try:
            os.rmdir(folder)
        except OSError:
            return
        if folder == top:
            return
        folder = os.path.dirname(folder)
