"""The per-run result JSON: written by the trainer into model_dir, read by
the extractor.

The run scripts copy it next to the log as ``rn50_b{B}_{dtype}_{i}.json``.
It is preferred over the log lines because its numbers are not rounded to two
decimals and it carries the environment (TensorFlow version, GPU names, CUDA)
for the report. It is optional: a missing file is normal (older runs, DLPerf
logs), a malformed one gives a warning and the log lines are used instead.
The whole schema, as the trainer writes it: docs/logs_and_results.md.

Fields consumed (schema ``official_bench.result/1``)::

    stats.intervals[]: start_step, end_step, seconds, examples_per_second
    stats.global_batch_size, stats.num_replicas   (optional, cross-checks)
    stats.warmup_steps, stats.excluded_steps      (optional: its window)
    environment.num_workers, .num_replicas        (optional: a run's case)
    environment{...}   (optional, reported as is; environment.dtype checked)
    warnings[]         (optional: the trainer's own, e.g. a NaN loss in a
                        train.stop_on_nan=false run; passed on)
    utilisation{...}   (optional: the sampler's figures; mean GPU utilisation
                        is reported, contracts/utilisation.py)
    flops{...}         (optional: GFLOP per image, the peak, MFU;
                        contracts/flops.py)
    config{...}        (optional: the resolved config; the reports name the
                        model, image size and device count from it)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Dict, List, Optional, Tuple

from official_bench.contracts import (
    dtypes,
    flops as flops_contract,
    utilisation as usage_contract,
)
from official_bench.contracts.throughput import ReadInterval
from official_bench.host.atomic import write_text_atomic

SCHEMA = "official_bench.result/1"


@dataclasses.dataclass
class RunResultFile:
    """The parts of a trainer result JSON the extractor uses."""

    path: str
    intervals: List[ReadInterval]
    global_batch_size: Optional[int] = None
    num_replicas: Optional[int] = None
    environment: Optional[Dict[str, Any]] = None
    warnings: List[str] = dataclasses.field(default_factory=list)
    gpu_utilisation: Optional[float] = None  # mean percent; None without a GPU
    input_wait: Optional[float] = None  # fraction blocked on input; None: n/a
    flops: Optional[flops_contract.FlopsRecord] = None  # None: not counted
    config: Optional[Dict[str, Any]] = None  # the run's resolved config

    @property
    def dtype(self) -> Optional[str]:
        """The trainer's dtype in file-name spelling (fp32/fp16/bf16), if
        given.

        The trainer may spell it as TensorFlow does (float16, mixed_float16).
        """
        value = (self.environment or {}).get("dtype")
        return dtypes.TO_SHORT.get(value, value)


class _Invalid(Exception):
    """Internal: the JSON does not follow the schema (message says where)."""


def _is_int(value: Any) -> bool:
    """True for JSON integers (bool is an int subclass in Python, not here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _number(item: Dict[str, Any], key: str, where: str) -> float:
    """A finite non-negative number from ``item[key]`` or :class:`_Invalid`."""
    value = item.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise _Invalid(f"{where}.{key} is {value!r}, expected a finite "
                       "number >= 0")
    return float(value)


def _optional_int(item: Dict[str, Any], key: str, where: str,
                  least: int) -> Optional[int]:
    """``item[key]`` when it is an integer >= ``least``, None when absent
    or null; :class:`_Invalid` otherwise."""
    value = item.get(key)
    if value is not None and (not _is_int(value) or value < least):
        raise _Invalid(f"{where}.{key} is {value!r}, expected an integer "
                       f">= {least}")
    return value


def _check_window_keys(stats: Dict[str, Any]) -> None:
    """The keys a reader counts the trainer's window with
    (contracts/counting.recorded_counted): ``warmup_steps`` an integer >= 0,
    ``excluded_steps`` null or [first, last] integers."""
    _optional_int(stats, "warmup_steps", "stats", 0)
    steps = stats.get("excluded_steps")
    if steps is not None and not (
            isinstance(steps, list) and len(steps) == 2
            and all(_is_int(s) for s in steps)):
        raise _Invalid(f"stats.excluded_steps is {steps!r}, expected null "
                       "or [first, last] integers")


# environment keys the readers iterate over (the reports' device lists)
_ENV_LISTS = ("devices", "gpu_names", "configured_devices")


def _check_environment(env: Dict[str, Any]) -> None:
    """The environment keys the readers compute with: the worker and
    replica counts (a run's case, judge/compare) integers >= 1, the device
    lists lists of strings (the reports iterate over them)."""
    for key in ("num_workers", "num_replicas"):
        _optional_int(env, key, "environment", 1)
    for key in _ENV_LISTS:
        value = env.get(key)
        if value is not None and not (
                isinstance(value, list)
                and all(isinstance(v, str) for v in value)):
            raise _Invalid(f"environment.{key} is {value!r}, expected a "
                           "list of strings")


def _intervals(stats: Dict[str, Any]) -> List[ReadInterval]:
    """Validate ``stats.intervals`` into :class:`ReadInterval` objects."""
    items = stats.get("intervals")
    if not isinstance(items, list):
        raise _Invalid("stats.intervals is missing or not a list")
    intervals = []
    for k, item in enumerate(items):
        where = f"stats.intervals[{k}]"
        if not isinstance(item, dict):
            raise _Invalid(f"{where} is not an object")
        start, end = item.get("start_step"), item.get("end_step")
        if not (_is_int(start) and _is_int(end) and 0 <= start < end):
            raise _Invalid(f"{where} has start_step={start!r} end_step="
                           f"{end!r}, expected integers with 0 <= start < end")
        intervals.append(ReadInterval(
            start, end, _number(item, "seconds", where),
            _number(item, "examples_per_second", where)))
    return intervals


def _input_wait(data: Dict[str, Any]) -> Optional[float]:
    """The trainer's input-wait fraction (measure/input_wait.py), or None when
    the run did not measure it (horovod, parameter_server, older files)."""
    item = data.get("input_wait")
    if item is None:
        return None
    if not isinstance(item, dict):
        raise _Invalid("input_wait is not an object")
    return _number(item, "fraction", "input_wait")


def _parse(path: str, data: Any) -> RunResultFile:
    """Build a :class:`RunResultFile` from decoded JSON or raise _Invalid."""
    if not isinstance(data, dict):
        raise _Invalid("top level is not an object")
    if data.get("schema") != SCHEMA:
        raise _Invalid(f"schema is {data.get('schema')!r}, "
                       f"expected {SCHEMA!r}")
    stats = data.get("stats")
    if not isinstance(stats, dict):
        raise _Invalid("stats is missing or not an object")
    _check_window_keys(stats)
    env = data.get("environment")
    if env is not None and not isinstance(env, dict):
        raise _Invalid("environment is not an object")
    _check_environment(env or {})
    config = data.get("config")
    if config is not None and not isinstance(config, dict):
        raise _Invalid("config is not an object")
    warnings = data.get("warnings") or []
    if not isinstance(warnings, list) or \
            not all(isinstance(w, str) for w in warnings):
        raise _Invalid("warnings is not a list of strings")
    try:
        flops = flops_contract.read_record(data)
    except ValueError as e:
        raise _Invalid(str(e)) from None
    return RunResultFile(path, _intervals(stats),
                         _optional_int(stats, "global_batch_size", "stats",
                                       1),
                         _optional_int(stats, "num_replicas", "stats", 1),
                         env, warnings,
                         usage_contract.mean_gpu_utilisation(
                             data.get(usage_contract.KEY)),
                         _input_wait(data), flops, config)


def read_run_json(path: str) -> Tuple[Optional[RunResultFile],
                                     Optional[str]]:
    """Read the result JSON at ``path``: ``(None, None)`` when there is no
    file, ``(None, "PATH: unusable result JSON (what is wrong)")`` when it
    cannot be used, ``(RunResultFile, None)`` otherwise."""
    if not os.path.exists(path):
        return None, None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return _parse(path, data), None
    except (OSError, UnicodeDecodeError, ValueError, _Invalid) as e:
        return None, f"{path}: unusable result JSON ({e})"


def load_run_json(path: str) -> Tuple[Optional[RunResultFile],
                                     Optional[str]]:
    """The result JSON beside a log (read_run_json), whose warning says
    that the caller falls back to the log lines."""
    result, problem = read_run_json(path)
    return result, problem and problem + "; using the log lines"


# ------------------------------------------------------------------ writing

def _jsonable(value: Any) -> Any:
    """NaN/inf become null: strict JSON readers reject them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _jsonable(value.item())
    return value


def write_run_record(path: str, record: Dict[str, Any]) -> str:
    record = dict(record, schema=SCHEMA)
    write_text_atomic(path, json.dumps(_jsonable(record), indent=2) + "\n")
    return path
