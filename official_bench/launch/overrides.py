"""The trainer's --params_override, built in layers: the launcher's base
(batch, synthetic data without DATA_DIR and a builder that reads it with
one, steps, the strategy several nodes need) < PARAMS_OVERRIDE < what the
launcher must decide (Horovod's strategy and no TF cluster in its ranks),
then each case's device counts.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional

from official_bench import config as config_lib
from official_bench.config import backends, dotted_keys
from official_bench.config.paths import DATA_DIR_READERS
from official_bench.contracts import dtypes
from official_bench.launch import backend_choice
from official_bench.launch.backend_choice import Backend
from official_bench.launch.errors import PlanError
from official_bench.launch.gpu_assign import Devices
from official_bench.launch.horovodrun import Horovod
from official_bench.launch.nodes import NodeSet
from official_bench.launch.settings import Settings


def user_overrides(settings: Settings) -> Dict[str, Any]:
    if not settings.params_override:
        return {}
    try:
        return config_lib.parse_params_override(settings.params_override)
    except config_lib.ConfigError as e:
        raise PlanError(f"PARAMS_OVERRIDE: {e}")


def shared_overrides(settings: Settings, backend: Backend, devices: Devices,
                     batch: int, yaml_tree: Dict[str, Any],
                     user: Dict[str, Any], nodeset: Optional[NodeSet],
                     horovod: Optional[Horovod],
                     notes: List[str]) -> Dict[str, Any]:
    """The trainer's --params_override shared by every case: launcher base
    < PARAMS_OVERRIDE < what the launcher must decide (Horovod's
    strategy and no TF cluster in its ranks). A backend other than the
    default is named in it (backend_choice.py: PARAMS_OVERRIDE cannot say
    otherwise, or the plan was refused)."""
    base: Dict[str, Any] = {}
    for ds in ("train_dataset", "validation_dataset"):
        dotted_keys.put(base, f"{ds}.batch_size", batch)
        _builder(settings, backend, ds, yaml_tree, user, base, notes)
        if devices.kind == "cpu" and settings.dtype != "fp32":
            dotted_keys.put(base, f"{ds}.dtype",
                            dtypes.tf_name(settings.dtype))
    if not settings.data_dir:
        # PARAMS_OVERRIDE's builder wins over the synthetic default above.
        chosen = dotted_keys.get(user, "train_dataset.builder")
        notes.append("no DATA_DIR: synthetic data" if chosen in
                     (None, "synthetic") else "no DATA_DIR: train_dataset."
                     f"builder {chosen} from PARAMS_OVERRIDE")
    if devices.kind == "cpu" and settings.dtype != "fp32":
        notes.append(f"{settings.dtype} on CPU checks the flow only; it is "
                     "slow there")
    if settings.steps:
        dotted_keys.put(base, "train.steps", settings.steps)
    if settings.log_steps:
        dotted_keys.put(base, "train.time_history.log_steps",
                        settings.log_steps)
    if settings.peer_timeout is not None:
        dotted_keys.put(base, "runtime.peer_timeout_seconds",
                        settings.peer_timeout)
    if backend.name != backend_choice.DEFAULT:
        dotted_keys.put(base, backend_choice.KEY, backend.name)
    if (nodeset is not None and horovod is None) or \
            settings.workers_per_node > 1:
        if dotted_keys.get(yaml_tree, "runtime.distribution_strategy") != \
                "multi_worker_mirrored":
            dotted_keys.put(base, "runtime.distribution_strategy",
                            "multi_worker_mirrored")
    merged = dotted_keys.deep_merge(base, user)
    if horovod is not None:
        _horovod_overrides(merged, user, yaml_tree)
    return merged


def _builder(settings: Settings, backend: Backend, ds: str,
             yaml_tree: Dict[str, Any], user: Dict[str, Any],
             base: Dict[str, Any], notes: List[str]) -> None:
    """No DATA_DIR: synthetic data. DATA_DIR: a builder that reads it; the
    config's synthetic (the CPU smoke config's) becomes records, and
    PARAMS_OVERRIDE asking for a builder that would ignore it is refused."""
    configured = dotted_keys.get(yaml_tree, f"{ds}.builder")
    if not settings.data_dir:
        if configured not in (None, "synthetic"):
            dotted_keys.put(base, f"{ds}.builder", "synthetic")
        return
    readers = backends.TRAITS[backend.name].builders
    if readers is not backends.ALL and \
            not set(readers) & set(DATA_DIR_READERS):
        raise PlanError(
            f"{settings.describe('data_dir')} is set, but "
            f"{backend.named} trains on {', '.join(readers)} data only "
            f"(docs/backends.md); unset DATA_DIR, or use "
            f"{backend.ask(backend_choice.DEFAULT)} for real data")
    asked = dotted_keys.get(user, f"{ds}.builder")
    if asked is not None and asked not in DATA_DIR_READERS and \
            ds == "train_dataset":
        # validation_dataset's counts only when evaluation reads it: the
        # config check of plan.py (config/rules.py) knows.
        raise PlanError(
            f"{settings.describe('data_dir')} is set, but PARAMS_OVERRIDE "
            f"sets {ds}.builder={asked}, which does not read it; builders "
            f"that read it: {', '.join(DATA_DIR_READERS)}: drop the builder "
            "from PARAMS_OVERRIDE (records), or unset DATA_DIR for "
            "synthetic data")
    if asked is None and (configured or "synthetic") not in DATA_DIR_READERS:
        dotted_keys.put(base, f"{ds}.builder", "records")
        if ds == "train_dataset":
            notes.append(f"DATA_DIR is set: {ds}.builder records (the "
                         f"config's is {configured or 'synthetic'})")


def _horovod_overrides(merged: Dict[str, Any], user: Dict[str, Any],
                       yaml_tree: Dict[str, Any]) -> None:
    """LAUNCHER=horovod runs the horovod strategy, and horovodrun makes
    the cluster: no TF cluster in the ranks."""
    asked = dotted_keys.get(user, "runtime.distribution_strategy")
    if asked not in (None, "horovod"):
        raise PlanError(f"LAUNCHER=horovod runs runtime."
                        f"distribution_strategy horovod, but "
                        f"PARAMS_OVERRIDE asks for {asked!r}")
    dotted_keys.put(merged, "runtime.distribution_strategy", "horovod")
    for key, unset in (("worker_hosts", None), ("task_index", -1)):
        if dotted_keys.get(merged, f"runtime.{key}") not in (None, unset) or \
                dotted_keys.get(yaml_tree, f"runtime.{key}") not in \
                (None, unset):
            dotted_keys.put(merged, f"runtime.{key}", unset)


def case_overrides(merged: Dict[str, Any], case: str, count: int,
                   devices: Devices, num_nodes: int, node_index: int,
                   per_process: bool, per_node: int) -> Dict[str, Any]:
    """The shared overrides plus this case's device counts: one device per
    process (Horovod, local workers), else all of the case's devices."""
    overrides = copy.deepcopy(merged)
    if per_process:
        dotted_keys.put(overrides, "runtime.num_gpus",
                        1 if devices.kind == "gpu" else 0)
        if per_node > 1:
            dotted_keys.put(overrides, "runtime.task_index",
                            node_index * per_node)
            if devices.kind == "cpu":
                dotted_keys.put(overrides, "runtime.cpu_devices", 1)
    elif devices.kind == "gpu":
        dotted_keys.put(overrides, "runtime.num_gpus", count)
    else:
        if num_nodes > 1 and count > 1:
            # multi_worker_mirrored runs one CPU replica per worker; the
            # trainer would stop on the mismatch (runtime/placement.py).
            raise PlanError(
                f"{case}: {count} CPU devices per node on {num_nodes} "
                "nodes needs one worker per device: set "
                f"WORKERS_PER_NODE={count} (multi_worker_mirrored uses "
                "one CPU replica per worker)")
        dotted_keys.put(overrides, "runtime.num_gpus", 0)
        dotted_keys.put(overrides, "runtime.cpu_devices", count)
    return overrides
