"""From settings to a list of runs: devices, config, commands, paths.

The plan's types (Plan, Run, Worker, TrainerCommand, Bench) and make_plan,
which takes the steps in order: devices (gpu_assign.py), config file,
the backend (backend_choice.py), nodes (nodes.py), Horovod
(horovodrun.py), the trainer's overrides (overrides.py), the cluster, the
barrier, then the runs themselves.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import shlex
import sys
from typing import Any, Dict, List, Optional, Tuple

from official_bench import config as config_lib
from official_bench.config import dotted_keys
from official_bench.contracts import dtypes, exit_status as es, log_tree
from official_bench.contracts.trainer_command import (
    TRAINER_MODULE,
    trainer_argv,
)
from official_bench.launch import (
    backend_choice,
    data_dir as data_dir_lib,
    nodes as nodes_lib,
    overrides as overrides_lib,
    preflight,
)
from official_bench.launch.backend_choice import Backend
from official_bench.launch.errors import PlanError, dry_run_note
from official_bench.launch.gpu_assign import (
    Devices,
    choose_devices,
    share_gpus,
)
from official_bench.launch.horovodrun import Horovod, make_horovod
from official_bench.launch.identity import (
    local_identity,
    memoized,
    resolve_host,
)
from official_bench.launch.node_list import Node, NodeError, read_tf_config
from official_bench.launch.settings import Settings
from official_bench.measure import host_env

REPO_ROOT = preflight.REPO_ROOT
DEFAULT_CONFIG_DIR = os.path.join(REPO_ROOT, "configs", "examples", "resnet",
                                  "imagenet")
CONFIG_STEM = {"single": "gpu", "two": "two_node_gpu",
               "multi": "multi_node_gpu"}


@dataclasses.dataclass(frozen=True)
class TrainerCommand:
    """A trainer's command line, kept in parts: the model_dir is decided
    by log_tree.ModelDir and may still change (node 0's session stamp, a
    fresh attempt), and each local worker has its own overrides, so the
    argv is built when it is needed (contracts/trainer_command.py) instead
    of edited afterwards."""
    launcher: List[str]  # horovodrun ... before the trainer, or []
    python: str
    module: str  # the trainer's, or the all-reduce benchmark's
    config_file: str
    overrides: Dict[str, Any]
    tail: List[str]  # --data_dir, the bench's own arguments

    def argv(self, model_dir: str) -> List[str]:
        return self.launcher + trainer_argv(
            self.python, config_file=self.config_file, model_dir=model_dir,
            params_override=json.dumps(self.overrides), extra=self.tail,
            module=self.module)

    def with_overrides(self, overrides: Dict[str, Any]) -> "TrainerCommand":
        return dataclasses.replace(self, overrides=overrides)


@dataclasses.dataclass
class Worker:
    """One trainer process of a run on this node (one per run, or one per
    local worker with WORKERS_PER_NODE > 1)."""
    local: int  # 0..W-1 on this node
    task: int  # TF task index: node_index * W + local (-1: not a local worker)
    address: str  # its host:port in the cluster ("" when not a local worker)
    trainer: TrainerCommand
    env: Dict[str, str]  # what the trainer gets on top of the environment
    log_path: str
    json_path: str
    model_dir_spec: log_tree.ModelDir
    result_name: str  # file the trainer writes into model_dir

    @property
    def label(self) -> str:
        return f"local worker {self.local} (task {self.task})"

    @property
    def model_dir(self) -> str:
        return self.model_dir_spec.path

    @property
    def command(self) -> List[str]:
        return self.trainer.argv(self.model_dir)


@dataclasses.dataclass
class Run:
    """One run of the sweep on this node: its case, devices per node,
    index (of TEST_NUM), this node's trainer processes (Worker) and the
    steps it will take."""
    case: str  # "2n8g"
    devices: int  # per node
    index: int  # 1-based
    # This node's processes; [0] writes the run's log (the case log on node
    # 0). More than one only with WORKERS_PER_NODE > 1.
    workers: List[Worker]
    # Steps the trainer will take (train.steps x epochs; None: unknown),
    # for the progress line's "step S/T" and ETA.
    total_steps: Optional[int] = None
    of: int = 0  # TEST_NUM: "run 1/5"

    @property
    def name(self) -> str:
        return f"{self.case} run {self.index}"

    @property
    def log_path(self) -> str:
        return self.workers[0].log_path

    @property
    def env(self) -> Dict[str, str]:
        return self.workers[0].env

    @property
    def many(self) -> bool:
        """Several local workers (WORKERS_PER_NODE > 1)."""
        return len(self.workers) > 1

    def processes(self) -> List[Worker]:
        """The trainer processes this node starts for the run."""
        return list(self.workers)

    def restamp(self, stamp: str) -> None:
        """Every node's model_dirs carry node 0's session stamp (see
        __main__): the same decision with another stamp."""
        for w in self.workers:
            w.model_dir_spec = w.model_dir_spec.restamped(stamp)


@dataclasses.dataclass
class Bench:
    """What a run runs (BENCH): the trainer, or the all-reduce benchmark
    with the same flags, whose logs are allreduce_{dtype}_{i}.log in the
    same case directories and whose result files are named allreduce*
    (contracts/log_tree.py names both)."""
    module: str
    name: str  # log_tree's bench name: "" (trainer) or "allreduce"
    args: List[str]

    @classmethod
    def of(cls, settings: Settings) -> "Bench":
        if settings.bench != "allreduce":
            return cls(TRAINER_MODULE, "", [])
        try:
            args = shlex.split(settings.allreduce_args or "")
        except ValueError as e:
            raise PlanError(f"ALLREDUCE_ARGS={settings.allreduce_args!r}: "
                            f"{e}")
        return cls("official_bench.allreduce.bench", log_tree.ALLREDUCE_PREFIX,
                   args)

    def file(self, tag: str, is_chief: bool) -> str:
        """The result file a process of this bench writes in model_dir."""
        return log_tree.process_file_name(tag, is_chief, self.name)


@dataclasses.dataclass
class Plan:
    """The whole sweep as decided before anything starts: the settings,
    devices, config file, batch and dtype, the nodes, the runs in order,
    the notes to print, the barrier's address, the log root, and the
    Horovod, trainer-Python, local-worker and backend choices."""
    settings: Settings
    devices: Devices
    config_file: str
    batch: int
    dtype: str
    nodeset: Optional[nodes_lib.NodeSet]
    overrides: Dict[str, Any]  # per-case parts are filled per run
    runs: List[Run]
    notes: List[str]
    barrier: Optional[Tuple[str, int]]  # node 0's host and barrier port
    log_root: str = ""  # LOG_DIR/tensorflow/resnet50/bz{B}
    horovod: Optional[Horovod] = None  # LAUNCHER=horovod
    python: Optional[preflight.Interpreter] = None  # the trainer's
    # WORKERS_PER_NODE > 1: every task's host:port, node by node.
    cluster: Optional[List[str]] = None
    # Node 0: the addresses its barrier listens on (nodes.barrier_bind).
    barrier_bind: Optional[List[str]] = None
    # DATA_DIR cannot give the trainer its train files (data_dir.py): the
    # launcher stops before any run, and on two/multi nodes first tells
    # the others through the barrier, as for a trainer Python that cannot
    # run.
    data_problem: Optional[str] = None
    # The one backend of every run (backend_choice.py): log tree,
    # interpreter check, refusals and the trainer's overrides follow it.
    backend: Backend = Backend(backend_choice.DEFAULT)

    @property
    def workers_per_node(self) -> int:
        return self.settings.workers_per_node

    @property
    def check_modules(self) -> List[str]:
        """What the trainer's Python must have for the chosen backend
        (preflight.check)."""
        return list(preflight.BACKEND_MODULES[self.backend.name]) + (
            list(preflight.HOROVOD_MODULES) if self.horovod else [])

    @property
    def uses_barrier(self) -> bool:
        """tf launcher on two/multi nodes: one launcher per node meets the
        others before and after each run. horovod: one launcher in all."""
        return self.barrier is not None

    @property
    def num_nodes(self) -> int:
        return len(self.nodeset.nodes) if self.nodeset else 1

    @property
    def index(self) -> int:
        return self.nodeset.index if self.nodeset else 0

    def restamp(self, stamp: str) -> None:
        """Node 0's session stamp for every model_dir of this node."""
        for run in self.runs:
            run.restamp(stamp)

    def digest(self) -> Dict[str, str]:
        """What every node must agree on for its trainers to join, field by
        field (checked at the first barrier, which names the fields that
        differ): the sweep's shape, the trainer's config (the config
        file's content, not its path, and the overrides but those that may
        differ per node: NODE_LOCAL_KEYS), what decides each run's course
        and the suite itself (a node whose checkout was not pulled would
        train other code into the same case). DATA_DIR, PYTHON, GPU_IDS
        and the timeouts may differ."""
        s = self.settings
        with open(self.config_file, "rb") as f:
            content = hashlib.sha1(f.read()).hexdigest()[:12]
        fields = {
            "script": s.script, "BATCH": self.batch, "DTYPE": self.dtype,
            "TEST_NUM": s.test_num, "BENCH": s.bench,
            "cases": ",".join(r.case for r in self.runs if r.index == 1),
            "node list": self.nodeset.worker_hosts if self.nodeset else "",
            "DEVICE": self.devices.kind,
            "WORKERS_PER_NODE": self.workers_per_node,
            "BACKEND": self.backend.name, "LAUNCHER": s.launcher,
            "ON_FAILURE": s.on_failure,
            "RESUME/OVERWRITE": "RESUME=1" if s.resume else
            "OVERWRITE=1" if s.overwrite else "neither",
            "config file content": f"sha1 {content}",
            "bench arguments": " ".join(Bench.of(s).args),
            "official_bench": host_env.suite(),
        }
        for key, value in _leaves(self.overrides):
            if key.rpartition(".")[2] not in NODE_LOCAL_KEYS and \
                    key not in NODE_LOCAL_KEYS:
                where = OVERRIDE_SOURCES.get(key)
                fields[f"trainer's {key}" + (f" ({where})" if where
                                             else "")] = value
        return {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True)
                for k, v in fields.items()}


