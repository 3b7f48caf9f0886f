"""Set glibc malloc's thresholds back after TensorFlow froze them
(host/malloc.py has the thresholds and the why; this is the TensorFlow
half: make TensorFlow's once-per-process mallopt happen first)."""

from __future__ import annotations

from typing import Dict

from absl import logging

from official_bench.host.malloc import (
    MMAP_THRESHOLD,
    TRIM_THRESHOLD,
    libc_mallopt,
    set_thresholds,
)


def provoke_tensorflow_patch() -> None:
    """Build and run one GeneratorDataset kernel so TensorFlow applies its
    once-per-process mallopt now, before ours, not later over it."""
    import tensorflow as tf  # the rest of this module is TensorFlow-free

    dataset = tf.data.Dataset.from_generator(
        lambda: iter((0,)), output_signature=tf.TensorSpec((), tf.int32))
    for _ in dataset:
        pass


def restore_malloc_thresholds(enabled: bool = True) -> Dict:
    """What result.json records under environment.malloc."""
    if not enabled:
        return {"restored": False,
                "reason": "runtime.restore_malloc_thresholds is false"}
    if libc_mallopt() is None:
        return {"restored": False, "reason": "not glibc"}
    provoke_tensorflow_patch()
    values = set_thresholds()
    logging.info("official_bench: glibc malloc thresholds set back after "
                 "TensorFlow's GeneratorDataset froze them at 128 KiB: mmap "
                 "%d MiB, trim %d MiB", MMAP_THRESHOLD >> 20,
                 TRIM_THRESHOLD >> 20)
    return dict({"restored": True}, **values)
