"""From settings to a list of runs: devices, config, commands, paths."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

from official_bench import config as config_lib
from official_bench.config import dotted_keys as config_tree
from official_bench.contracts import dtypes, log_tree
from official_bench.launch import nodes as nodes_lib
from official_bench.launch import preflight
from official_bench.launch.settings import Settings

REPO_ROOT = preflight.REPO_ROOT
DEFAULT_CONFIG_DIR = os.path.join(REPO_ROOT, "configs", "examples", "resnet",
                                  "imagenet")
CONFIG_STEM = {"single": "gpu", "two": "two_node_gpu",
               "multi": "multi_node_gpu"}
INSTALL_HOROVOD = os.path.join(REPO_ROOT, "scripts", "install_horovod.sh")
SINGLE_NODE_GPUS = [1, 2, 4, 8]


class PlanError(ValueError):
    """Bad arguments or config (exit status 2)."""


@dataclasses.dataclass
class Devices:
    kind: str  # gpu | cpu
    available: int  # GPUs visible (0 on CPU)
    how: str
    counts: List[int]  # devices per node, one case each
    skipped: List[str] = dataclasses.field(default_factory=list)
    ids: List[str] = dataclasses.field(default_factory=list)  # GPU ids
    # CUDA_VISIBLE_DEVICES of this launcher's trainers when it shares the
    # machine's GPUs with other launchers (see share_gpus).
    share: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class TrainerCommand:
    """A trainer's command line, kept in parts: the model_dir is decided
    by log_tree.ModelDir and may still change (node 0's session stamp, a
    fresh attempt), and each local worker has its own overrides, so the
    argv is built when it is needed instead of edited afterwards."""
    head: List[str]  # [horovodrun ...,] python -m module
    config_file: str
    overrides: Dict[str, Any]
    tail: List[str]  # --data_dir, the bench's own arguments

    def argv(self, model_dir: str) -> List[str]:
        return self.head + [f"--config_file={self.config_file}",
                            f"--model_dir={model_dir}",
                            f"--params_override={json.dumps(self.overrides)}"
                            ] + self.tail

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
    case: str  # "2n8g"
    devices: int  # per node
    index: int  # 1-based
    # This node's processes; [0] writes the run's log (the case log on node
    # 0). More than one only with WORKERS_PER_NODE > 1.
    workers: List[Worker]

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
class Horovod:
    """LAUNCHER=horovod: one horovodrun on node 0 starts every rank."""
    venv: str
    venv_from: str  # how HOROVOD_VENV was chosen, for messages
    horovodrun: str
    python: str  # the ranks' interpreter (HOROVOD_VENV/bin/python)
    hosts: List[str]  # horovodrun -H order: node 0 (rank 0) first
    options: List[str]  # --gloo, --network-interface ..., HOROVODRUN_ARGS
    idle: bool = False  # this is node k>0: node 0's horovodrun starts ours

    def command(self, per_node: int) -> List[str]:
        """horovodrun -np N*G -H h1:G,...,hN:G [options]."""
        return [self.horovodrun, "-np", str(per_node * len(self.hosts)),
                "-H", ",".join(f"{h}:{per_node}" for h in self.hosts)] + \
            list(self.options)


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
            return cls("official_bench.classifier_trainer", "", [])
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

    @property
    def workers_per_node(self) -> int:
        return self.settings.workers_per_node

    @property
    def check_modules(self) -> List[str]:
        """What the trainer's Python must have (preflight.check)."""
        return list(preflight.TRAINER_MODULES) + (
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

    def digest(self) -> str:
        """What every node must agree on (checked at the first barrier)."""
        fields = {
            "mode": self.settings.mode, "batch": self.batch,
            "bench": self.settings.bench,
            "dtype": self.dtype, "test_num": self.settings.test_num,
            "cases": [r.case for r in self.runs if r.index == 1],
            "nodes": self.nodeset.worker_hosts if self.nodeset else "",
            "device": self.devices.kind,
            "workers_per_node": self.workers_per_node,
        }
        text = json.dumps(fields, sort_keys=True)
        short = hashlib.sha1(text.encode()).hexdigest()[:8]
        return (f"{self.settings.mode} bz{self.batch} {self.dtype} "
                f"x{self.settings.test_num} workers/node "
                f"{self.workers_per_node} cases "
                f"{','.join(fields['cases'])} nodes {fields['nodes']} "
                f"[{short}]")


# --------------------------------------------------------------------------
# Devices
# --------------------------------------------------------------------------


def _visible_count(text: str) -> int:
    text = text.strip()
    if not text or text == "-1":
        return 0
    return len([x for x in text.split(",") if x.strip()])


def count_gpus(settings: Settings) -> Tuple[int, str]:
    """How many GPUs the trainer would see, without importing TensorFlow."""
    if settings.gpu_ids:
        return _visible_count(settings.gpu_ids), f"GPU_IDS={settings.gpu_ids}"
    smi = shutil.which("nvidia-smi")
    found, how = 0, "no nvidia-smi on PATH"
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True,
                                 timeout=30)
            found = sum(1 for line in out.stdout.splitlines()
                        if line.startswith("GPU "))
            how = f"nvidia-smi -L lists {found}"
        except (OSError, subprocess.SubprocessError) as e:
            how = f"nvidia-smi failed: {e}"
    cvd = settings.cuda_visible_devices
    if cvd is not None and found:
        n = _visible_count(cvd)
        return min(n, found), f"{how}; CUDA_VISIBLE_DEVICES={cvd!r}"
    return found, how