# Trainer overrides that may differ from node to node (a dotted key, or
# the last part of one): not in Plan.digest.
NODE_LOCAL_KEYS = frozenset({"runtime.task_index",
                             "runtime.peer_timeout_seconds", "data_dir",
                             "model_dir"})
# The knobs that set a trainer override besides PARAMS_OVERRIDE (named
# where nodes differ).
OVERRIDE_SOURCES = {
    "train.steps": "STEPS / PARAMS_OVERRIDE",
    "train.time_history.log_steps": "LOG_STEPS / PARAMS_OVERRIDE",
    **{f"{ds}.builder": "DATA_DIR set or not / PARAMS_OVERRIDE"
       for ds in ("train_dataset", "validation_dataset")}}


def _leaves(tree: Dict[str, Any], prefix: str = ""):
    """(dotted key, value) of every leaf of a nested dict."""
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from _leaves(value, dotted + ".")
        else:
            yield dotted, value


# --------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------


def choose_config(settings: Settings, device: str) -> str:
    if settings.config_file:
        path = settings.config_file
    else:
        folder = settings.config_dir or DEFAULT_CONFIG_DIR
        if device == "cpu":
            name = "cpu_smoke.yaml"
        else:
            suffix = "" if settings.dtype == "fp32" else f"_{settings.dtype}"
            name = f"{CONFIG_STEM[settings.mode]}{suffix}.yaml"
        path = os.path.join(folder, name)
    if not os.path.isfile(path):
        what = "is a directory, not a YAML file" if os.path.isdir(path) \
            else "does not exist"
        raise PlanError(f"config file {path} {what} (CONFIG_FILE / "
                        "CONFIG_DIR)")
    return path


