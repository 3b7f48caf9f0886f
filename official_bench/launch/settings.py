"""Every launcher knob, and the one place that reads environment variables.

Each knob is a command-line option and an environment variable of the same
name in upper case (`--test-num` / `TEST_NUM`); BATCH, DTYPE and TEST_NUM are
also the DLPerf positional arguments. A command-line value wins over the
environment, which wins over the default. Besides the knobs, this module
reads TF_CONFIG, the SLURM_* variables, CUDA_VISIBLE_DEVICES, PYTHONPATH,
PATH, OB_LAUNCH_PYTHON[_FROM] (set by scripts/lib/launch.sh) and
BARRIER_SECRET (plus the file BARRIER_SECRET_FILE names), and keeps a copy of
the environment, without BARRIER_SECRET, for the trainer processes; no other
launcher module looks at os.environ.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

from official_bench.contracts import dtypes
from official_bench.host import gpus as host_gpus

MODES = {
    "single": "run_single_node.sh",
    "two": "run_two_node.sh",
    "multi": "run_multi_node.sh",
}
DTYPES = dtypes.SHORT_NAMES

# Slurm variables the launcher understands (see slurm.py).
SLURM_VARS = (
    "SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
    "SLURM_STEP_NODELIST", "SLURMD_NODENAME", "SLURM_NODEID", "SLURM_PROCID",
    "SLURM_NTASKS", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_STEP_ID",
    "SLURM_STEP_NUM_NODES", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS_PER_NODE",
    "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_LOCALID",
    "SLURM_GPUS_PER_TASK",
)


# The barrier's shared secret as text: an environment variable only, so it
# never shows on a command line (see auth.py).
SECRET_ENV = "BARRIER_SECRET"


class SettingsError(ValueError):
    """A knob has a bad value; the message names the knob and its source."""


@dataclasses.dataclass(frozen=True)
class Knob:
    name: str  # attribute name; env var is NAME.upper(), flag --name-with-dashes
    kind: str  # int | float | str | choice | intlist | bool
    default: Any
    help: str
    choices: Sequence[str] = ()
    positional: bool = False
    section: str = "run"

    @property
    def env(self) -> str:
        return self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


KNOBS: List[Knob] = [
    # What to run (also the DLPerf positional arguments).
    Knob("batch", "int", None, "images per device (per-replica batch); "
         "default: the config file's train_dataset.batch_size", positional=True),
    Knob("dtype", "choice", "fp32", "precision: fp32, fp16 or bf16; selects "
         "the matching config (gpu_fp16.yaml, ...)", choices=DTYPES,
         positional=True),
    Knob("test_num", "int", 5, "runs of each case", positional=True),
    # Nodes.
    Knob("nodes", "str", None, "node list 'host:port,host:port' (a host "
         "without a port gets WORKER_PORT); default: HOSTFILE, then Slurm, "
         "then the config's runtime.worker_hosts", section="nodes"),
    Knob("hostfile", "str", None, "file with one host[:port] per line ('#' "
         "comments; further words such as slots=8 are ignored)",
         section="nodes"),
    Knob("num_nodes", "int", None, "expected number of nodes (two: 2; "
         "multi: default the length of the node list)", section="nodes"),
    Knob("task_index", "int", None, "this node's index in the node list; "
         "default: from Slurm, else found by matching this machine's hostname "
         "and interface addresses against the node list", section="nodes"),
    Knob("worker_port", "int", 11111, "trainer port for nodes given without "
         "one (Slurm node lists, host-only hostfiles)", section="nodes"),
    Knob("barrier_port", "int", None, "TCP port of the launchers' meeting "
         "point on node 0; default: 1 + the highest worker port on node 0's "
         "host",
         section="nodes"),
    Knob("barrier_secret_file", "str", None, "file holding the barrier's "
         "shared secret (its content without surrounding whitespace; the "
         "same on every node; keep it mode 600). Or BARRIER_SECRET=text in "
         "the environment (never on the command line, where ps shows it). "
         "Default: derived from the Slurm job in one, else none (the "
         "barrier is open, with a warning); see docs/security.md",
         section="nodes"),
    Knob("barrier_bind", "str", None, "address node 0's barrier listens "
         "on; default: what node 0's host in the node list resolves to on "
         "this machine (0.0.0.0 or :: listens on every interface)",
         section="nodes"),
    Knob("use_slurm", "choice", "auto", "take the node list and index from "
         "SLURM_* variables: auto (when in a Slurm job), yes, no",
         choices=("auto", "yes", "no"), section="nodes"),
    # Devices.
    Knob("device", "choice", "auto", "auto (GPUs when any are visible, else "
         "CPU with the smoke config), gpu or cpu",
         choices=("auto", "gpu", "cpu"), section="devices"),
    Knob("gpus", "intlist", None, "GPU counts per node to run, e.g. 1,2,4,8; "
         "default: single: 1,2,4,8 (those the machine has), two/multi: all "
         "visible GPUs", section="devices"),
    Knob("gpu_ids", "str", None, "GPUs to use, e.g. 0,1,2,3 (CUDA_VISIBLE_"
         "DEVICES of the trainer; a run with G GPUs uses the first G); "
         "default: all visible", section="devices"),
    Knob("cpu_devices", "intlist", [1], "without GPUs: logical CPU devices "
         "per node to run, e.g. 1,2 (runtime.cpu_devices; 2 runs mirrored on "
         "two CPU devices); with LAUNCHER=horovod: Horovod processes per "
         "node, one CPU device each", section="devices"),
    Knob("workers_per_node", "int", 1, "trainer processes per node. 1: one "
         "process drives all of the node's devices (mirrored; "
         "multi_worker_mirrored across nodes). G > 1: one "
         "multi_worker_mirrored worker per GPU (each sees one GPU through "
         "CUDA_VISIBLE_DEVICES, runtime.num_gpus=1), also on a single node; "
         "without GPUs G workers with one CPU device each. The case is still "
         "{N}n{G}g; local worker l uses the node's port + l and is task "
         "node_index*G + l", section="devices"),
    # Training.
    Knob("config_file", "str", None, "trainer YAML; default: CONFIG_DIR/"
         "{gpu,two_node_gpu,multi_node_gpu}[_fp16|_bf16].yaml on GPUs, "
         "CONFIG_DIR/cpu_smoke.yaml on CPU", section="training"),
    Knob("config_dir", "str", None, "directory of the default configs; "
         "default: configs/examples/resnet/imagenet in the repository",
         section="training"),
    Knob("steps", "int", None, "training steps per run (train.steps); "
         "default: the config's", section="training"),
    Knob("log_steps", "int", None, "steps per TimeHistory line (train."
         "time_history.log_steps); default: the config's", section="training"),
    Knob("data_dir", "str", None, "ImageNet TFRecord directory; unset: "
         "synthetic data (train_dataset.builder=synthetic)",
         section="training"),
    Knob("params_override", "str", None, "extra trainer overrides ('a.b=1,"
         "c=2', YAML/JSON or a YAML file), applied over the launcher's",
         section="training"),
    Knob("peer_timeout", "float", None, "seconds a trainer waits for its "
         "peers to start (runtime.peer_timeout_seconds); default: the "
         "config's", section="training"),
    Knob("bench", "choice", "train", "what each run runs: train (the "
         "trainer) or allreduce (python -m official_bench.allreduce.bench "
         "with the same config, devices, nodes and strategy: all-reduce "
         "time, algbw and busbw of the model's gradient size and a sweep; "
         "logs allreduce_{dtype}_{i}.log + .json in the same case "
         "directories, which the extractor reads)",
         choices=("train", "allreduce"), section="training"),
    Knob("allreduce_args", "str", None, "BENCH=allreduce: further "
         "official-bench-allreduce flags, split as by a shell, e.g. "
         "'--sizes=model,1M,64M --dtypes=float32 --iters=50'",
         section="training"),
    Knob("python", "str", None, "Python interpreter for the launcher and "
         "the trainer; default (run scripts): the activated venv's "
         "(VIRTUAL_ENV), else the repository's .venv/bin/python (`make "
         "bench` creates it), else python3 from PATH; --python changes the "
         "trainer's only; LAUNCHER=horovod: the ranks run "
         "HOROVOD_VENV/bin/python instead", section="training"),
    Knob("python_check_timeout", "float", 300.0, "seconds allowed for the "
         "check, before the first run, that the trainer's Python imports "
         "the trainer (tensorflow, tf_keras, absl, yaml, official_bench; "
         "on every node); 0 skips the check", section="training"),
    Knob("nccl_socket_ifname", "str", None, "network interface(s) for NCCL "
         "(exported as NCCL_SOCKET_IFNAME to the trainer), e.g. ib0 or eth0",
         section="training"),
    # Paths.
    Knob("log_dir", "str", "logs", "log root; logs go to LOG_DIR/tensorflow/"
         "resnet50/bz{B}/{N}n{G}g/rn50_b{B}_{dtype}_{i}.log (node k>0: in a "
         "node{k}/ subdirectory; WORKERS_PER_NODE: local worker l>0 beside "
         "it as ....log.local{l}, which the extractor does not read)",
         section="paths"),
    Knob("model_dir", "str", "model_dir", "root of the per-run model "
         "directories (a fresh one per run and node)", section="paths"),
    # Flow.
    Knob("sleep_seconds", "float", 5.0, "pause between runs",
         section="flow"),
    Knob("barrier_timeout", "float", 300.0, "seconds the nodes wait for each "
         "other before each run (and after it, on top of the run time)",
         section="flow"),
    Knob("run_timeout", "float", 3600.0, "wall-clock limit of one run; then "
         "SIGTERM, then SIGKILL after KILL_AFTER (timeout -k)",
         section="flow"),
    Knob("kill_after", "float", 30.0, "seconds between SIGTERM and SIGKILL "
         "when a run is stopped", section="flow"),
    Knob("on_failure", "choice", "continue", "after a run that failed on any "
         "node: continue with the next run, or stop (all nodes alike)",
         choices=("continue", "stop"), section="flow"),
    Knob("dry_run", "bool", False, "print the cluster, TF_CONFIG, commands "
         "and paths; run nothing", section="flow"),
    # Launcher.
    Knob("launcher", "choice", "tf", "tf: one trainer per node, "
         "multi_worker_mirrored across nodes (TF_CONFIG); horovod: one "
         "horovodrun from node 0 starts one process per GPU on every node "
         "(ssh to the others) with runtime.distribution_strategy horovod",
         choices=("tf", "horovod"), section="launcher"),
    Knob("horovod_venv", "str", None, "environment whose bin/ holds "
         "horovodrun and the python the ranks run (the same path on every "
         "node); default: `scripts/install_horovod.sh --print-venv` (built "
         "by `make horovod`)", section="launcher"),
    Knob("horovodrun_controller", "choice", "gloo", "horovodrun --gloo, "
         "--mpi, or auto (neither flag: horovodrun decides); the venv of "
         "`make horovod` has Gloo only",
         choices=("gloo", "mpi", "auto"), section="launcher"),
    Knob("horovodrun_network_interface", "str", None, "horovodrun "
         "--network-interface, e.g. eth0 or ib0 (comma-separated for "
         "several); default: horovodrun finds the interfaces the hosts "
         "share", section="launcher"),
    Knob("horovodrun_args", "str", None, "further horovodrun options, "
         "split as by a shell, e.g. '--ssh-port 2222 --start-timeout 120'",
         section="launcher"),
]
KNOBS_BY_NAME = {k.name: k for k in KNOBS}


@dataclasses.dataclass
class Settings:
    """Resolved knob values plus the environment facts the launcher needs."""
    mode: str
    values: Dict[str, Any]
    sources: Dict[str, str]  # knob -> "command line" | "env NAME" | "default"
    tf_config: Optional[str] = None
    slurm: Dict[str, str] = dataclasses.field(default_factory=dict)
    cuda_visible_devices: Optional[str] = None
    pythonpath: Optional[str] = None
    path: Optional[str] = None  # PATH (LAUNCHER=horovod puts its venv first)
    # The interpreter the run script started the launcher with, and why it
    # was chosen (PYTHON | VIRTUAL_ENV | .venv | PATH); None when the
    # launcher was started directly (python -m official_bench.launch).
    launch_python: Optional[str] = None
    launch_python_from: Optional[str] = None
    environ: Dict[str, str] = dataclasses.field(default_factory=dict)
    # BARRIER_SECRET or the content of BARRIER_SECRET_FILE (never shown).
    barrier_secret: Optional[str] = dataclasses.field(default=None,
                                                      repr=False)
    barrier_secret_from: Optional[str] = None

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)

    def source(self, name: str) -> str:
        return self.sources.get(name, "default")

    def describe(self, name: str) -> str:
        """'TEST_NUM=5 (env TEST_NUM)' for messages."""
        return f"{name.upper()}={self.values.get(name)!r} ({self.source(name)})"

    @property
    def script(self) -> str:
        return MODES[self.mode]


def _convert(knob: Knob, raw: Any, source: str) -> Any:
    if raw is None:
        return None
    if knob.kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("", "0", "false", "no", "off"):
            return False
        raise SettingsError(f"{knob.env}={raw!r} ({source}) is not a "
                            "boolean (1/0, yes/no, true/false)")
    text = str(raw).strip()
    try:
        if knob.kind == "int":
            value = int(text)
            if value < 0 or (value == 0 and knob.name != "task_index"):
                raise ValueError
            return value
        if knob.kind == "float":
            value = float(text)
            if not value >= 0:
                raise ValueError
            return value
        if knob.kind == "intlist":
            items = [s for s in text.replace(" ", ",").split(",") if s]
            values = [int(s) for s in items]
            if not values or any(v < 1 for v in values):
                raise ValueError
            return values
    except ValueError:
        what = {"int": "a positive integer", "float": "a number >= 0",
                "intlist": "a comma-separated list of positive integers"}
        if knob.name == "task_index":
            what["int"] = "an integer >= 0"
        raise SettingsError(f"{knob.env}={raw!r} ({source}) is not "
                            f"{what[knob.kind]}")
    if knob.kind == "choice":
        value = text.lower()
        if knob.name == "dtype":
            value = dtypes.TO_SHORT.get(value, value)
        if value not in knob.choices:
            raise SettingsError(f"{knob.env}={raw!r} ({source}) is not one "
                                f"of: {', '.join(knob.choices)}")
        return value
    return text


def build_parser(mode: Optional[str] = None) -> argparse.ArgumentParser:
    script = MODES.get(mode or "", "python -m official_bench.launch MODE")
    parser = argparse.ArgumentParser(
        prog=f"bash {script}" if mode else "python -m official_bench.launch",
        usage=(f"bash {script} [BATCH] [DTYPE] [TEST_NUM] [options]" if mode
               else "python -m official_bench.launch {single,two,multi} "
                    "[BATCH] [DTYPE] [TEST_NUM] [options]"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_DESCRIPTION.format(script=script),
        epilog=_EPILOG)
    if mode is None:
        parser.add_argument("mode", choices=sorted(MODES),
                            help="single, two or multi node(s)")
    groups: Dict[str, Any] = {}
    titles = {"run": "what to run (positional, as in DLPerf)",
              "nodes": "nodes (two/multi)", "devices": "devices",
              "training": "trainer", "paths": "paths", "flow": "flow",
              "launcher": "launcher (LAUNCHER=horovod: see the notes below)"}
    for knob in KNOBS:
        if knob.section not in groups:
            groups[knob.section] = parser.add_argument_group(
                titles[knob.section])
        group = groups[knob.section]
        default = knob.default
        if isinstance(default, list):
            default = ",".join(map(str, default))
        note = f"[env {knob.env}"
        note += f"; default {default}]" if default not in (None, False) \
            else "]"
        if knob.positional:
            group.add_argument(knob.name, nargs="?", default=None,
                               metavar=knob.env,
                               help=f"{knob.help} {note}")
            group.add_argument(knob.flag, dest=f"opt_{knob.name}",
                               default=None, metavar=knob.env,
                               help="same as the positional argument")
        elif knob.kind == "bool":
            group.add_argument(knob.flag, dest=knob.name, action="store_const",
                               const=True, default=None,
                               help=f"{knob.help} {note}")
        else:
            group.add_argument(knob.flag, dest=knob.name, default=None,
                               metavar=knob.env, help=f"{knob.help} {note}")
    return parser


_DESCRIPTION = """\
DLPerf-style ResNet-50 v1.5 benchmark runs of the official_bench trainer.

  bash {script} [BATCH] [DTYPE] [TEST_NUM] [options]

