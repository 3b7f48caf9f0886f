"""runtime.xla_flags: XLA's own options, put into XLA_FLAGS before JAX
starts, checked first, and read back for result.json.

XLA reads XLA_FLAGS once, when JAX starts its first backend, and ends the
process on a flag it does not know or a value it cannot read (a C++ fatal
log line, no Python exception, a page of usage). So before the run's JAX
starts, a throw-away Python starts JAX's CPU backend with the same
XLA_FLAGS (1-3 s, only when runtime.xla_flags is set); if it dies, the run
stops with one line naming the flag and XLA's reason. Every platform
parses the one list of options (debug_options_flags.cc), so the CPU
backend checks the GPU flags too. XLA reads XLA_FLAGS left to right and a
flag given twice keeps its last value: the config's flags go after what
the environment's XLA_FLAGS already holds, and win.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import List, Mapping, MutableMapping, Optional, Sequence

from official_bench.config.errors import ConfigError

VARIABLE = "XLA_FLAGS"
# Starts JAX's CPU backend, which parses XLA_FLAGS, and compiles nothing.
_PROBE = "import jax; jax.devices()"
PROBE_TIMEOUT_SECONDS = 120
# XLA's fatal lines for a bad XLA_FLAGS (xla/parse_flags_from_env.cc and
# tsl's command_line_flags.cc).
_UNKNOWN = re.compile(r"Unknown flags? in XLA_FLAGS: (.+?)\s*$")
_BAD_VALUE = re.compile(
    r"Couldn't interpret value (.*) for flag (\S+?)\.?\s*$")


class XlaFlagsError(ConfigError):
    """XLA refuses runtime.xla_flags, or they cannot apply any more (the
    CLI's one line and its exit status for a bad setting)."""


def split(value: Optional[str]) -> List[str]:
    """XLA_FLAGS' text as its flags."""
    return (value or "").split()


def merged(existing: Optional[str], flags: Sequence[str]) -> str:
    """XLA_FLAGS with `flags` after what it held (module doc: they win)."""
    return " ".join(split(existing) + list(flags))


def refusal(output: str) -> str:
    """XLA's reason, in a few words, from a dead probe's output ('' when
    the output does not say)."""
    for line in output.splitlines():
        unknown = _UNKNOWN.search(line)
        if unknown:
            return f"XLA does not know {unknown.group(1)}"
        bad = _BAD_VALUE.search(line)
        if bad:
            return (f"XLA cannot read {bad.group(1)!r} as the value of "
                    f"--{bad.group(2)}")
    return ""


def check(value: str, environ: Mapping[str, str],
          python: str = sys.executable,
          timeout: float = PROBE_TIMEOUT_SECONDS) -> None:
    """Starts JAX's CPU backend in a child Python with XLA_FLAGS `value`;
    XlaFlagsError naming the flag when XLA refuses it."""
    env = dict(environ, **{VARIABLE: value, "JAX_PLATFORMS": "cpu"})
    try:
        p = subprocess.run([python, "-c", _PROBE], env=env, timeout=timeout,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as e:
        raise XlaFlagsError(f"runtime.xla_flags: cannot check XLA_FLAGS "
                            f"{value!r} in a child Python ({e})") from e
    if p.returncode == 0:
        return
    reason = refusal(p.stdout) or (
        f"the check exited {p.returncode}: "
        + ((p.stdout.strip().splitlines() or ["no output"])[-1][:200]))
    raise XlaFlagsError(f"runtime.xla_flags: {reason} (XLA_FLAGS "
                        f"{value!r}); fix or remove it")


def apply(environ: MutableMapping[str, str], flags: Sequence[str],
          started: bool) -> None:
    """Puts `flags` into environ's XLA_FLAGS, checked first; JAX must not
    have started its backends yet unless they already hold every flag."""
    if not flags:
        return
    current = split(environ.get(VARIABLE))
    if started:
        missing = [f for f in flags if f not in current]
        if missing:
            raise XlaFlagsError(
                f"runtime.xla_flags: JAX already started in this process "
                f"with XLA_FLAGS {' '.join(current)!r}; "
                f"{' '.join(missing)} cannot apply any more: run it in a "
                "fresh process")
        return
    value = merged(environ.get(VARIABLE), flags)
    check(value, environ)
    environ[VARIABLE] = value