# --------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------


def make_plan(settings: Settings, stamp: str,
              identity_fn=local_identity,
              resolver=resolve_host) -> Plan:
    """Everything this node will do. Raises PlanError or NodeError.

    Each step may stop the plan with an error naming the knob, in this
    order, so that the first problem a user meets is the most basic one."""
    resolver = memoized(resolver)  # nodes and barrier share it
    notes: List[str] = []
    devices = choose_devices(settings, notes)
    config_file = choose_config(settings, devices.kind)
    yaml_tree = config_lib.read_yaml_file(config_file)
    user = overrides_lib.user_overrides(settings)
    backend = backend_choice.decide(settings, config_file, yaml_tree, user)
    if backend.layer and not backend.knob:
        notes.append(f"backend {backend.name}: {backend_choice.KEY} in "
                     f"{backend.layer}, which the trainer follows (BACKEND "
                     "unset)")
    _check_devices(devices, config_file, notes)
    batch = _batch_size(settings, user, yaml_tree)
    _check_tree_names(settings, devices, config_file, yaml_tree, user)
    _check_launcher(settings, backend)
    nodeset = _nodes(settings, config_file, yaml_tree, user, notes,
                     identity_fn, resolver)
    horovod = make_horovod(settings, nodeset, notes)
    devices = share_gpus(settings, devices, nodeset, horovod, notes)
    merged = overrides_lib.shared_overrides(settings, backend, devices,
                                            batch, yaml_tree, user, nodeset,
                                            horovod, notes)
    data_problem = _check_data_dir(settings, merged, yaml_tree, notes)
    cluster = _cluster(settings, nodeset, horovod, merged)
    barrier, bind = _barrier(settings, nodeset, horovod, resolver, notes)
    interpreter = trainer_interpreter(settings, horovod)
    runs = _runs(settings, backend.name, devices, config_file, batch, stamp,
                 nodeset, horovod, merged, cluster, interpreter)
    return Plan(settings, devices, config_file, batch, settings.dtype,
                nodeset, merged, runs, notes, barrier,
                log_tree.batch_root(os.path.abspath(settings.log_dir), batch,
                                    backend.name),
                horovod, interpreter, cluster, bind, data_problem, backend)