def gpu_id_list(settings: Settings, available: int) -> List[str]:
    """The node's GPU ids, as CUDA_VISIBLE_DEVICES values: GPU_IDS, else
    the inherited CUDA_VISIBLE_DEVICES, else 0..available-1."""
    for text in (settings.gpu_ids, settings.cuda_visible_devices):
        if text and _visible_count(text):
            return [x.strip() for x in text.split(",") if x.strip()][
                :available]
    return [str(i) for i in range(available)]


def choose_devices(settings: Settings) -> Devices:
    if settings.device == "cpu":
        available, how = 0, "DEVICE=cpu"
    else:
        available, how = count_gpus(settings)
    if settings.device == "gpu" and available == 0:
        raise PlanError(f"DEVICE=gpu but no GPU is visible ({how})")
    if settings.workers_per_node > 1:
        return _one_device_per_worker(settings, available, how)
    if available == 0:
        return Devices("cpu", 0, how, list(settings.cpu_devices))
    if settings.gpus is not None:
        too_many = [g for g in settings.gpus if g > available]
        if too_many:
            raise PlanError(f"GPUS={settings.gpus} asks for {too_many} GPU(s) "
                            f"per node but {available} are visible ({how})")
        return Devices("gpu", available, how, list(settings.gpus))
    if settings.mode == "single":
        counts = [g for g in SINGLE_NODE_GPUS if g <= available]
        skipped = [f"{g} GPUs (only {available} visible)"
                   for g in SINGLE_NODE_GPUS if g > available]
        return Devices("gpu", available, how, counts, skipped)
    return Devices("gpu", available, how, [available])


def _one_device_per_worker(settings: Settings, available: int,
                           how: str) -> Devices:
    """WORKERS_PER_NODE=W > 1: one case, W devices per node, one each."""
    w = settings.workers_per_node
    knob = f"WORKERS_PER_NODE={w} ({settings.source('workers_per_node')})"
    if available == 0:
        if settings.source("cpu_devices") != "default" and \
                settings.cpu_devices != [w]:
            raise PlanError(
                f"{knob} runs {w} workers with one CPU device each (case "
                f"{w} devices per node), but CPU_DEVICES="
                f"{','.join(map(str, settings.cpu_devices))} asks for other "
                "cases; unset CPU_DEVICES")
        return Devices("cpu", 0, how, [w])
    if available < w:
        raise PlanError(f"{knob} runs one worker per GPU, but {available} "
                        f"GPU(s) are visible ({how})")
    if settings.gpus is not None and settings.gpus != [w]:
        raise PlanError(
            f"{knob} runs one worker per GPU, so each node runs {w} GPUs; "
            f"GPUS={','.join(map(str, settings.gpus))} asks for other cases; "
            f"unset GPUS (or set GPUS={w})")
    ids = gpu_id_list(settings, available)
    if len(set(ids[:w])) < w:
        raise PlanError(f"{knob}: the GPU ids {','.join(ids[:w])} (GPU_IDS "
                        "or CUDA_VISIBLE_DEVICES) repeat; each worker needs "
                        "its own GPU")
    return Devices("gpu", available, how, [w], ids=ids[:w])


