"""Which of its files an input worker process is on: the records reader
notes each file as it opens it and before each read (`note`), in a shared
int its pool gave the worker (data/feeds/shm_workers.py), so a worker
stalled on a file (a dead mount, a FIFO) or dead is named with that file.
TensorFlow-free.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

# In a worker: [its shared int, {file: index}]. The int is 0 (nothing
# noted), k + 1 (opening files[k]) or -(k + 1) (reading it).
_NOTED: List[Any] = []


def start(value, files: Sequence[str]) -> None:
    """In a worker: notes go to `value` (a shared int), for `files`."""
    _NOTED[:] = [value, {f: k for k, f in enumerate(files)}]


def note(path: str, opening: bool) -> None:
    """The worker is now opening (or reading) `path`; outside a worker,
    or for a file not its, nothing."""
    if _NOTED and path in _NOTED[1]:
        k = _NOTED[1][path] + 1
        _NOTED[0].value = k if opening else -k


def noted(value: int, files: Sequence[str]) -> Optional[str]:
    """"opening F" or "reading F" from a worker's int, None if unset."""
    if not 0 < abs(value) <= len(files):
        return None
    return f"{'opening' if value > 0 else 'reading'} {files[abs(value) - 1]}"
