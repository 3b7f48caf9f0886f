"""A run-history row (contracts/history_db.py) from a result.json's content.

One builder for the trainer (its in-memory record, the same dict it writes
to result.json) and for ``official-bench-history --import`` (the json copy
beside a log), so the two write the same row for the same run and the
history stores it once.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
from typing import Any, Dict, List, Optional

from official_bench.contracts import (
    counting,
    dtypes,
    flops as flops_contract,
    history_db,
    run_backend,
)
from official_bench.contracts.history_db import Row, dumps
from official_bench.contracts.throughput import (
    Interval,
    images_per_second_over_window,
)

# Keys of the config that differ between two runs of the same setup.
_PER_RUN_KEYS = ("model_dir",)


def config_digest(config: Optional[Dict[str, Any]]) -> Optional[str]:
    """sha256 of the config without its per-run keys (model_dir): two runs
    of one setup share it, any changed setting changes it."""
    if not isinstance(config, dict):
        return None
    kept = {k: v for k, v in config.items() if k not in _PER_RUN_KEYS}
    return hashlib.sha256(dumps(kept).encode()).hexdigest()[:16]


def model_name(config: Dict[str, Any]) -> Optional[str]:
    """'resnet50', 'resnet_cifar8': the model and its depth."""
    model = config.get("model") or {}
    name = model.get("name")
    depth = (model.get("model_params") or {}).get("depth")
    if not name:
        return None
    return f"{name}{depth}" if depth else name


def _intervals(stats: Dict[str, Any]) -> List[Interval]:
    return [Interval(int(i["start_step"]), int(i["end_step"]),
                     float(i["seconds"]), float(i["examples_per_second"]))
            for i in stats.get("intervals") or []]


def run_key(case: tuple, intervals: List[Interval]) -> str:
    """Digest of a run's case and every interval (history_db module doc)."""
    text = dumps([list(case), [[i.start_step, i.end_step, i.seconds,
                                i.examples_per_second] for i in intervals]])
    return hashlib.sha256(text.encode()).hexdigest()


def _mfu(data: Dict[str, Any], rate: float, devices: int
         ) -> tuple:
    """(GFLOP per image, MFU) from the flops object, None when absent."""
    try:
        record = flops_contract.read_record(data)
    except ValueError:
        return None, None
    if record is None:
        return None, None
    mfu = (data.get(flops_contract.KEY) or {}).get("mfu")
    if not isinstance(mfu, (int, float)) or isinstance(mfu, bool):
        mfu = record.mfu_at(rate) if record.devices else \
            flops_contract.mfu(rate, record.gflop_per_image,
                               record.peak_tflops_per_device, devices)
    return record.gflop_per_image, mfu


def row_from_result(data: Dict[str, Any], source: str, source_path: str,
                    when: Optional[float] = None) -> Optional[Row]:
    """The row of a decoded result.json; None when it has no counted
    interval (a run too short for the trainer's window) or no stats. Its
    nodes and devices per node: history_db.placement (the tree's case
    folder ``source_path`` is in, else the Horovod block, else
    num_workers); its backend: the record's, else ``source_path``'s place
    in the tree (contracts/run_backend)."""
    stats = data.get("stats") or {}
    env = data.get("environment") or {}
    config = data.get("config") or {}
    intervals = _intervals(stats)
    counted = counting.recorded_counted(stats, intervals)
    if not counted or stats.get("basis", "intervals") != "intervals":
        return None
    replicas = int(stats.get("num_replicas") or env.get("num_replicas") or 1)
    global_batch = int(stats.get("global_batch_size") or 0)
    precision = dtypes.TO_SHORT.get(env.get("dtype"), env.get("dtype")) \
        or "fp32"
    image_size = (config.get("train_dataset") or {}).get("image_size")
    setup = (global_batch // replicas, precision, model_name(config),
             image_size)
    case = history_db.placement(source_path, env, replicas) + setup
    # The key digests the count rows were filed under before (a node per
    # process): a run stored then keeps its key and is still stored once.
    key = run_key(history_db.workers_placement(env, replicas) + setup,
                  intervals)
    rate = sum(i.examples_per_second for i in counted) / len(counted)
    gflop, mfu = _mfu(data, rate, replicas)
    when = time.time() if when is None else when
    return Row(
        time_utc=datetime.datetime.fromtimestamp(
            when, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        unix_time=when, source=source, source_path=source_path,
        run_key=key, config_digest=config_digest(config),
        model=case[4], image_size=image_size, nodes=case[0],
        gpus_per_node=case[1], batch_per_device=case[2],
        global_batch=global_batch, precision=precision,
        strategy=env.get("strategy"), tensorflow=env.get("tensorflow"),
        cuda=env.get("cuda_version"), driver=env.get("driver_version"),
        host=env.get("hostname"),
        devices=dumps(env.get("gpu_names") or env.get("devices") or []),
        environment=dumps(env), mean_rate=rate,
        images_per_second_over_window=images_per_second_over_window(counted),
        num_intervals=len(counted),
        intervals=json.dumps([[i.start_step, i.end_step, i.seconds,
                               i.examples_per_second] for i in counted]),
        gflop_per_image=gflop, mfu=mfu,
        backend=run_backend.backend(config, env, source_path))


def row_environment(row: Row) -> Dict[str, Any]:
    """The row's stored environment block; {} where none was recorded (an
    imported log) or it does not decode to an object."""
    try:
        env = json.loads(row.environment or "{}")
    except ValueError:
        return {}
    return env if isinstance(env, dict) else {}


def framework(row: Row) -> str:
    """"TF 2.21.0" / "JAX 0.10.2": the row's backend and its version (from
    the stored environment, so rows written before this read the same);
    the backend alone where no version was recorded (an imported log)."""
    env = row_environment(row)
    if row.backend == "jax":
        version = env.get("jax")
        return f"JAX {version}" if version else "JAX"
    version = row.tensorflow or env.get("tensorflow")
    return f"TF {version}" if version else "TF"