def _check_data_dir(settings: Settings, merged: Dict[str, Any],
                    yaml_tree: Dict[str, Any],
                    notes: List[str]) -> Optional[str]:
    """DATA_DIR must hold the train files its builder reads (data_dir.py):
    else the problem, which stops a real run before anything is written
    (Plan.data_problem; a dry run notes it, as it does an unresolved
    node)."""
    if not settings.data_dir:
        return None
    keys = data_dir_lib.train_keys(merged, yaml_tree)
    problem = data_dir_lib.problem(settings.data_dir,
                                   settings.describe("data_dir"), keys)
    if problem and settings.dry_run:
        notes.append(dry_run_note(problem, es.CONFIG))
        return None
    if not problem:
        notes.append(data_dir_lib.describe(settings.data_dir, keys))
    return problem


def _check_devices(devices: Devices, config_file: str,
                   notes: List[str]) -> None:
    """Say what the device count left out; stop when no case remains."""
    if devices.kind == "cpu":
        notes.append(f"no GPU ({devices.how}): CPU run with {config_file}")
    for s in devices.skipped:
        notes.append(f"skipping {s}")
    if not devices.counts:
        raise PlanError(f"no case to run: {'; '.join(devices.skipped)}")


def _batch_size(settings: Settings, user: Dict[str, Any],
                yaml_tree: Dict[str, Any]) -> int:
    """Per-device batch: BATCH, else PARAMS_OVERRIDE's, else the config's
    (it names the log tree's bz{B} directory, so it is fixed here)."""
    return settings.batch or \
        dotted_keys.get(user, "train_dataset.batch_size") or \
        dotted_keys.get(yaml_tree, "train_dataset.batch_size") or 128


def _check_tree_names(settings: Settings, devices: Devices,
                      config_file: str, yaml_tree: Dict[str, Any],
                      user: Dict[str, Any]) -> None:
    """BATCH and DTYPE name the log tree (bz{B}/rn50_b{B}_{dtype}_{i}.log):
    a config layer the trainer follows over them that says otherwise would
    file the run under names it did not run. One line naming both."""
    asked = dotted_keys.get(user, "train_dataset.batch_size")
    if settings.batch and asked is not None and asked != settings.batch:
        knob = settings.describe("batch").replace("'", "")
        raise PlanError(
            f"{knob} contradicts train_dataset.batch_size {asked} "
            f"(PARAMS_OVERRIDE): the trainer follows PARAMS_OVERRIDE and "
            f"would run batch {asked}, filed under bz{settings.batch}; set "
            "one of them, or the same batch in both")
    found = _trainer_dtype(settings, devices, config_file, yaml_tree, user)
    if found is not None and found[0] != settings.dtype:
        short, key, value, layer = found
        knob = settings.describe("dtype").replace("'", "")
        raise PlanError(
            f"{knob} contradicts {key} {value} ({layer}): the trainer "
            f"follows the config and would run {short}, filed as "
            f"{settings.dtype}; set one of them, or the same precision in "
            "both")


