"""A tiny file system for disk-full tests: a tmpfs of a few pages.

Mounting needs root (and a kernel that lets this container mount); where it
is not allowed the test is skipped with the reason, and its sibling test
that injects the error in-process still covers the logic.
"""

import contextlib
import os
import subprocess

import pytest

PAGE = 4096  # tmpfs counts its size in pages


@contextlib.contextmanager
def small_tmpfs(directory, size_bytes):
    """Mounts a tmpfs of ``size_bytes`` (whole pages) on ``directory`` for
    the block; unmounts it afterwards, whatever the test did."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    os.makedirs(directory, exist_ok=True)
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755",
         "tmpfs", str(directory)], capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.strip()}")
    try:
        yield str(directory)
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def free_bytes(directory):
    """Free bytes on the file system holding ``directory``."""
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def leave_free(directory, free):
    """Fills the file system of ``directory`` with a hidden file until
    ``free`` bytes (whole pages) are left; returns the filler's path."""
    filler = os.path.join(directory, ".filler")
    size = free_bytes(directory) - free
    assert size >= 0, (directory, free_bytes(directory), free)
    with open(filler, "wb") as f:
        f.write(b"\0" * size)
    assert free_bytes(directory) == free, free_bytes(directory)
    return filler


def temp_files(directory):
    """Temporaries (``.*.tmp``, TensorFlow's ``*_temp``) anywhere below
    ``directory``: what a failed write must not leave."""
    found = []
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            if name.endswith((".tmp", "_temp")) or ".tmp" in name \
                    or "tempstate" in name:
                found.append(os.path.join(root, name))
    return found
