"""The host a result was measured on: CPU name and count, and the suite
that measured it (official_bench's version and git commit); TensorFlow-free.

Both backends' environment records (measure/environment.py for TensorFlow,
jax_backend/environment.py for JAX) take these from here, and the launcher's
log header names the suite from here too.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
from typing import Optional

SUITE_KEY = "official_bench"  # result.json's environment key for suite()
GIT_TIMEOUT = 5.0  # seconds per git call; a slower git reads as no git


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


@functools.lru_cache(maxsize=None)
def suite() -> str:
    """The suite that makes this run: "0.1.0 (git e92555b)", with "+dirty"
    after the hash when tracked files have uncommitted changes; the
    version alone when the package is not the top of a git checkout (a
    wheel, site-packages) or git is missing or fails. Once per process."""
    # The package this module belongs to is imported before any of its
    # modules; read from it rather than import upward (layering).
    package = sys.modules[__name__.split(".")[0]]
    version = getattr(package, "__version__", "unknown")
    commit = git_commit(os.path.dirname(os.path.dirname(
        os.path.abspath(package.__file__))))
    return f"{version} (git {commit})" if commit else version


def git_commit(root: str) -> Optional[str]:
    """The short commit of the checkout whose top is `root`, "+dirty" when
    its tracked files differ from it; None when `root` is not the top of
    a checkout or git cannot say."""
    if not os.path.exists(os.path.join(root, ".git")):
        return None
    head = _git(root, "rev-parse", "--short", "HEAD")
    if not head:
        return None
    changes = _git(root, "status", "--porcelain", "--untracked-files=no")
    if changes is None:
        return head
    return head + ("+dirty" if changes else "")


def _git(root: str, *args: str) -> Optional[str]:
    """git's stdout (stripped) in `root`, or None when it fails; never
    takes git's optional locks (a trainer beside a user's git command)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    try:
        done = subprocess.run(["git", "-C", root, *args], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
