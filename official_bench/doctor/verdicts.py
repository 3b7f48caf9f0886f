"""Pass/fail from numbers a run produced (result.json), without TensorFlow.

Each function returns a Finding: ok True/False and one line saying what was
seen, with the numbers, so the table explains itself. A fact the trainer did
not record is not taken on trust: it is a failed finding that says so.
"""

from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Sequence

# mirrored's img/s per GPU must be within this fraction of one GPU's.
SCALING_TOLERANCE = 0.15
TOO_OLD = "unknown (trainer too old: result.json has no environment.{key})"
UPDATE_FIX = "update official_bench: this trainer does not record its devices"


class Finding(NamedTuple):
    """One judged fact about a run: ok or not, said in a line, and what
    to do when it is not."""
    ok: bool
    text: str
    fix: Optional[str] = None  # what to do when not ok


def fixes(findings: Sequence[Finding]) -> List[str]:
    """The fixes of the failed findings, each once, in order."""
    out = []
    for f in findings:
        if not f.ok and f.fix and f.fix not in out:
            out.append(f.fix)
    return out


def all_ok(findings: Sequence[Finding]) -> bool:
    return all(f.ok for f in findings)


def describe(findings: Sequence[Finding]) -> str:
    """The failed findings first (they are what the reader needs), then the
    rest, joined into one table cell."""
    bad = [f.text for f in findings if not f.ok]
    good = [f.text for f in findings if f.ok]
    return "; ".join(bad + good)


def finite_loss(history: Optional[dict]) -> Finding:
    """The run's recorded losses exist and are all finite."""
    losses = (history or {}).get("loss") or []
    if not losses:
        return Finding(False, "no loss recorded in result.json history")
    bad = [x for x in losses if not isinstance(x, (int, float)) or
           not math.isfinite(x)]
    if bad:
        return Finding(False, f"loss not finite: {losses} (null: NaN or inf)")
    return Finding(True, f"loss {losses[-1]:.4g}")


def replicas(stats: Optional[dict], expected: int) -> Finding:
    """stats.num_replicas equals what the strategy should have made."""
    got = (stats or {}).get("num_replicas")
    if got is None:
        return Finding(False, "no stats.num_replicas in result.json")
    if got != expected:
        return Finding(False, f"replicas {got}, expected {expected}")
    return Finding(True, f"replicas {got}")


def devices(environment: Optional[dict], kind: str,
            per_worker: int) -> Finding:
    """The strategy's replicas in this worker ran on `per_worker` devices of
    `kind` (GPU/CPU).

    The trainer records the strategy's own replica devices in
    environment.devices next to environment.configured_devices (what the
    config asked for); a result without configured_devices comes from a
    trainer that recorded only the configured ones, which prove nothing.
    """
    env = environment or {}
    if "configured_devices" not in env:
        return Finding(False, "devices " + TOO_OLD.format(
            key="configured_devices"), fix=UPDATE_FIX)
    devs = list(env.get("devices") or [])
    wrong = [d for d in devs if f"{kind}:" not in d.upper()]
    per = env.get("replicas_per_worker", len(devs))
    if wrong or len(devs) != per_worker or per != per_worker:
        return Finding(False, f"devices {devs}, expected {per_worker} "
                              f"{kind}(s) per worker",
                       fix="the strategy did not place its replicas where "
                           "the config asked: see the log's placement lines")
    short = sorted({d.rsplit("/", 1)[-1].replace("device:", "")
                    for d in devs})
    return Finding(True, f"devices {','.join(short)}")


def precision(environment: Optional[dict], expected: str) -> Finding:
    """The run computed in the precision asked for (environment.dtype)."""
    got = (environment or {}).get("dtype")
    if got != expected:
        return Finding(False, f"dtype {got}, expected {expected}")
    return Finding(True, got)


def backend(environment: Optional[dict], expected: str) -> Finding:
    """The run trained on the backend asked for (environment.backend; a
    result without it is TensorFlow's, written before the field existed)."""
    got = (environment or {}).get("backend", "tensorflow")
    if got != expected:
        return Finding(False, f"backend {got}, expected {expected}")
    return Finding(True, f"on {got}")


def throughput(stats: Optional[dict]) -> Optional[float]:
    """Average examples/second (warm-up excluded by the trainer)."""
    value = (stats or {}).get("average_examples_per_second")
    return float(value) if isinstance(value, (int, float)) else None


def scaling(one_device: Optional[float], total: Optional[float],
            replicas_: int, tolerance: float = SCALING_TOLERANCE) -> Finding:
    """img/s per replica of the multi-device run within `tolerance` of the
    one-device run, both ways: far above it means the 1-device number is
    the suspicious one."""
    if not one_device or total is None or replicas_ < 1:
        return Finding(False, "scaling unknown: the 1-device run has no "
                              "throughput to compare with")
    per = total / replicas_
    ratio = per / one_device
    text = (f"{per:.1f} img/s per device = {ratio:.0%} of 1-device "
            f"{one_device:.1f}")
    if abs(ratio - 1.0) > tolerance:
        return Finding(
            False, f"{text} (must be within {tolerance:.0%})",
            fix="per-GPU throughput is off: check the GPU links "
                "(nvidia-smi topo -m), runtime.all_reduce_alg, that the "
                "GPUs are the same model and idle, and the 1-GPU run")
    return Finding(True, text)


def same_losses(histories: List[Optional[dict]]) -> Finding:
    """Workers of one synchronous run end with the same losses."""
    losses = [tuple((h or {}).get("loss") or ()) for h in histories]
    if any(not l for l in losses):
        return Finding(False, "a worker recorded no loss")
    first = losses[0]
    for other in losses[1:]:
        if len(other) != len(first) or any(
                abs(a - b) > 1e-4 * max(1.0, abs(a))
                for a, b in zip(first, other)):
            return Finding(False, f"workers' losses differ: {losses}")
    return Finding(True, "workers agree on the loss")