def _trainer_dtype(settings: Settings, devices: Devices, config_file: str,
                   yaml_tree: Dict[str, Any], user: Dict[str, Any]
                   ) -> Optional[Tuple[str, str, Any, str]]:
    """(short name, key, value, layer) of the precision the trainer would
    compute in, where a config layer names it (config/validate.py's
    compute_dtype: runtime.mixed_precision_dtype wins over
    train_dataset.dtype; PARAMS_OVERRIDE over the file, whose
    train_dataset.dtype the launcher sets on a CPU run that is not fp32).
    None: no layer names it, or a spelling the config check refuses."""
    launcher_sets_dtype = devices.kind == "cpu" and settings.dtype != "fp32"
    for key in ("runtime.mixed_precision_dtype", "train_dataset.dtype"):
        layers = [("PARAMS_OVERRIDE", user)]
        if not (key == "train_dataset.dtype" and launcher_sets_dtype):
            layers.append((config_file, yaml_tree))
        for layer, tree in layers:
            value = dotted_keys.get(tree, key)
            if value is not None:
                short = dtypes.TO_SHORT.get(str(value).lower())
                return None if short is None else (short, key, value, layer)
    return None


def _check_launcher(settings: Settings, backend: Backend) -> None:
    """Knob combinations that cannot work, before any node is resolved:
    each names both knobs and what to unset."""
    use_horovod = settings.launcher == "horovod"
    per_node = settings.workers_per_node
    if backend.name == "jax":
        _check_jax(settings, backend)
    if per_node > 1 and use_horovod:
        raise PlanError(f"WORKERS_PER_NODE={per_node} is for LAUNCHER=tf; "
                        "LAUNCHER=horovod already runs one process per GPU")
    if per_node > 1 and settings.tf_config:
        raise PlanError(f"TF_CONFIG is set ({settings.tf_config}) with one "
                        f"task per node, but WORKERS_PER_NODE={per_node} "
                        "needs the launcher to make the cluster (one task "
                        "per worker); unset TF_CONFIG")
    if use_horovod and settings.tf_config:
        raise NodeError(
            f"TF_CONFIG is set ({settings.tf_config}), but LAUNCHER=horovod "
            "does not use it (horovodrun makes the cluster) and the trainer "
            "would; unset TF_CONFIG")


def _check_jax(settings: Settings, backend: Backend) -> None:
    """The jax backend runs one trainer process per node
    (config/backends.py), whether BACKEND or the config chose it."""
    jax, tf = backend.named, backend.ask(backend_choice.DEFAULT)
    if settings.launcher == "horovod":
        raise PlanError(f"LAUNCHER=horovod needs {tf}; {jax} runs "
                        "LAUNCHER=tf (one process per node)")
    if settings.workers_per_node > 1:
        raise PlanError(f"WORKERS_PER_NODE={settings.workers_per_node} needs "
                        f"{tf}; {jax} runs one process per node over all "
                        "its devices")
    if settings.bench != "train":
        raise PlanError(f"BENCH={settings.bench} needs {tf}; {jax} runs "
                        "BENCH=train")


