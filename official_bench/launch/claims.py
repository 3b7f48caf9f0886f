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
tell (no process with that pid, or one started after the claim): it takes
the stale claim over, saying so. A claim from another host cannot be
checked from here, so it stops, naming host, pid and start time and the way
out (remove the file once that launcher is known to be gone).
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
    """Who holds a claim: what its file says."""
    host: str
    pid: int
    started: float  # time.time() when it claimed
    script: str = ""
    session: str = ""

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
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def _process_start(pid: int) -> Optional[float]:
    """When process `pid` started (seconds since the epoch, from
    /proc/<pid>/stat's start time after boot and /proc/stat's btime), or
    None off Linux or when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii",
                  errors="replace") as f:
            stat = f.read()
        with open("/proc/stat", encoding="ascii", errors="replace") as f:
            btime = next(int(line.split()[1]) for line in f
                         if line.startswith("btime "))
        # Fields after "(comm)": state is field 3, starttime field 22.
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _pid_started_after(pid: int, when: float) -> bool:
    """Whether process `pid` started after `when` (so it reused the pid of
    a dead launcher); False when it cannot be told."""
    start = _process_start(pid)
    return start is not None and start > when + 2.0


def is_stale(holder: Holder, host: str) -> bool:
    """A claim of this host whose launcher no longer runs."""
    if holder.host != host:
        return False
    return not _pid_alive(holder.pid) or _pid_started_after(holder.pid,
                                                            holder.started)


def read_holder(path: str) -> Optional[Holder]:
    """The claim's holder, or None when the file is gone or unreadable (a
    launcher that died between creating and writing it)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return Holder(str(data["host"]), int(data["pid"]),
                      float(data["started"]), str(data.get("script", "")),
                      str(data.get("session", "")))
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

    def take(self, folder: str, name: str) -> None:
        """Claims `folder` (created if needed). ClaimError when another
        live launcher, or one on another host, holds it; NotWritable when
        the claim cannot be written."""
        path = os.path.join(folder, name)
        self._made.append((folder, _first_missing(folder)))
        with writing(folder, "the case directory"):
            os.makedirs(folder, exist_ok=True)
        for _ in range(2):
            if self._create(path):
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
            if not is_stale(holder, self.host):
                raise ClaimError(
                    f"{folder} is in use by another launcher: "
                    f"{holder.describe()}; wait for it to end or use "
                    f"another LOG_DIR (if it is gone, e.g. its node "
                    f"rebooted, remove {path})")
            self.notes.append(f"took over the stale claim of "
                              f"{holder.describe()} (no such process) on "
                              f"{folder}")
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
        raise ClaimError(f"{folder}: another launcher claimed it at the "
                         f"same moment ({path}); use another LOG_DIR")

    def _create(self, path: str) -> bool:
        """Creates the claim file exclusively; False when it exists."""
        record = {"host": self.host, "pid": os.getpid(),
                  "started": time.time(), "script": self.script,
                  "session": self.session}
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
        another launcher took over)."""
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
