"""Atomic file writes for result files (and the launcher's result copies).

Readers (people, CI jobs, a second extractor run) must never see a half-written
JSON, table or plot: every output is written to a temporary file in the target
directory and moved into place with ``os.replace``, which is atomic on POSIX
and Windows when source and target are on the same file system.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Iterator


@contextlib.contextmanager
def atomic_path(path: str, exclusive: bool = False) -> Iterator[str]:
    """Yield a temporary path next to ``path``; move it onto ``path`` on
    success.

    For writers that want a file name rather than a file object (matplotlib's
    ``savefig``). On an exception the temporary file is removed and ``path`` is
    left as it was. ``exclusive``: the file is linked to ``path`` instead of
    moved, so an existing ``path`` is never overwritten (FileExistsError);
    the temporary file is removed in every case.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        # mkstemp makes the file private (0600); results are shared files, so
        # give them the permissions a plain open() would.
        os.chmod(tmp, 0o666 & ~_umask())
        yield tmp
        if exclusive:
            os.link(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    if exclusive:
        with contextlib.suppress(OSError):
            os.remove(tmp)


def _umask() -> int:
    """Return the process umask (only readable by setting it, so set it
    back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes_atomic(path: str, data: bytes,
                       exclusive: bool = False) -> None:
    """Write ``data`` to ``path`` atomically, flushed to disk before the
    rename (``exclusive``: never over an existing ``path``, atomic_path)."""
    with atomic_path(path, exclusive) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def write_text_atomic(path: str, text: str, exclusive: bool = False) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (``exclusive``: as
    write_bytes_atomic's)."""
    write_bytes_atomic(path, text.encode("utf-8"), exclusive)
