"""TensorFlow's CUDA start-up lines on a machine without GPUs, replaced by one.

A TensorFlow wheel built with CUDA, loaded where there is no GPU, prints
"Could not find cuda drivers on your machine, GPU will not be used." and,
at its first device listing, "failed call to cuInit: ... UNKNOWN ERROR
(303)": an error line in every CPU run, written by C++ straight to file
descriptor 2 (TF_CPP_MIN_LOG_LEVEL does not reach it in TensorFlow 2.21).

`no_gpu_reason` says, before TensorFlow loads, whether this machine has no
GPU at all (no /dev/nvidia* device, no nvidia-smi) and why, in our words;
only then does `dropping_lines` filter those two lines out of fd 2 while
TensorFlow loads and lists its devices (runtime/keras_setup.py), every
other line passing through at once. A GPU machine is never filtered and
nothing is hidden from TensorFlow: CUDA_VISIBLE_DEVICES is left alone.
Standard library only.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import sys
import threading
from typing import Iterator, Optional, Sequence

# The lines a GPU-less machine gets from TensorFlow's CUDA start-up.
NO_GPU_LINES = ("failed call to cuInit",
                "Could not find cuda drivers on your machine")


def no_gpu_reason(dev: str = "/dev") -> Optional[str]:
    """'no GPU on this machine (...)' when there is no NVIDIA device node
    and no nvidia-smi; None when either is there (a GPU machine, or one
    whose GPU TensorFlow should explain itself)."""
    if glob.glob(os.path.join(dev, "nvidia*")) or shutil.which("nvidia-smi"):
        return None
    return (f"no GPU on this machine (no {dev}/nvidia* device, no "
            "nvidia-smi): TensorFlow runs on the CPU")


def _forward(source: int, target: int, markers: Sequence[str]) -> None:
    """Copy lines from `source` to `target` until EOF, dropping those that
    hold a marker; closes both."""
    pending = b""
    encoded = [m.encode() for m in markers]
    try:
        while True:
            chunk = os.read(source, 65536)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            kept = [line + b"\n" for line in lines
                    if not any(m in line for m in encoded)]
            if kept:
                os.write(target, b"".join(kept))
        if pending and not any(m in pending for m in encoded):
            os.write(target, pending)
    except OSError:
        pass
    finally:
        os.close(source)
        os.close(target)


@contextlib.contextmanager
def dropping_lines(markers: Sequence[str] = NO_GPU_LINES,
                   fd: int = 2) -> Iterator[None]:
    """Inside the block, lines written to `fd` (by C++ or Python) that hold
    one of `markers` are dropped; the others pass through as they come."""
    try:
        saved = os.dup(fd)
        read, write = os.pipe()
    except OSError:  # no fd to filter: say everything
        yield
        return
    sys.stderr.flush()
    os.dup2(write, fd)
    os.close(write)
    thread = threading.Thread(target=_forward, daemon=True,
                              args=(read, os.dup(saved), markers))
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, fd)  # the pipe's last writer closes: the reader ends
        os.close(saved)
        thread.join(timeout=5)