Every option is also an environment variable (the upper-case name shown);
an option on the command line wins over the variable. Two/multi-node scripts
are started the same way on every node (or once per node with srun); with
LAUNCHER=horovod, on node 0 only (see below)."""

_EPILOG = """\
node list:   TF_CONFIG (if set, it wins and is passed on unchanged) > NODES >
             HOSTFILE > Slurm (SLURM_JOB_NODELIST) > the config's
             runtime.worker_hosts (or one given in PARAMS_OVERRIDE)
task index:  TF_CONFIG's task > TASK_INDEX > Slurm (SLURMD_NODENAME's place in the node list,
             else SLURM_NODEID; + SLURM_LOCALID with several tasks per node)
             > the one node whose host is this machine's
             hostname or one of its interface addresses > error
logs:        LOG_DIR/tensorflow/resnet50/bz{B}/{N}n{G}g/rn50_b{B}_{dtype}_{i}.log
             (+ .json: the run's result JSON); node k>0 writes into node{k}/;
             WORKERS_PER_NODE=G>1: local worker 0 writes that log, local
             worker l>0 writes rn50_b{B}_{dtype}_{i}.log.local{l} (+
             .json.local{l}) beside it; the extractor reads node 0's
             worker 0 (the chief) only
python:      PYTHON > the activated venv ($VIRTUAL_ENV/bin/python) > the
             repository's .venv/bin/python (`make bench` creates it) >
             python3 from PATH. Before the first run the launcher checks
             (in a subprocess, PYTHON_CHECK_TIMEOUT) that the trainer's
             Python imports the trainer; if not it names the interpreter,
             what is missing and the fix, and exits 2 before any log is
             written. Two/multi-node: every node checks, node 0 reports
             which node lacks what, and every node exits 2.
exit status: 0 all runs ok, 1 some run failed, 2 bad arguments or config
             (or a trainer Python that cannot import the trainer),
             3 node list / task index problem, 75 a node never arrived,
             130/143 interrupted
LAUNCHER=horovod: one launcher, on node 0 (the first node of the list),
             runs HOROVOD_VENV/bin/horovodrun -np N*G -H host1:G,...,hostN:G
             [--gloo|--mpi] [--network-interface IF] HOROVOD_VENV/bin/python
             -m official_bench.classifier_trainer ... with
             runtime.distribution_strategy=horovod and runtime.num_gpus=1 per
             process (0 on CPU, where CPU_DEVICES is the number of processes
             per node; every node gets node 0's count). horovodrun starts
             the ranks on the other nodes over
             ssh (passwordless ssh, the same HOROVOD_VENV and repository path
             there; ports in the node list are not used), so no launcher runs
             there and there is no barrier: started on node k>0, the script
             says so and exits 0. Rank 0 runs on node 0: the log holds
             everything horovodrun printed (ranks prefixed [r]) and rank 0's
             result.json is copied next to it. TF_CONFIG must be unset.
input servers: builder zmq and service read from servers the scripts do
             not start: start them beside the trainers first, then pass the
             builder in PARAMS_OVERRIDE (docs/data.md). tf.data service:
               python -m official_bench.data.feeds.service --dispatcher --port 5050
               python -m official_bench.data.feeds.service --worker --port 5051 \\
                 --dispatcher_address HOST0:5050 --worker_address THIS_HOST
               PARAMS_OVERRIDE='train_dataset.builder=service,
                 train_dataset.data_service_address=HOST0:5050'
             ZMQ: worker i binds each endpoint's port + i; on several hosts
             name an interface (tcp://eth0:5555) and start, per worker,
               python -m official_bench.data.feeds.zmq_producer \\
                 --connect tcp://WORKER_HOST:<5555+i> --batch_size B ...
other environment the launcher reads: TF_CONFIG, SLURM_*, CUDA_VISIBLE_DEVICES
(counts the visible GPUs), VIRTUAL_ENV (the scripts), PYTHONPATH (the repository is put first for the
trainer), PATH (LAUNCHER=horovod: HOROVOD_VENV/bin is put first), HOME and
OB_HOROVOD_VENV (through scripts/install_horovod.sh --print-venv),
BARRIER_SECRET (the barrier's shared secret; see BARRIER_SECRET_FILE); the
trainer inherits the whole environment except BARRIER_SECRET.
security:    the barrier authenticates every message with BARRIER_SECRET /
             BARRIER_SECRET_FILE (else a key derived from the Slurm job, which
             is not secret, else none: open, with a warning). TensorFlow's
             worker ports accept any client that reaches them: run on a
             private network or firewall them (docs/security.md)."""


def parse(argv: Sequence[str], environ: Optional[Mapping[str, str]] = None,
          mode: Optional[str] = None) -> Settings:
    """Command line + environment -> Settings. Raises SettingsError.

    `argv` excludes the program name; when `mode` is None the first argument
    is the mode (single, two, multi).
    """
    environ = dict(os.environ if environ is None else environ)
    argv = list(argv)
    if mode is None and argv and argv[0] in MODES:
        mode = argv.pop(0)
    parser = build_parser(mode)
    ns = parser.parse_args(list(argv))
    mode = mode or ns.mode
    values: Dict[str, Any] = {}
    sources: Dict[str, str] = {}
    for knob in KNOBS:
        raw, source = getattr(ns, knob.name, None), "command line"
        if knob.positional:
            opt = getattr(ns, f"opt_{knob.name}")
            if raw is not None and opt is not None and str(raw) != str(opt):
                raise SettingsError(
                    f"{knob.env} given twice: {raw!r} and {knob.flag}={opt!r}")
            raw = raw if raw is not None else opt
        if raw is None:
            env_value = environ.get(knob.env)
            if env_value is not None and env_value.strip() != "":
                raw, source = env_value, f"env {knob.env}"
        if raw is None:
            values[knob.name] = knob.default
            sources[knob.name] = "default"
            continue
        values[knob.name] = _convert(knob, raw, source)
        sources[knob.name] = source
    for name in ("worker_port", "barrier_port"):
        port = values[name]
        if port is not None and not 0 < port < 65536:
            raise SettingsError(f"{name.upper()}={port} ({sources[name]}) is "
                                "not a port in 1..65535")
    if values["run_timeout"] == 0:
        raise SettingsError("RUN_TIMEOUT must be > 0 seconds")
    secret, secret_from = read_barrier_secret(
        environ.get(SECRET_ENV), values["barrier_secret_file"],
        sources["barrier_secret_file"])
    # The trainer inherits the environment: not the secret.
    environ.pop(SECRET_ENV, None)
    tf_config = environ.get("TF_CONFIG", "").strip() or None
    slurm = {k: environ[k] for k in SLURM_VARS if environ.get(k)}
    return Settings(mode=mode, values=values, sources=sources,
                    tf_config=tf_config, slurm=slurm,
                    cuda_visible_devices=host_gpus.cuda_visible_devices(
                        environ),
                    pythonpath=environ.get("PYTHONPATH"),
                    path=environ.get("PATH"),
                    launch_python=environ.get("OB_LAUNCH_PYTHON") or None,
                    launch_python_from=environ.get("OB_LAUNCH_PYTHON_FROM")
                    or None,
                    environ=environ, barrier_secret=secret,
                    barrier_secret_from=secret_from)


def read_barrier_secret(text: Optional[str], path: Optional[str],
                        path_source: str) -> tuple:
    """(secret or None, where it came from) from BARRIER_SECRET or the file
    BARRIER_SECRET_FILE names; SettingsError when both are set, the file
    cannot be read, the secret is empty, or others may read the file."""
    if text is not None and text.strip() == "":
        text = None
    if text is not None and path:
        raise SettingsError(f"both {SECRET_ENV} and BARRIER_SECRET_FILE="
                            f"{path!r} ({path_source}) are set; set one")
    if text is not None:
        return text.strip(), f"{SECRET_ENV} (env)"
    if not path:
        return None, None
    try:
        with open(path, encoding="utf-8") as f:
            secret = f.read().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsError(f"BARRIER_SECRET_FILE={path!r} ({path_source}) "
                            f"cannot be read: {getattr(e, 'strerror', e)}")
    if not secret:
        raise SettingsError(f"BARRIER_SECRET_FILE={path!r} ({path_source}) "
                            "is empty")
    mode = os.stat(path).st_mode & 0o777
    if mode & 0o077:
        # As ssh refuses an unprotected private key: a secret that others
        # on the machine can read authenticates nobody.
        raise SettingsError(f"BARRIER_SECRET_FILE={path!r} ({path_source}) "
                            f"is readable or writable by group or others "
                            f"(mode {mode:04o}); run: chmod 600 {path}")
    return secret, f"BARRIER_SECRET_FILE {path}"
