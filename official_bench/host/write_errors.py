"""One line for a file a command could not write.

A full disk, a quota, a read-only mount, a missing permission, a file
where a folder should be (or the reverse) or a broken symbolic link on the
way (a scratch link whose target is not mounted) would end in a Python
traceback from wherever the write happened. Every writer (the trainer's
params.yaml, result.json, checkpoints and SavedModel; the launcher's logs
and status files; the extractor; the TFRecord builder; the doctor; the
run history) wraps its write in :func:`writing`, which turns those causes
into :class:`NotWritable`: a message that names the path, what was being
written and, for the disk's causes, the free space there (a kernel file
system that takes no new entries, /proc or /sys, is named as such). Entry
points print it as their one ``error:`` line and exit with
``exit_status.NOT_WRITABLE``; other OSErrors pass through unchanged.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from typing import Iterator, Optional

# The causes a user fixes outside the program (free space, a quota, a mount,
# permissions, a file in a folder's place), as opposed to a bug. EDQUOT is
# missing on some platforms.
NOT_WRITABLE_ERRNOS = frozenset(
    code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None),
                      errno.EROFS, errno.EACCES, errno.EPERM,
                      errno.ENOTDIR, errno.EISDIR)
    if code is not None)
# Causes in the path itself, where the free space says nothing.
_PATH_ERRNOS = (errno.ENOTDIR, errno.EISDIR)
MOUNTS = "/proc/self/mounts"
# Kernel file systems that take no new file or folder from anyone (mkdir
# says ENOENT on proc, EPERM on sysfs).
NO_ENTRY_FILE_SYSTEMS = ("proc", "sysfs")

_CAUSE = {
    errno.ENOSPC: "no space left on the device",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "a folder is in the file's place",
}
if hasattr(errno, "EDQUOT"):
    _CAUSE[errno.EDQUOT] = "disk quota exceeded"


class NotWritable(OSError):
    """A write failed for a reason the user must fix; ``str()`` is the line.

    Subclasses OSError (same errno) so code that already catches OSError
    keeps working; ``path`` and ``what`` say which file and why it mattered.
    """

    def __init__(self, err: int, path: str, what: str,
                 free_bytes: Optional[int], cause: Optional[str] = None):
        self.path = path
        self.what = what
        self.free_bytes = free_bytes
        super().__init__(err, _message(err, path, what, free_bytes, cause))

    def __str__(self) -> str:
        return self.strerror or ""


def free_bytes(path: str) -> Optional[int]:
    """Free bytes for an unprivileged user on the file system holding
    ``path`` (its nearest existing parent), or None if that cannot be read."""
    probe = os.path.abspath(path)
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def human_bytes(count: int) -> str:
    """Bytes in the largest binary unit that keeps the number >= 1."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else \
                f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _message(err: int, path: str, what: str, free: Optional[int],
             cause: Optional[str] = None) -> str:
    if cause is not None:  # a cause in the path (a broken link)
        return f"cannot write {what} to {path}: {cause}"
    cause = _CAUSE.get(err, os.strerror(err))
    if err in _PATH_ERRNOS:
        return f"cannot write {what} to {path}: {cause}"
    room = "free space unknown" if free is None else \
        f"{human_bytes(free)} free there"
    return f"cannot write {what} to {path}: {cause} ({room})"


def as_not_writable(exc: OSError, path: str, what: str) -> OSError:
    """``exc`` as :class:`NotWritable` when its cause is one the user fixes,
    else ``exc`` itself (a bug or a cause we do not know stays as it was)."""
    if isinstance(exc, NotWritable):
        return exc
    if _file_above(exc, path):  # makedirs(exist_ok=True) on a file
        return NotWritable(errno.ENOTDIR, path, what, None)
    if exc.errno == errno.ENOENT:  # a broken link or /proc is the user's
        for probe in (exc.filename, path):
            link = broken_link_on_way(probe) if isinstance(probe, str) \
                else None
            if link:
                return NotWritable(errno.ENOENT, path, what, None,
                                   broken_link_cause(link))
    if exc.errno in (errno.ENOENT, errno.EPERM):
        kernel = refuses_entries(path)
        if kernel:
            return NotWritable(exc.errno, path, what, None, kernel)
    if exc.errno == errno.ENOENT:
        return exc
    if exc.errno not in NOT_WRITABLE_ERRNOS:
        return exc
    # The failing file may be a temporary or a file inside ``path``.
    return NotWritable(exc.errno, path, what, free_bytes(path))