def worker_addresses(nodes: List[nodes_lib.Node], per_node: int,
                     machines: Optional[List[int]] = None) -> List[str]:
    """Every task's host:port: node k's workers on its port and the next
    per_node - 1 ports. PlanError when two tasks would share a port of one
    machine (machines: nodes.same_machines; None compares host names)."""
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
            addresses.append(nodes_lib.Node(node.host, port).address)
    return addresses


# --------------------------------------------------------------------------
# Config and overrides
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
        raise PlanError(f"config file {path} does not exist (CONFIG_FILE / "
                        "CONFIG_DIR)")
    return path


def _user_overrides(settings: Settings) -> Dict[str, Any]:
    if not settings.params_override:
        return {}
    try:
        return config_lib.parse_params_override(settings.params_override)
    except config_lib.ConfigError as e:
        raise PlanError(f"PARAMS_OVERRIDE: {e}")


# --------------------------------------------------------------------------
# Horovod (LAUNCHER=horovod)
# --------------------------------------------------------------------------


def default_horovod_venv(settings: Settings) -> str:
    """What `scripts/install_horovod.sh --print-venv` says (it honours
    OB_HOROVOD_VENV and HOME); builds nothing."""
    try:
        out = subprocess.run(["bash", INSTALL_HOROVOD, "--print-venv"],
                             capture_output=True, text=True, timeout=30,
                             env=settings.environ, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        raise PlanError(f"LAUNCHER=horovod: cannot ask {INSTALL_HOROVOD} "
                        f"--print-venv for the Horovod venv ({e}); set "
                        "HOROVOD_VENV")
    venv = out.stdout.strip()
    if out.returncode != 0 or not venv:
        raise PlanError(f"LAUNCHER=horovod: {INSTALL_HOROVOD} --print-venv "
                        f"failed (exit {out.returncode}: "
                        f"{out.stderr.strip()[-300:]}); set HOROVOD_VENV")
    return venv


def find_horovod(settings: Settings) -> Tuple[str, str, str, str]:
    """(venv, how it was chosen, horovodrun, python); PlanError with the way
    to build it when horovodrun or python is missing."""
    if settings.horovod_venv:
        venv = settings.horovod_venv
        how = f"HOROVOD_VENV ({settings.source('horovod_venv')})"
    else:
        venv = default_horovod_venv(settings)
        how = "default: scripts/install_horovod.sh --print-venv"
    venv = os.path.abspath(os.path.expanduser(venv))
    horovodrun = os.path.join(venv, "bin", "horovodrun")
    python = os.path.join(venv, "bin", "python")
    missing = [p for p in (horovodrun, python)
               if not (os.path.isfile(p) and os.access(p, os.X_OK))]
    if missing:
        raise PlanError(
            f"LAUNCHER=horovod needs horovodrun and python in the Horovod "
            f"venv {venv} ({how}), but {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not there: run `make "
            "horovod` (scripts/install_horovod.sh builds Horovod 0.28.1 "
            "with TensorFlow 2.18 into that venv), or set HOROVOD_VENV to an "
            "environment whose bin/ holds horovodrun and python")
    return venv, how, horovodrun, python


def horovodrun_options(settings: Settings) -> List[str]:
    options: List[str] = []
    if settings.horovodrun_controller in ("gloo", "mpi"):
        options.append(f"--{settings.horovodrun_controller}")
    for iface in (settings.horovodrun_network_interface or "").split(","):
        if iface.strip():
            options += ["--network-interface", iface.strip()]
    if settings.horovodrun_args:
        try:
            options += shlex.split(settings.horovodrun_args)
        except ValueError as e:
            raise PlanError(f"HOROVODRUN_ARGS={settings.horovodrun_args!r}: "
                            f"{e}")
    return options


def horovod_hosts(nodeset: Optional[nodes_lib.NodeSet]) -> List[str]:
    """horovodrun's host list: localhost alone, or one host per node (the
    ports of the node list are not used)."""
    if nodeset is None:
        return ["localhost"]
    hosts: List[str] = []
    for k, node in enumerate(nodeset.nodes):
        if ":" in node.host:
            raise nodes_lib.NodeError(
                f"LAUNCHER=horovod: horovodrun -H cannot take the IPv6 "
                f"address {node.host} ({nodeset.nodes_from}); use host names")
        if any(nodeset.same_machine(j, k) for j in range(k)):
            raise nodes_lib.NodeError(
                f"LAUNCHER=horovod: host {node.host} appears twice (by "
                f"name or address) in "
                f"{nodeset.nodes_from} ({nodeset.worker_hosts}); horovodrun "
                "runs one entry per host (ports are not used), so each node "
                "must be a different host")
        hosts.append(node.host)
    return hosts


# --------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------


def make_plan(settings: Settings, stamp: str,
              identity_fn=nodes_lib.local_identity,
              resolver=nodes_lib.resolve_host) -> Plan:
    """Everything this node will do. Raises PlanError or nodes.NodeError.

    Each step may stop the plan with an error naming the knob, in this
    order, so that the first problem a user meets is the most basic one."""
    resolver = nodes_lib.memoized(resolver)  # nodes and barrier share it
    notes: List[str] = []
    devices = choose_devices(settings)
    config_file = choose_config(settings, devices.kind)
    yaml_tree = config_lib.read_yaml_file(config_file)
    user = _user_overrides(settings)
    _check_devices(devices, config_file, notes)
    batch = _batch_size(settings, user, yaml_tree)
    _check_launcher(settings)
    nodeset = _nodes(settings, config_file, yaml_tree, user, notes,
                     identity_fn, resolver)
    horovod = _horovod(settings, nodeset, notes)
    devices = share_gpus(settings, devices, nodeset, horovod, notes)
    merged = _overrides(settings, devices, batch, yaml_tree, user,
                        nodeset, horovod, notes)
    cluster = _cluster(settings, nodeset, horovod, merged)
    barrier, bind = _barrier(settings, nodeset, horovod, resolver)
    interpreter = trainer_interpreter(settings, horovod)
    runs = _runs(settings, devices, config_file, batch, stamp, nodeset,
                 horovod, merged, cluster, interpreter)
    notes.extend(_stale_log_notes(runs, batch, settings.dtype,
                                  Bench.of(settings)))
    return Plan(settings, devices, config_file, batch, settings.dtype,
                nodeset, merged, runs, notes, barrier,
                log_tree.batch_root(os.path.abspath(settings.log_dir), batch),
                horovod, interpreter, cluster, bind)


def share_gpus(settings: Settings, devices: Devices,
               nodeset: Optional[nodes_lib.NodeSet],
               horovod: Optional[Horovod], notes: List[str]) -> Devices:
    """Launchers that share a machine get their own GPUs.

    Several entries of the node list on one machine (srun
    --ntasks-per-node=t, or NODES naming a host twice) are t launchers that
    each see every GPU there; left alone, their trainers would all claim
    all of them. Each takes its slice of the visible ids, by its place
    among the entries on that machine, unless Slurm already bound GPUs to
    each task (SLURM_GPUS_PER_TASK), in which case what it sees is its own.
    """
    if devices.kind != "gpu" or nodeset is None or horovod is not None:
        return devices
    mates = [i for i in range(len(nodeset.nodes))
             if nodeset.same_machine(i, nodeset.index)]
    tasks = len(mates)
    if tasks == 1:
        return devices
    local = mates.index(nodeset.index)
    where = f"{tasks} entries of {nodeset.nodes_from} on this machine"
    if settings.slurm.get("SLURM_GPUS_PER_TASK"):
        notes.append(f"{where}: SLURM_GPUS_PER_TASK="
                     f"{settings.slurm['SLURM_GPUS_PER_TASK']}, so the "
                     f"{devices.available} GPU(s) this task sees are its own")
        return devices
    if settings.workers_per_node > 1:
        raise PlanError(f"{where} and WORKERS_PER_NODE="
                        f"{settings.workers_per_node}: give each machine one "
                        "entry (one launcher starts its workers)")
    share, rest = divmod(devices.available, tasks)
    if share == 0 or rest:
        raise PlanError(
            f"{where} share its {devices.available} visible GPU(s) "
            f"({devices.how}), which do not split evenly; bind GPUs per "
            "task (srun --gpus-per-task=G), or run one launcher per machine "
            "(srun --ntasks-per-node=1, with WORKERS_PER_NODE for one "
            "worker per GPU)")
    too_many = [g for g in devices.counts if g > share]
    if settings.gpus is not None and too_many:
        raise PlanError(f"GPUS={','.join(map(str, settings.gpus))} asks for "
                        f"{too_many} GPU(s) per launcher, but {where} share "
                        f"{devices.available}: {share} each")
    ids = gpu_id_list(settings, devices.available)[
        local * share:(local + 1) * share]
    notes.append(f"{where}: this launcher (#{local}) uses GPU(s) "
                 f"{','.join(ids)} of the {devices.available} visible")
    return Devices("gpu", share, f"{devices.how}; share {local} of {tasks}",
                   devices.counts if settings.gpus is not None else [share],
                   devices.skipped, ids=ids, share=",".join(ids))


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
        config_tree.get(user, "train_dataset.batch_size") or \
        config_tree.get(yaml_tree, "train_dataset.batch_size") or 128


def _check_launcher(settings: Settings) -> None:
    """Knob combinations that cannot work, before any node is resolved:
    each names both knobs and what to unset."""
    use_horovod = settings.launcher == "horovod"
    per_node = settings.workers_per_node
    if per_node > 1 and use_horovod:
        raise PlanError(f"WORKERS_PER_NODE={per_node} is for LAUNCHER=tf; "
                        "LAUNCHER=horovod already runs one process per GPU")
    if per_node > 1 and settings.tf_config:
        raise PlanError(f"TF_CONFIG is set ({settings.tf_config}) with one "
                        f"task per node, but WORKERS_PER_NODE={per_node} "
                        "needs the launcher to make the cluster (one task "
                        "per worker); unset TF_CONFIG")
    if use_horovod and settings.tf_config:
        raise nodes_lib.NodeError(
            f"TF_CONFIG is set ({settings.tf_config}), but LAUNCHER=horovod "
            "does not use it (horovodrun makes the cluster) and the trainer "
            "would; unset TF_CONFIG")


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
    user_hosts = config_tree.get(user, "runtime.worker_hosts")
    if user_hosts:
        hosts, hosts_from = user_hosts, \
            "runtime.worker_hosts in PARAMS_OVERRIDE"
    else:
        hosts = config_tree.get(yaml_tree, "runtime.worker_hosts")
        hosts_from = f"runtime.worker_hosts of {config_file}"
    nodeset = nodes_lib.resolve(
        settings, hosts, hosts_from,
        config_tree.get(user, "runtime.task_index"),
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
        tasks = sum(len(v) for v in nodes_lib.read_tf_config(
            settings.tf_config).jobs.values())
        if tasks != 1:
            raise nodes_lib.NodeError(
                f"TF_CONFIG is set ({settings.tf_config}) and the trainer "
                f"would use it, but {settings.script} runs one node; unset "
                "TF_CONFIG or use run_two_node.sh / run_multi_node.sh")
        notes.append(f"TF_CONFIG is set and passed on: {settings.tf_config}")


def _horovod(settings: Settings, nodeset: Optional[nodes_lib.NodeSet],
             notes: List[str]) -> Optional[Horovod]:
    """LAUNCHER=horovod: the venv, horovodrun and its host list; None for
    LAUNCHER=tf."""
    if settings.launcher != "horovod":
        return None
    venv, venv_from, horovodrun, hvd_python = find_horovod(settings)
    horovod = Horovod(venv, venv_from, horovodrun, hvd_python,
                      horovod_hosts(nodeset), horovodrun_options(settings),
                      idle=nodeset is not None and nodeset.index > 0)
    if settings.source("python") == "command line":
        notes.append(f"--python {settings.python} is not used: the ranks "
                     f"run {hvd_python} (HOROVOD_VENV)")
    return horovod


def _overrides(settings: Settings, devices: Devices, batch: int,
               yaml_tree: Dict[str, Any], user: Dict[str, Any],
               nodeset: Optional[nodes_lib.NodeSet],
               horovod: Optional[Horovod], notes: List[str]) -> Dict[str, Any]:
    """The trainer's --params_override shared by every case: launcher base
    < PARAMS_OVERRIDE < what the launcher must decide (Horovod's
    strategy and no TF cluster in its ranks)."""
    base: Dict[str, Any] = {}
    for ds in ("train_dataset", "validation_dataset"):
        config_tree.put(base, f"{ds}.batch_size", batch)
        if not settings.data_dir and config_tree.get(
                yaml_tree, f"{ds}.builder") not in (None, "synthetic"):
            config_tree.put(base, f"{ds}.builder", "synthetic")
        if devices.kind == "cpu" and settings.dtype != "fp32":
            config_tree.put(base, f"{ds}.dtype",
                            dtypes.tf_name(settings.dtype))
    if not settings.data_dir:
        # PARAMS_OVERRIDE's builder wins over the synthetic default above.
        chosen = config_tree.get(user, "train_dataset.builder")
        notes.append("no DATA_DIR: synthetic data" if chosen in
                     (None, "synthetic") else "no DATA_DIR: train_dataset."
                     f"builder {chosen} from PARAMS_OVERRIDE")
    if devices.kind == "cpu" and settings.dtype != "fp32":
        notes.append(f"{settings.dtype} on CPU checks the flow only; it is "
                     "slow there")
    if settings.steps:
        config_tree.put(base, "train.steps", settings.steps)
    if settings.log_steps:
        config_tree.put(base, "train.time_history.log_steps",
                        settings.log_steps)
    if settings.peer_timeout is not None:
        config_tree.put(base, "runtime.peer_timeout_seconds",
                        settings.peer_timeout)
    if (nodeset is not None and horovod is None) or \
            settings.workers_per_node > 1:
        if config_tree.get(yaml_tree, "runtime.distribution_strategy") != \
                "multi_worker_mirrored":
            config_tree.put(base, "runtime.distribution_strategy",
                            "multi_worker_mirrored")
    merged = config_tree.deep_merge(base, user)
    if horovod is not None:
        _horovod_overrides(merged, user, yaml_tree)
    return merged


def _horovod_overrides(merged: Dict[str, Any], user: Dict[str, Any],
                       yaml_tree: Dict[str, Any]) -> None:
    """LAUNCHER=horovod runs the horovod strategy, and horovodrun makes
    the cluster: no TF cluster in the ranks."""
    asked = config_tree.get(user, "runtime.distribution_strategy")
    if asked not in (None, "horovod"):
        raise PlanError(f"LAUNCHER=horovod runs runtime."
                        f"distribution_strategy horovod, but "
                        f"PARAMS_OVERRIDE asks for {asked!r}")
    config_tree.put(merged, "runtime.distribution_strategy", "horovod")
    for key, unset in (("worker_hosts", None), ("task_index", -1)):
        if config_tree.get(merged, f"runtime.{key}") not in (None, unset) or \
                config_tree.get(yaml_tree, f"runtime.{key}") not in \
                (None, unset):
            config_tree.put(merged, f"runtime.{key}", unset)


def _cluster(settings: Settings, nodeset: Optional[nodes_lib.NodeSet],
             horovod: Optional[Horovod],
             merged: Dict[str, Any]) -> Optional[List[str]]:
    """The TF cluster into the overrides: every task's host:port with
    WORKERS_PER_NODE > 1 (returned), else one task per node."""
    per_node = settings.workers_per_node
    if per_node > 1:
        head = nodeset.nodes if nodeset else [
            nodes_lib.Node("127.0.0.1", settings.worker_port)]
        cluster = worker_addresses(head, per_node,
                                   nodeset.machines if nodeset else None)
        config_tree.put(merged, "runtime.worker_hosts", ",".join(cluster))
        return cluster
    if nodeset is not None and horovod is None:
        config_tree.put(merged, "runtime.worker_hosts", nodeset.worker_hosts)
        config_tree.put(merged, "runtime.task_index", nodeset.index)
    return None


def _barrier(settings: Settings, nodeset: Optional[nodes_lib.NodeSet],
             horovod: Optional[Horovod], resolver
             ) -> Tuple[Optional[Tuple[str, int]], Optional[List[str]]]:
    """(node 0's barrier host and port, the addresses node 0 listens on):
    LAUNCHER=tf on several nodes only; (None, None) otherwise."""
    if nodeset is None or horovod is not None:
        return None, None
    try:
        barrier = nodes_lib.barrier_address(
            nodeset, settings.barrier_port, settings.workers_per_node)
    except ValueError as e:
        raise PlanError(str(e))
    bind = None
    if nodeset.index == 0:
        bind = nodes_lib.barrier_bind(nodeset, settings.barrier_bind,
                                      resolver)
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


def _case_overrides(merged: Dict[str, Any], case: str, count: int,
                    devices: Devices, num_nodes: int, node_index: int,
                    per_process: bool, per_node: int) -> Dict[str, Any]:
    """The shared overrides plus this case's device counts: one device per
    process (Horovod, local workers), else all of the case's devices."""
    overrides = copy.deepcopy(merged)
    if per_process:
        config_tree.put(overrides, "runtime.num_gpus",
                        1 if devices.kind == "gpu" else 0)
        if per_node > 1:
            config_tree.put(overrides, "runtime.task_index",
                            node_index * per_node)
            if devices.kind == "cpu":
                config_tree.put(overrides, "runtime.cpu_devices", 1)
    elif devices.kind == "gpu":
        config_tree.put(overrides, "runtime.num_gpus", count)
    else:
        if num_nodes > 1 and count > 1:
            # multi_worker_mirrored runs one CPU replica per worker; the
            # trainer would stop on the mismatch (runtime/placement.py).
            raise PlanError(
                f"{case}: {count} CPU devices per node on {num_nodes} "
                "nodes needs one worker per device: set "
                f"WORKERS_PER_NODE={count} (multi_worker_mirrored uses "
                "one CPU replica per worker)")
        config_tree.put(overrides, "runtime.num_gpus", 0)
        config_tree.put(overrides, "runtime.cpu_devices", count)
    return overrides


def _check_config(config_file: str, overrides: Dict[str, Any],
                  case: str) -> None:
    """The trainer would load this config: stop now, not after a barrier
    and a TensorFlow start-up on every node."""
    try:
        config_lib.load_config(config_file=config_file,
                               params_override=[overrides])
    except config_lib.ConfigError as e:
        raise PlanError(f"the trainer would reject the config for {case} "
                        f"({config_file} + overrides "
                        f"{json.dumps(overrides)}): {e}")


def _runs(settings: Settings, devices: Devices, config_file: str,
          batch: int, stamp: str, nodeset: Optional[nodes_lib.NodeSet],
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
        overrides = _case_overrides(
            merged, case, count, devices, num_nodes, index,
            horovod is not None or per_node > 1, per_node)
        _check_config(config_file, overrides, case)
        run_env = dict(env)
        if devices.share is not None:
            run_env["CUDA_VISIBLE_DEVICES"] = devices.share
        elif settings.gpu_ids and devices.kind == "gpu":
            run_env["CUDA_VISIBLE_DEVICES"] = settings.gpu_ids
        head = [] if horovod is None else horovod.command(count)
        head += [interpreter.python, "-m", bench.module]
        tail = [f"--data_dir={settings.data_dir}"] if settings.data_dir \
            else []
        trainer = TrainerCommand(head, config_file, overrides,
                                 tail + bench.args)
        log_dir = log_tree.case_dir(log_root, batch, case, index)
        for i in range(1, settings.test_num + 1):
            stem = log_tree.run_stem(batch, settings.dtype, i, bench.name)
            log_path = os.path.join(log_dir, stem + log_tree.LOG_SUFFIX)
            model_dir = log_tree.ModelDir(
                model_root, batch, case, stem, stamp,
                node=index if nodeset and horovod is None else None)
            head_worker = Worker(
                0, -1, "", trainer, run_env, log_path,
                log_tree.json_path(log_path), model_dir,
                bench.file("rank0", True) if horovod
                else _result_name(nodeset, bench))
            workers = [head_worker] if per_node == 1 else _local_workers(
                head_worker, index, per_node, cluster, devices, bench)
            runs.append(Run(case, count, i, workers))
    return runs


def _stale_log_notes(runs: List[Run], batch: int, dtype: str,
                     bench: Bench) -> List[str]:
    """Logs of this batch and dtype already in the case directories: the
    runs overwrite some, and the extractor would read the others too."""
    notes: List[str] = []
    planned = {r.log_path for r in runs}
    for folder in sorted({os.path.dirname(p) for p in planned}):
        if not os.path.isdir(folder):
            continue
        found = {os.path.join(folder, n) for n in os.listdir(folder)
                 if log_tree.is_run_log(n, batch, dtype, bench.name)}
        if found & planned:
            notes.append(f"{len(found & planned)} log(s) in {folder} will be "
                         "overwritten")
        if found - planned:
            notes.append(f"{folder} also holds {len(found - planned)} log(s) "
                         "of an earlier session that the extractor will read "
                         "too: " + ", ".join(sorted(
                             os.path.basename(p) for p in found - planned))
                         + " (move them away or use another LOG_DIR)")
    return notes


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
        python, how, preflight.describe_choice(how, python, REPO_ROOT))


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
        config_tree.put(mine, "runtime.task_index", task)
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
        parsed = nodes_lib.read_tf_config(nodeset.tf_config)
        return bench.file(f"{parsed.task_type}{parsed.task_index}",
                          parsed.is_chief)
    return bench.file(f"worker{nodeset.index}", nodeset.index == 0)