def _nodes(settings: Settings, config_file: str, yaml_tree: Dict[str, Any],
           user: Dict[str, Any], notes: List[str], identity_fn,
           resolver) -> Optional[nodes_lib.NodeSet]:
    """The node list and this node's place in it (None: one node alone).
    The hosts come from PARAMS_OVERRIDE, else the config file, else the
    launcher's knobs (nodes.resolve)."""
    use_horovod = settings.launcher == "horovod"
    if settings.mode == "single":
        _single_node_notes(settings, notes)
        return None
    user_hosts = dotted_keys.get(user, "runtime.worker_hosts")
    if user_hosts:
        hosts, hosts_from = user_hosts, \
            "runtime.worker_hosts in PARAMS_OVERRIDE"
    else:
        hosts = dotted_keys.get(yaml_tree, "runtime.worker_hosts")
        hosts_from = f"runtime.worker_hosts of {config_file}"
    nodeset = nodes_lib.resolve(
        settings, hosts, hosts_from,
        dotted_keys.get(user, "runtime.task_index"),
        identity_fn=identity_fn, resolver=resolver)
    notes.extend(n for n in nodeset.notes if not (
        use_horovod and "not in a job step" in n))
    return nodeset


def _single_node_notes(settings: Settings, notes: List[str]) -> None:
    """run_single_node.sh ignores node knobs (said so), and a TF_CONFIG the
    trainer would use must describe one task."""
    ignored = [settings.describe(k) for k in ("nodes", "hostfile",
                                              "task_index", "num_nodes")
               if settings.values.get(k) is not None]
    if ignored:
        notes.append(f"{settings.script} runs this node alone; ignoring "
                     + ", ".join(ignored))
    if settings.tf_config:
        tasks = sum(len(v) for v in read_tf_config(
            settings.tf_config).jobs.values())
        if tasks != 1:
            raise NodeError(
                f"TF_CONFIG is set ({settings.tf_config}) and the trainer "
                f"would use it, but {settings.script} runs one node; unset "
                "TF_CONFIG or use run_two_node.sh / run_multi_node.sh")
        notes.append(f"TF_CONFIG is set and passed on: {settings.tf_config}")


def worker_addresses(nodes: List[Node], per_node: int,
                     machines: Optional[List[int]] = None) -> List[str]:
    """Every task's host:port: node k's workers on its port and the next
    per_node - 1 ports. PlanError when two tasks would share a port of one
    machine (machines: identity.same_machines; None compares host names)."""
    addresses: List[str] = []
    owner: Dict[Tuple[Any, int], int] = {}
    for k, node in enumerate(nodes):
        for local in range(per_node):
            port = node.port + local
            if port > 65535:
                raise PlanError(f"node {k} ({node.address}) needs ports "
                                f"{node.port}..{node.port + per_node - 1} "
                                f"for WORKERS_PER_NODE={per_node}: past 65535")
            key = (machines[k] if machines else node.host.lower(), port)
            if key in owner:
                other = nodes[owner[key]]
                raise PlanError(
                    f"WORKERS_PER_NODE={per_node}: node {k} "
                    f"({node.address}) uses ports {node.port}.."
                    f"{node.port + per_node - 1}, which overlap those of node "
                    f"{owner[key]} ({other.address}) on the same host; space "
                    f"the nodes' ports at least {per_node} apart")
            owner[key] = k
            addresses.append(Node(node.host, port).address)
    return addresses


def _cluster(settings: Settings, nodeset: Optional[nodes_lib.NodeSet],
             horovod: Optional[Horovod],
             merged: Dict[str, Any]) -> Optional[List[str]]:
    """The TF cluster into the overrides: every task's host:port with
    WORKERS_PER_NODE > 1 (returned), else one task per node."""
    per_node = settings.workers_per_node
    if per_node > 1:
        head = nodeset.nodes if nodeset else [
            Node("127.0.0.1", settings.worker_port)]
        cluster = worker_addresses(head, per_node,
                                   nodeset.machines if nodeset else None)
        dotted_keys.put(merged, "runtime.worker_hosts", ",".join(cluster))
        return cluster
    if nodeset is not None and horovod is None:
        dotted_keys.put(merged, "runtime.worker_hosts", nodeset.worker_hosts)
        dotted_keys.put(merged, "runtime.task_index", nodeset.index)
    return None


