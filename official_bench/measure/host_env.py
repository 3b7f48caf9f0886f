"""The host a result was measured on: CPU name and count, TensorFlow-free.

Both backends' environment records (measure/environment.py for TensorFlow,
jax_backend/environment.py for JAX) take these from here.
"""

from __future__ import annotations

import os
import platform
from typing import Optional


def cpu_count() -> Optional[int]:
    return os.cpu_count()


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> Optional[str]:
    """The CPU's marketing name ("model name" in /proc/cpuinfo on Linux,
    else platform.processor()), so a CPU run's report can say what it ran
    on; None when neither names it."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None