def nearest_entry(path: str) -> str:
    """``path`` or its nearest parent that exists (a dangling link counts:
    it exists as a link)."""
    probe = os.path.abspath(path)
    while not os.path.lexists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    return probe


def broken_link_on_way(path: str) -> Optional[str]:
    """The symbolic link whose target is missing that stands at ``path``
    or where a folder above it should be, or None."""
    probe = nearest_entry(path)
    if os.path.islink(probe) and not os.path.exists(probe):
        return probe
    return None


def broken_link_cause(link: str) -> str:
    """The words for a dangling link (the launcher's, launch/preflight.py)."""
    try:
        target = f" (to {os.readlink(link)})"
    except OSError:
        target = ""
    return f"{link} is a broken symbolic link{target}"


def _mount_field(text: str) -> str:
    """A mounts field with its octal escapes (\\040 for a space) undone."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def file_system_type(path: str, mounts: str = MOUNTS) -> Optional[str]:
    """The type ("ext4", "proc") of the file system holding the existing
    ``path``: the last-mounted longest mount point above it; None where
    the mount table cannot be read (not Linux)."""
    try:
        with open(mounts, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = -1, None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _mount_field(fields[1])
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best:
            best, kind = len(point), fields[2]
    return kind


def refuses_entries(path: str, mounts: str = MOUNTS) -> Optional[str]:
    """Why nothing can be made at ``path``: its nearest existing folder is
    on a kernel file system that takes no new file or folder (/proc,
    /sys); else None."""
    probe = nearest_entry(path)
    if not os.path.isdir(probe):
        return None
    kind = file_system_type(probe, mounts)
    if kind not in NO_ENTRY_FILE_SYSTEMS:
        return None
    return (f"{probe} is on the kernel's {kind} file system, which takes no "
            "new files or folders")


def check_folder(folder: str, what: str) -> None:
    """NotWritable when ``folder`` cannot be or become a folder: a broken
    symbolic link or a file where it or a folder above it should be, or a
    kernel file system (/proc) under it. Found without writing anything,
    so an entry point can ask before its slow start; permissions and free
    space are left to the writes."""
    link = broken_link_on_way(folder)
    if link:
        raise NotWritable(errno.ENOENT, folder, what, None,
                          broken_link_cause(link))
    if not os.path.isdir(nearest_entry(folder)):
        raise NotWritable(errno.ENOTDIR, folder, what, None)
    kernel = refuses_entries(folder)
    if kernel:
        raise NotWritable(errno.EPERM, folder, what, None, kernel)


def _file_above(exc: OSError, path: str) -> bool:
    """Whether ``exc`` is os.makedirs' EEXIST for a file that stands where
    a folder above ``path`` should be (it says EEXIST, not ENOTDIR)."""
    above = exc.filename
    if exc.errno != errno.EEXIST or not isinstance(above, str):
        return False
    above = os.path.abspath(above)
    return (os.path.abspath(path).startswith(above.rstrip(os.sep) + os.sep)
            and os.path.exists(above) and not os.path.isdir(above))


@contextlib.contextmanager
def writing(path: str, what: str) -> Iterator[None]:
    """Run a write of ``what`` to ``path``; a full disk, quota, read-only
    file system or permission error leaves as :class:`NotWritable`."""
    try:
        yield
    except OSError as e:
        converted = as_not_writable(e, path, what)
        if converted is e:
            raise
        raise converted from e
