"""A full disk under TensorFlow's own writes, as one line.

Checkpoints, the SavedModel, profiler traces and TFRecord shards are written
by TensorFlow's C++ file layer. It does not raise OSError: a full disk comes
back as ``tf.errors.ResourceExhaustedError`` ("<file>; No space left on
device"), a read-only mount or a missing permission as another OpError with
the C library's words in the message. :func:`tf_writing` maps those causes,
and only those, to :class:`~official_bench.host.write_errors.NotWritable`
(the line host/write_errors.py prints everywhere else); an out-of-memory
ResourceExhaustedError or any other error passes through unchanged.

TensorFlow does not clean up after such a failure (a ``model.ckpt-N_temp``
directory, a truncated ``.xplane.pb``), so the caller may name a directory
whose entries that appeared during the write are removed on the way out.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from typing import Iterator, Optional, Set, Tuple

from official_bench.host.write_errors import (
    NOT_WRITABLE_ERRNOS,
    NotWritable,
    as_not_writable,
    free_bytes,
)
from official_bench.runtime.keras_setup import tf

# strerror() text as TensorFlow's POSIX file system copies it into messages.
_STRERROR = tuple((code, os.strerror(code)) for code in sorted(
    NOT_WRITABLE_ERRNOS))


def op_error_errno(exc: BaseException) -> Optional[int]:
    """The user-fixable errno behind a TensorFlow error, read from its
    message; None when the message names none (an OOM, a bug, a peer)."""
    if not isinstance(exc, tf.errors.OpError):
        return None
    message = exc.message or ""
    for code, text in _STRERROR:
        if text in message:
            return code
    return None


def _entries(directory: Optional[str]) -> Optional[Set[str]]:
    """Names in ``directory`` now (empty when it does not exist yet)."""
    if directory is None:
        return None
    try:
        return set(os.listdir(directory))
    except OSError:
        return set()


def _remove_new(directory: str, before: Set[str],
                prefixes: Tuple[str, ...]) -> None:
    """Removes what a failed write left in ``directory``: every entry named
    ``prefixes*`` that was not there before it started. Best effort: the
    disk is the problem."""
    for name in _entries(directory) - before:
        if not name.startswith(prefixes):
            continue
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)


@contextlib.contextmanager
def tf_writing(path: str, what: str, cleanup_dir: Optional[str] = None,
               cleanup_prefixes: Tuple[str, ...] = ("",)) -> Iterator[None]:
    """Run a TensorFlow write of ``what`` to ``path``; a full disk, quota,
    read-only file system or permission error leaves as NotWritable, after
    removing the entries named ``cleanup_prefixes*`` it added to
    ``cleanup_dir`` (if given)."""
    before = _entries(cleanup_dir)
    try:
        yield
    except (OSError, tf.errors.OpError) as e:
        code = e.errno if isinstance(e, OSError) else op_error_errno(e)
        if code not in NOT_WRITABLE_ERRNOS:
            raise
        if cleanup_dir is not None:
            _remove_new(cleanup_dir, before or set(), cleanup_prefixes)
        if isinstance(e, OSError):
            raise as_not_writable(e, path, what) from e
        raise NotWritable(code, path, what, free_bytes(path)) from e

