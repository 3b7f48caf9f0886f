"""Undo TensorFlow 2.21's freeze of glibc malloc's mmap threshold.

TensorFlow 2.21 calls `mallopt(-3 /* M_MMAP_THRESHOLD */, 128 KiB)` the first
time a process builds a GeneratorDataset kernel (`ApplyPython311MemoryPatch`
in tensorflow/core/kernels/data/generator_dataset_op.cc; its log line says
it set M_TRIM_THRESHOLD, the code passes -3). tf.distribute builds such a
kernel for every distributed dataset, so every trainer process gets it. Any
mallopt call also switches off glibc's dynamic threshold, so from then on
every host buffer of 128 KiB or more (Eigen's GEMM packing blocks,
activations, decoded images) is a fresh mmap, zero-filled page by page and
unmapped on free: CPU steps spend their time in page faults, and on a GPU
machine the input pipeline's decoded images do (BENCHMARKS.md, "vs Model
Garden: TensorFlow 2.21's malloc thresholds").

runtime/malloc.py's `restore_malloc_thresholds` first provokes the
once-per-process patch (a one-element from_generator dataset), then sets the
mmap threshold to glibc's own dynamic ceiling (32 MiB on 64-bit) and the trim
threshold to twice that, the values glibc's dynamic rule itself would reach.
Free memory above 64 MiB at the top of the heap is still returned to the
system, which is the memory growth TensorFlow's patch was written against.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from typing import Dict, Optional

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: the most its dynamic rule
# ever raises the mmap threshold to, and the most mallopt accepts.
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD


def libc_mallopt():
    """glibc's mallopt, or None (musl, macOS: TensorFlow's patch is glibc's
    too, so there is nothing to undo)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                       use_errno=True)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is not None:
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
    return mallopt


def set_thresholds(mmap_threshold: int = MMAP_THRESHOLD,
                   trim_threshold: int = TRIM_THRESHOLD) -> Optional[Dict]:
    """mallopt both thresholds; the values set, or None where not glibc."""
    mallopt = libc_mallopt()
    if mallopt is None:
        return None
    for param, value, name in ((M_MMAP_THRESHOLD, mmap_threshold,
                                "M_MMAP_THRESHOLD"),
                               (M_TRIM_THRESHOLD, trim_threshold,
                                "M_TRIM_THRESHOLD")):
        if mallopt(param, value) != 1:
            raise RuntimeError(f"mallopt({name}, {value}) was refused by "
                               f"glibc (the most it accepts for the mmap "
                               f"threshold is {MMAP_THRESHOLD})")
    return {"mmap_threshold": mmap_threshold,
            "trim_threshold": trim_threshold}
