"""The one TF_CONFIG reader, used by the trainer and the launcher alike.

Accepted shape (other top-level keys, such as "environment", are ignored):

    {"cluster": {"<job>": ["host:port" or "[v6addr]:port", ...], ...},
     "task": {"type": "<job>", "index": <n>}}

`task.index` is an integer, or a string of digits ("0"), because templated
Kubernetes manifests often produce a string; it is converted to an int. A
boolean, float, negative or other string is rejected. Every entry is checked
with official_bench.contracts.hostport. The chief is the "chief" job's task
if the cluster has that job, else worker 0 (TensorFlow's rule).

Every malformed shape raises TFConfigError, whose message names the field
(TF_CONFIG, cluster, cluster.<job>, cluster.<job>[i], task, task.type,
task.index) and shows the value; callers turn it into their one-line error.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from official_bench.contracts.hostport import HostPortError, parse_hostport

_SHAPE = ('{"cluster": {"worker": ["host:port", ...]}, '
          '"task": {"type": "worker", "index": 0}}')


class TFConfigError(ValueError):
    """TF_CONFIG does not have the accepted shape; names the field."""


def chief_task(job_names: Iterable[str]) -> Tuple[str, int]:
    """(job, index) of the chief, TensorFlow's rule: the "chief" job's task
    when the cluster has that job, else worker 0. The one copy of the rule:
    TFConfig and the trainer's runtime.cluster.Cluster both ask here."""
    return ("chief", 0) if "chief" in job_names else ("worker", 0)


def is_chief(job_names: Iterable[str], task_type: str,
             task_index: int) -> bool:
    """Whether task (task_type, task_index) is the chief of such a cluster."""
    return (task_type, task_index) == chief_task(job_names)


@dataclasses.dataclass(frozen=True)
class TFConfig:
    """A checked TF_CONFIG: every job's addresses and this task's place."""
    jobs: Dict[str, List[str]]
    task_type: str
    task_index: int

    @property
    def chief(self) -> Tuple[str, int]:
        """(job, index) of the chief (chief_task)."""
        return chief_task(self.jobs)

    @property
    def is_chief(self) -> bool:
        return is_chief(self.jobs, self.task_type, self.task_index)

    @property
    def address(self) -> str:
        return self.jobs[self.task_type][self.task_index]

    def node_order(self) -> Tuple[List[str], Optional[int]]:
        """The run scripts' nodes, chief first then the workers, and this
        task's place among them (None for a task of another job); the
        launcher and the pod's entry both number nodes so."""
        order = [(job, i, a) for job in ("chief", "worker")
                 for i, a in enumerate(self.jobs.get(job, []))]
        place = next((k for k, (job, i, _) in enumerate(order)
                      if (job, i) == (self.task_type, self.task_index)),
                     None)
        return [a for _, _, a in order], place


def _fail(field: str, problem: str, value: Any) -> TFConfigError:
    """One message form: the field, what is wrong, the value shown."""
    shown = json.dumps(value) if _jsonable(value) else repr(value)
    name = f"TF_CONFIG {field}" if field else "TF_CONFIG"
    return TFConfigError(f"{name} {problem}, got {shown}")


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _jobs(cluster: Any) -> Dict[str, List[str]]:
    """cluster: a non-empty mapping of job -> list of host:port strings."""
    if not isinstance(cluster, dict) or not cluster:
        raise _fail("cluster", 'must be a non-empty mapping of job -> list '
                    f'of "host:port" strings (as in {_SHAPE})', cluster)
    jobs: Dict[str, List[str]] = {}
    for job, addresses in cluster.items():
        if not isinstance(addresses, list):
            raise _fail(f"cluster.{job}", 'must be a list of "host:port" '
                        "strings", addresses)
        for i, address in enumerate(addresses):
            if not isinstance(address, str):
                raise _fail(f"cluster.{job}[{i}]", 'must be a "host:port" '
                            "string", address)
            try:
                parse_hostport(address)
            except HostPortError as e:
                raise _fail(f"cluster.{job}[{i}]", f"is not host:port or "
                            f"[IPv6]:port (it {e.reason})", address)
        jobs[job] = list(addresses)
    return jobs


def _index(value: Any) -> int:
    """An int >= 0, or a digit string as templated manifests write it."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _fail("task.index", "must be an integer (or a string of digits "
                'such as "0")', value)


def parse_tf_config(text: str) -> TFConfig:
    """TF_CONFIG's JSON text -> TFConfig, or TFConfigError naming the field."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as e:
        raise TFConfigError(f"TF_CONFIG is not valid JSON ({e}), got "
                            f"{text!r}; the shape is {_SHAPE}")
    if not isinstance(data, dict):
        raise _fail("", f"must be a JSON object such as {_SHAPE}", data)
    jobs = _jobs(data.get("cluster"))
    task = data.get("task")
    if not isinstance(task, dict):
        raise _fail("task", 'must be a mapping {"type": job, "index": n}',
                    task)
    task_type = task.get("type")
    if not isinstance(task_type, str) or task_type not in jobs:
        raise _fail("task.type", f"must name a job of the cluster "
                    f"({', '.join(sorted(jobs))})", task_type)
    if "index" not in task:
        raise TFConfigError(f"TF_CONFIG task.index is missing, got task "
                            f"{json.dumps(task)}; need an integer index "
                            f"into cluster.{task_type}")
    index = _index(task["index"])
    size = len(jobs[task_type])
    if not 0 <= index < size:
        raise _fail("task.index", f"is outside cluster.{task_type}, which "
                    f"has {size} task(s) (0..{size - 1})", task["index"])
    return TFConfig(jobs=jobs, task_type=task_type, task_index=index)


def tf_config_json(jobs: Mapping[str, List[str]], task_type: str,
                   task_index: int) -> str:
    """The TF_CONFIG text for a cluster, as the launcher hands it on."""
    return json.dumps({"cluster": dict(jobs),
                       "task": {"type": task_type, "index": task_index}})