def _barrier(settings: Settings, nodeset: Optional[nodes_lib.NodeSet],
             horovod: Optional[Horovod], resolver, notes: List[str]
             ) -> Tuple[Optional[Tuple[str, int]], Optional[List[str]]]:
    """(node 0's barrier host and port, the addresses node 0 listens on):
    LAUNCHER=tf on several nodes only; (None, None) otherwise. A dry run
    notes where node 0's barrier could not listen."""
    if nodeset is None or horovod is not None:
        return None, None
    try:
        barrier = nodes_lib.barrier_address(
            nodeset, settings.barrier_port, settings.workers_per_node)
    except ValueError as e:
        raise PlanError(str(e))
    bind = None
    if nodeset.index == 0:
        try:
            bind = nodes_lib.barrier_bind(nodeset, settings.barrier_bind,
                                          resolver)
        except NodeError as e:
            # A dry run (a login node that does not know node 0's name)
            # notes it, as it notes any node that does not resolve.
            if not settings.dry_run:
                raise
            if not nodeset.unresolved or resolver(nodeset.nodes[0].host):
                notes.append(dry_run_note(str(e), es.CLUSTER))
    return barrier, bind


def _trainer_env(settings: Settings,
                 horovod: Optional[Horovod]) -> Dict[str, str]:
    """What every trainer process gets on top of the environment."""
    env: Dict[str, str] = {}
    if horovod is not None:
        env["TF_USE_LEGACY_KERAS"] = "1"  # Horovod needs tf-keras
        path = settings.path or ""
        env["PATH"] = os.path.join(horovod.venv, "bin") + (
            os.pathsep + path if path else "")
    if settings.nccl_socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = settings.nccl_socket_ifname
    pythonpath = settings.pythonpath or ""
    if REPO_ROOT not in pythonpath.split(os.pathsep):
        # So the trainer imports this checkout from any working directory.
        env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + pythonpath
                                         if pythonpath else "")
    return env


def _check_config(config_file: str, overrides: Dict[str, Any],
                  case: str, data_dir: Optional[str],
                  backend: str) -> Optional[int]:
    """The trainer would load this config (with --data_dir, which sets both
    datasets' data_dir): stop now, not after a barrier and a TensorFlow
    start-up on every node; and it runs the plan's backend. Returns the
    steps it will train when the config names them (train.steps x
    train.epochs)."""
    flags: Dict[str, Any] = {}
    for ds in ("train_dataset", "validation_dataset"):
        if data_dir:
            dotted_keys.put(flags, f"{ds}.data_dir", data_dir)
    try:
        cfg = config_lib.load_config(config_file=config_file,
                                     params_override=[overrides, flags])
    except config_lib.ConfigError as e:
        raise PlanError(f"the trainer would reject the config for {case} "
                        f"({config_file} + overrides "
                        f"{json.dumps(overrides)}): {e}")
    if cfg.runtime.backend != backend:  # backend_choice.py's one answer
        raise PlanError(f"the trainer would run runtime.backend "
                        f"{cfg.runtime.backend} for {case}, not the planned "
                        f"{backend} ({config_file} + overrides "
                        f"{json.dumps(overrides)})")
    steps = getattr(getattr(cfg, "train", None), "steps", None)
    epochs = getattr(getattr(cfg, "train", None), "epochs", None) or 1
    return steps * epochs if isinstance(steps, int) and steps > 0 else None


def _runs(settings: Settings, backend: str, devices: Devices,
          config_file: str, batch: int, stamp: str,
          nodeset: Optional[nodes_lib.NodeSet],
          horovod: Optional[Horovod], merged: Dict[str, Any],
          cluster: Optional[List[str]],
          interpreter: preflight.Interpreter) -> List[Run]:
    """TEST_NUM runs of each case, in order, with their log and model_dir
    places (contracts/log_tree.py) and command lines."""
    per_node = settings.workers_per_node
    num_nodes = len(nodeset.nodes) if nodeset else 1
    # horovod: node 0's launcher alone writes logs, as node 0 does.
    index = nodeset.index if nodeset and horovod is None else 0
    env = _trainer_env(settings, horovod)
    bench = Bench.of(settings)
    log_root = os.path.abspath(settings.log_dir)
    model_root = os.path.abspath(settings.model_dir)
    runs: List[Run] = []
    for count in devices.counts:
        case = log_tree.case_name(num_nodes, count)
        overrides = overrides_lib.case_overrides(
            merged, case, count, devices, num_nodes, index,
            horovod is not None or per_node > 1, per_node)
        total_steps = _check_config(config_file, overrides, case,
                                    settings.data_dir, backend)
        run_env = dict(env)
        if devices.share is not None:
            run_env["CUDA_VISIBLE_DEVICES"] = devices.share
        elif settings.gpu_ids and devices.kind == "gpu":
            run_env["CUDA_VISIBLE_DEVICES"] = settings.gpu_ids
        launcher = [] if horovod is None else horovod.command(count)
        tail = [f"--data_dir={settings.data_dir}"] if settings.data_dir \
            else []
        trainer = TrainerCommand(launcher, interpreter.python, bench.module,
                                 config_file, overrides, tail + bench.args)
        log_dir = log_tree.case_dir(log_root, batch, case, index, backend)
        for i in range(1, settings.test_num + 1):
            stem = log_tree.run_stem(batch, settings.dtype, i, bench.name)
            log_path = os.path.join(log_dir, stem + log_tree.LOG_SUFFIX)
            model_dir = log_tree.ModelDir(
                model_root, batch, case, stem, stamp,
                node=index if nodeset and horovod is None else None,
                backend=backend)
            head_worker = Worker(
                0, -1, "", trainer, run_env, log_path,
                log_tree.json_path(log_path), model_dir,
                bench.file("rank0", True) if horovod
                else _result_name(nodeset, bench))
            workers = [head_worker] if per_node == 1 else _local_workers(
                head_worker, index, per_node, cluster, devices, bench)
            runs.append(Run(case, count, i, workers, total_steps,
                            settings.test_num))
    return runs


def trainer_interpreter(settings: Settings,
                        horovod: Optional[Horovod]) -> preflight.Interpreter:
    """The trainer's Python: the Horovod venv's (LAUNCHER=horovod), else
    PYTHON / --python, else the one the run script started the launcher with
    (its choice: activated venv > .venv > python3), else this launcher's."""
    if horovod is not None:
        python, how = horovod.python, "HOROVOD_VENV"
    elif settings.python:
        python = settings.python
        how = "--python" if settings.source("python") == "command line" \
            else "PYTHON"
    elif settings.launch_python:
        python = settings.launch_python
        how = settings.launch_python_from or "launcher"
    else:
        python, how = sys.executable or "python3", "launcher"
    return preflight.Interpreter(
        python, how, preflight.describe_choice(how, python, REPO_ROOT),
        preflight.unset_choice(settings, REPO_ROOT) if how == "PYTHON"
        else None)


def _local_workers(head: Worker, node_index: int, per_node: int,
                   cluster: List[str], devices: Devices,
                   bench: Bench) -> List[Worker]:
    """WORKERS_PER_NODE: this node's workers for one run. Local worker 0
    keeps the run's log (the case log when it is node 0's, i.e. the chief);
    local worker l > 0 writes beside it (log_tree.local_path), which the
    extractor's rn50_*.log pattern does not match."""
    workers = []
    for local in range(per_node):
        task = node_index * per_node + local
        mine = copy.deepcopy(head.trainer.overrides)
        dotted_keys.put(mine, "runtime.task_index", task)
        env = dict(head.env)
        if devices.kind == "gpu":
            env["CUDA_VISIBLE_DEVICES"] = devices.ids[local]
        workers.append(Worker(
            local, task, cluster[task], head.trainer.with_overrides(mine),
            env, log_tree.local_path(head.log_path, local),
            log_tree.local_path(head.json_path, local),
            head.model_dir_spec.for_local(local),
            bench.file(f"worker{task}", task == 0)))
    return workers


def _result_name(nodeset: Optional[nodes_lib.NodeSet], bench: Bench) -> str:
    """The file the trainer writes: result.json on the chief."""
    if nodeset is None:
        return bench.file("", True)
    if nodeset.tf_config:
        parsed = read_tf_config(nodeset.tf_config)
        return bench.file(f"{parsed.task_type}{parsed.task_index}",
                          parsed.is_chief)
    return bench.file(f"worker{nodeset.index}", nodeset.index == 0)
