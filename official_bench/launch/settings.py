"""Every launcher knob, and the one place that reads environment variables.

Each knob is a command-line option and an environment variable of the same
name in upper case (`--test-num` / `TEST_NUM`); BATCH, DTYPE and TEST_NUM are
also the DLPerf positional arguments. A command-line value wins over the
environment, which wins over the default. Besides the knobs, this module
reads TF_CONFIG, the SLURM_* variables, CUDA_VISIBLE_DEVICES, PYTHONPATH,
PATH, OB_LAUNCH_PYTHON[_FROM] and OB_LAUNCH_PYTHON_UNSET[_FROM] (set by
scripts/lib/launch.sh) and BARRIER_SECRET (plus the file BARRIER_SECRET_FILE
names), and keeps a copy of the environment, without BARRIER_SECRET, for the
trainer processes; no other launcher module looks at os.environ.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import textwrap
from typing import Any, Dict, List, Mapping, Optional, Sequence

from official_bench.contracts import dtypes, exit_status as es
from official_bench.host import gpus as host_gpus
from official_bench.host.flag_errors import OneLineParser, suggestion

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
# The longest wait a float knob (seconds) may ask for: ~31 years, finite,
# and their sums still fit a socket's timeout (OverflowError from ~9.2e9).
MAX_SECONDS = 1e9


class SettingsError(ValueError):
    """A knob has a bad value; the message names the knob and its source.
    `status`: the exit status it ends with (CONFIG; CLUSTER for a task
    index, a node-list problem); `script`: the run script, where the line
    names it."""

    def __init__(self, message: str, status: int = es.CONFIG,
                 script: str = ""):
        super().__init__(message)
        self.status = status
        self.script = script


@dataclasses.dataclass(frozen=True)
class Knob:
    """One knob: its name (environment variable NAME, option --name),
    kind, default, its one line for --help (`brief`, 80 columns) and its
    long help (docs/run_scripts.md's table, reference_markdown()), choices,
    whether it is also a positional argument, and its --help section."""
    # attribute name; env var is NAME.upper(), flag --name-with-dashes
    name: str
    kind: str  # int | float | str | choice | intlist | bool
    default: Any
    brief: str
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
    Knob("batch", "int", None,
         "images per device (default: the config's)",
         "images per device (per-replica batch); default: the config file's "
         "train_dataset.batch_size",
         positional=True),
    Knob("dtype", "choice", "fp32",
         "fp32, fp16 or bf16 (picks the config)",
         "precision: fp32, fp16 or bf16; selects the matching config "
         "(gpu_fp16.yaml, ...)", choices=DTYPES,
         positional=True),
    Knob("test_num", "int", 5,
         "runs of each case",
         "runs of each case", positional=True),
    # Nodes.
    Knob("nodes", "str", None,
         "node list host:port,host:port",
         "node list 'host:port,host:port' (a host without a port gets "
         "WORKER_PORT); default: HOSTFILE, then Slurm, then the config's "
         "runtime.worker_hosts", section="nodes"),
    Knob("hostfile", "str", None,
         "file with one host[:port] per line",
         "file with one host[:port] per line ('#' comments; further words "
         "such as slots=8 are ignored)",
         section="nodes"),
    Knob("num_nodes", "int", None,
         "expected number of nodes",
         "expected number of nodes (two: 2; multi: default the length of the "
         "node list)", section="nodes"),
    Knob("task_index", "int", None,
         "this node's index in the node list",
         "this node's index in the node list; default: from Slurm, else found "
         "by matching this machine's hostname and interface addresses against "
         "the node list", section="nodes"),
    Knob("worker_port", "int", 11111,
         "trainer port of nodes given without one",
         "trainer port for nodes given without one (Slurm node lists, "
         "host-only hostfiles)", section="nodes"),
    Knob("barrier_port", "int", None,
         "port of node 0's barrier (launchers meet)",
         "TCP port of the launchers' meeting point on node 0; default: 1 + "
         "the highest worker port on node 0's host",
         section="nodes"),
    Knob("barrier_secret_file", "str", None,
         "file with the barrier's shared secret (or BARRIER_SECRET=...)",
         "file holding the barrier's shared secret (its content without "
         "surrounding whitespace; the same on every node; keep it mode 600). "
         "Or BARRIER_SECRET=text in the environment (never on the command "
         "line, where ps shows it). Default: derived from the Slurm job in "
         "one, else none (the barrier is open, with a warning); see "
         "docs/security.md",
         section="nodes"),
    Knob("barrier_bind", "str", None,
         "address node 0's barrier listens on",
         "address node 0's barrier listens on; default: what node 0's host in "
         "the node list resolves to on this machine (0.0.0.0 or :: listens on "
         "every interface)",
         section="nodes"),
    Knob("use_slurm", "choice", "auto",
         "node list from SLURM_*: auto, yes, no",
         "take the node list and index from SLURM_* variables: auto (when in "
         "a Slurm job), yes, no",
         choices=("auto", "yes", "no"), section="nodes"),
    # Devices.
    Knob("device", "choice", "auto",
         "auto, gpu or cpu",
         "auto (GPUs when any are visible, else CPU with the smoke config), "
         "gpu or cpu",
         choices=("auto", "gpu", "cpu"), section="devices"),
    Knob("gpus", "intlist", None,
         "GPU counts per node to run, e.g. 1,2,4,8",
         "GPU counts per node to run, e.g. 1,2,4,8; default: single: 1,2,4,8 "
         "(those the machine has), two/multi: all visible GPUs. Set where "
         "no GPU is visible: an error, exit 2 (a dry run assumes them, with "
         "a note; DEVICE=cpu: not used, with a note)",
         section="devices"),
    Knob("gpu_ids", "str", None,
         "GPUs to use, e.g. 0,1,2,3",
         "GPUs to use, e.g. 0,1,2,3 (CUDA_VISIBLE_DEVICES of the trainer; a "
         "run with G GPUs uses the first G); default: all visible. Checked "
         "against nvidia-smi -L (indices, UUIDs) where it answers, else "
         "trusted as the GPUs there (the plan's devices line says 'not "
         "checked')",
         section="devices"),
    Knob("cpu_devices", "intlist", [1],
         "without GPUs: CPU devices per node, e.g. 1,2",
         "without GPUs: logical CPU devices per node to run, e.g. 1,2 "
         "(runtime.cpu_devices; 2 runs mirrored on two CPU devices); with "
         "LAUNCHER=horovod: Horovod processes per node, one CPU device each",
         section="devices"),
    Knob("workers_per_node", "int", 1,
         "trainer processes per node (one per GPU)",
         "trainer processes per node. 1: one process drives all of the node's "
         "devices (mirrored; multi_worker_mirrored across nodes). G > 1: one "
         "multi_worker_mirrored worker per GPU (each sees one GPU through "
         "CUDA_VISIBLE_DEVICES, runtime.num_gpus=1), also on a single node; "
         "without GPUs G workers with one CPU device each. The case is still "
         "{N}n{G}g; local worker l uses the node's port + l and is task "
         "node_index*G + l", section="devices"),
    # Training.
    Knob("config_file", "str", None,
         "trainer YAML (default: picked by DTYPE/device)",
         "trainer YAML; default: "
         "CONFIG_DIR/{gpu,two_node_gpu,multi_node_gpu}[_fp16|_bf16].yaml on "
         "GPUs, CONFIG_DIR/cpu_smoke.yaml on CPU", section="training"),
    Knob("config_dir", "str", None,
         "directory of the default configs",
         "directory of the default configs; default: "
         "configs/examples/resnet/imagenet in the repository",
         section="training"),
    Knob("steps", "int", None,
         "training steps per run",
         "training steps per run (train.steps); default: the config's",
         section="training"),
    Knob("log_steps", "int", None,
         "steps per TimeHistory line",
         "steps per TimeHistory line (train.time_history.log_steps); default: "
         "the config's", section="training"),
    Knob("data_dir", "str", None,
         "ImageNet TFRecords (unset: synthetic data)",
         "ImageNet TFRecord directory: every run "
         "reads it (a config whose builder ignores data_dir, such as the "
         "CPU smoke config's synthetic, gets train_dataset.builder=records); "
         "one that is missing or holds no train-* (or *-train.tfrecord-*) "
         "files stops the launcher before any run, exit "
         f"{es.CONFIG}; unset: synthetic "
         "data (train_dataset.builder=synthetic)", section="training"),
    Knob("params_override", "str", None,
         "extra trainer overrides 'a.b=1,c=2'",
         "extra trainer overrides ('a.b=1,c=2', YAML/JSON or a YAML file), "
         "applied over the launcher's",
         section="training"),
    Knob("peer_timeout", "float", None,
         "seconds a trainer waits for its peers",
         "seconds a trainer waits for its peers to start "
         "(runtime.peer_timeout_seconds); default: the config's",
         section="training"),
    Knob("backend", "choice", "tensorflow",
         "tensorflow, or jax (Keras 3 on JAX)",
         "the trainer's backend (runtime.backend): tensorflow (tf-keras + "
         "tf.distribute, as DLPerf) or jax (Keras 3 on JAX: one process per "
         "node drives all its devices; docs/backends.md). Unset: the "
         "backend CONFIG_FILE or PARAMS_OVERRIDE names (runtime.backend, "
         "as the trainer reads it), else tensorflow; set and different "
         "from the one they name: refused before any run, exit "
         f"{es.CONFIG}",
         choices=("tensorflow", "jax"),
         section="training"),
    Knob("bench", "choice", "train",
         "train, or allreduce (all-reduce bandwidth)",
         "what each run runs: train (the trainer) or allreduce (python -m "
         "official_bench.allreduce.bench with the same config, devices, nodes "
         "and strategy: all-reduce time, algbw and busbw of the model's "
         "gradient size and a sweep; logs allreduce_{dtype}_{i}.log + .json "
         "in the same case directories, which the extractor reads)",
         choices=("train", "allreduce"), section="training"),
    Knob("allreduce_args", "str", None,
         "BENCH=allreduce: further flags",
         "BENCH=allreduce: further official-bench-allreduce flags, split as "
         "by a shell, e.g. '--sizes=model,1M,64M --dtypes=float32 --iters=50'",
         section="training"),
    Knob("python", "str", None,
         "the trainer's Python",
         "Python interpreter for the launcher and the trainer; default (run "
         "scripts): the activated venv's (VIRTUAL_ENV), else the repository's "
         ".venv/bin/python (`make bench` creates it), else python3 from PATH; "
         "--python changes the trainer's only; LAUNCHER=horovod: the ranks "
         "run HOROVOD_VENV/bin/python instead", section="training"),
    Knob("python_check_timeout", "float", 300.0,
         "seconds to check the trainer's Python (0: skip)",
         "seconds allowed for the check, before the first run, that the "
         "trainer's Python imports the trainer (tensorflow, tf_keras, absl, "
         "yaml, official_bench; on every node); 0 skips the check",
         section="training"),
    Knob("nccl_socket_ifname", "str", None,
         "network interface(s) for NCCL",
         "network interface(s) for NCCL (exported as NCCL_SOCKET_IFNAME to "
         "the trainer), e.g. ib0 or eth0",
         section="training"),
    # Paths.
    Knob("log_dir", "str", "logs",
         "log root (LOG_DIR/tensorflow/resnet50/bz{B}/...)",
         "log root; logs go to LOG_DIR/tensorflow/resnet50/bz{B}/{N}n{G}g/"
         "rn50_b{B}_{dtype}_{i}.log "
         "(node k>0: in a node{k}/ subdirectory; WORKERS_PER_NODE: local "
         "worker l>0 beside it as ....log.local{l}, which the extractor does "
         "not read)",
         section="paths"),
    Knob("model_dir", "str", "model_dir",
         "root of the per-run model directories",
         "root of the per-run model directories (a fresh one per run and "
         "node)",
         section="paths"),
    # Flow.
    Knob("sleep_seconds", "float", 5.0,
         "pause between runs",
         "pause between runs",
         section="flow"),
    Knob("barrier_timeout", "float", 300.0,
         "seconds the nodes wait for each other",
         "seconds the nodes wait for each other before each run (and after "
         "it, on top of the run time)",
         section="flow"),
    Knob("run_timeout", "float", 3600.0,
         "wall-clock limit of one run (seconds)",
         "wall-clock limit of one run; then SIGTERM, then SIGKILL after "
         "KILL_AFTER (timeout -k)",
         section="flow"),
    Knob("kill_after", "float", 30.0,
         "seconds from SIGTERM to SIGKILL",
         "seconds between SIGTERM and SIGKILL when a run is stopped",
         section="flow"),
    Knob("on_failure", "choice", "continue",
         "after a failed run: continue or stop",
         "after a run that failed on any node: continue with the next run, or "
         "stop (all nodes alike)",
         choices=("continue", "stop"), section="flow"),
    Knob("resume", "bool", False,
         "keep this case's ok runs, run the others",
         "continue a sweep whose log tree holds some of its runs: keep the "
         "runs whose status is ok (on every node), run only the missing or "
         "failed ones (their old files, and those of runs beyond TEST_NUM, "
         "are moved aside into the case's .replaced-{stamp}/ folder); on "
         "every node of a two/multi-node sweep, which agree through the "
         "barrier. An ok run whose logged command differs from this "
         "sweep's (overrides, config, Python: the same venv reached "
         "through a symlinked folder is the same, a config file at another "
         "path with the same contents too, one edited since the run not; "
         "not its model_dir, ports or PEER_TIMEOUT), or made by another "
         "suite version (its log's `# official_bench:` line), stops the "
         "sweep before any run, exit 6; a kept run whose log names no "
         "version (an older launcher) is kept with a `note:`",
         section="flow"),
    Knob("overwrite", "bool", False,
         "move this case's old runs aside, run all",
         "re-run a sweep whose log tree holds some of its runs: every run "
         "runs into the case's .overwrite-{stamp}/ folder; when all ended ok, "
         "the old logs, JSON and status files (beyond TEST_NUM too) move "
         "aside into its .replaced-{stamp}/ folder (never deleted; the "
         "extractor does not read it) and the new ones take their place; "
         "otherwise the old runs stay", section="flow"),
    Knob("quiet", "bool", False,
         "no progress lines while a run trains",
         "no progress lines while a run trains (the run's result line and the "
         "summary still show its img/s)",
         section="flow"),
    Knob("dry_run", "bool", False,
         "print the plan; run nothing",
         "print the cluster, TF_CONFIG, commands and paths; run nothing. "
         "Works off the nodes too (a login node): on a machine not in the "
         "node list it shows node 0's plan (TASK_INDEX picks another); "
         "what would stop a real run here (a host that does not resolve, "
         "no GPU) is a note",
         section="flow"),
    # Launcher.
    Knob("launcher", "choice", "tf",
         "tf, or horovod (horovodrun from node 0)",
         "tf: one trainer per node, multi_worker_mirrored across nodes "
         "(TF_CONFIG); horovod: one horovodrun from node 0 starts one process "
         "per GPU on every node (ssh to the others) with "
         "runtime.distribution_strategy horovod",
         choices=("tf", "horovod"), section="launcher"),
    Knob("horovod_venv", "str", None,
         "LAUNCHER=horovod: its venv",
         "environment whose bin/ holds horovodrun and the python the ranks "
         "run (the same path on every node); default: "
         "`scripts/install_horovod.sh --print-venv` (built by `make horovod`)",
         section="launcher"),
    Knob("horovodrun_controller", "choice", "gloo",
         "LAUNCHER=horovod: gloo, mpi or auto",
         "horovodrun --gloo, --mpi, or auto (neither flag: horovodrun "
         "decides); the venv of `make horovod` has Gloo only",
         choices=("gloo", "mpi", "auto"), section="launcher"),
    Knob("horovodrun_network_interface", "str", None,
         "LAUNCHER=horovod: e.g. eth0",
         "horovodrun --network-interface, e.g. eth0 or ib0 (comma-separated "
         "for several); default: horovodrun finds the interfaces the hosts "
         "share", section="launcher"),
    Knob("horovodrun_args", "str", None,
         "LAUNCHER=horovod: further horovodrun options",
         "further horovodrun options, split as by a shell, e.g. '--ssh-port "
         "2222 --start-timeout 120'",
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
    # With PYTHON set: what the run script would have chosen without it
    # (VIRTUAL_ENV | .venv | PATH), for the advice to unset it.
    launch_python_unset: Optional[str] = None
    launch_python_unset_from: Optional[str] = None
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
        return (f"{name.upper()}={self.values.get(name)!r} "
                f"({self.source(name)})")

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
            if not 0 <= value <= MAX_SECONDS:  # nan and inf fail too
                raise ValueError
            if value == 0 and knob.name == "run_timeout":
                raise ValueError  # a run needs some time
            return value
        if knob.kind == "intlist":
            items = [s for s in text.replace(" ", ",").split(",") if s]
            values = [int(s) for s in items]
            if not values or any(v < 1 for v in values):
                raise ValueError
            return values
    except ValueError:
        what = {"int": "a positive integer",
                "float": f"a number of seconds from 0 to {MAX_SECONDS:.0f}",
                "intlist": "a comma-separated list of positive integers"}
        if knob.name == "task_index":
            what["int"] = "an integer >= 0"
        if knob.name == "run_timeout":
            what["float"] = ("a number of seconds above 0, up to "
                             f"{MAX_SECONDS:.0f}")
        raise SettingsError(f"{knob.env}={raw!r} ({source}) is not "
                            f"{what[knob.kind]}")
    if knob.kind == "choice":
        value = text.lower()
        if knob.name == "dtype":
            value = dtypes.TO_SHORT.get(value, value)
        if value not in knob.choices:
            raise SettingsError(f"{knob.env}={raw!r} ({source}) is not one "
                                f"of: {', '.join(knob.choices)}" +
                                suggestion(value, knob.choices))
        return value
    return text


# Knob sections a script's --help shows: single-node runs no node list.
NODE_SECTIONS = ("nodes",)
HELP_WIDTH = 80
DOCS_PAGE = "docs/run_scripts.md"


def _formatter(prog: str) -> argparse.HelpFormatter:
    """80 columns whatever the terminal says (COLUMNS), so no choice list
    or flag is split mid-word on a wide terminal's copy-paste."""
    return argparse.RawDescriptionHelpFormatter(
        prog, width=HELP_WIDTH, max_help_position=34)


def shown_in_help(knob: Knob, mode: Optional[str]) -> bool:
    """Whether `mode`'s --help lists the knob (every knob is accepted)."""
    return not (mode == "single" and knob.section in NODE_SECTIONS)


def build_parser(mode: Optional[str] = None) -> argparse.ArgumentParser:
    script = MODES.get(mode or "", "python -m official_bench.launch MODE")
    parser = OneLineParser(
        # No abbreviations: a peer tool's --model=resnet50 is not
        # --model-dir, and --bat is no flag.
        allow_abbrev=False,
        prog=f"bash {script}" if mode else "python -m official_bench.launch",
        usage=(f"bash {script} [BATCH] [DTYPE] [TEST_NUM] [options]" if mode
               else "python -m official_bench.launch {single,two,multi}\n"
                    "       [BATCH] [DTYPE] [TEST_NUM] [options]"),
        formatter_class=_formatter,
        description=_DESCRIPTION[mode or "single"].format(
            cmd=f"bash {script}" if mode else
            "python -m official_bench.launch single"),
        epilog=_EPILOG[mode or "single"])
    if mode is None:
        parser.add_argument("mode", choices=sorted(MODES),
                            help="single, two or multi node(s)")
    groups: Dict[str, Any] = {}
    titles = {"run": "what to run (positional, as in DLPerf)",
              "nodes": "nodes", "devices": "devices",
              "training": "trainer", "paths": "paths", "flow": "flow",
              "launcher": "launcher"}
    for knob in KNOBS:
        shown = shown_in_help(knob, mode)
        if shown and knob.section not in groups:
            groups[knob.section] = parser.add_argument_group(
                titles[knob.section])
        group = groups.get(knob.section, parser) if shown else parser
        default = knob.default
        if isinstance(default, list):
            default = ",".join(map(str, default))
        text = knob.brief + (
            f" [{default}]" if default not in (None, False) else "")
        text = text if shown else argparse.SUPPRESS
        if knob.positional:
            group.add_argument(knob.name, nargs="?", default=None,
                               metavar=knob.env, help=text)
            group.add_argument(knob.flag, dest=f"opt_{knob.name}",
                               default=None, metavar=knob.env,
                               help=argparse.SUPPRESS)
        elif knob.kind == "bool":
            group.add_argument(knob.flag, dest=knob.name, action="store_const",
                               const=True, default=None, help=text)
        else:
            group.add_argument(knob.flag, dest=knob.name, default=None,
                               metavar=knob.env, help=text)
    return parser


_COMMON = """\
Every option is also an environment variable of the name shown (--test-num
N or TEST_NUM=N; BATCH, DTYPE, TEST_NUM also by position); the command line
wins. Every variable, the log tree, exit statuses, Horovod, Slurm and
security: docs/run_scripts.md."""

_DESCRIPTION = {
    "single": """\
ResNet-50 v1.5 images/second on this node (DLPerf's runs): TEST_NUM runs of
each GPU count (1, 2, 4, 8: those it has; CPU without GPUs), logged where
extract_tensorflow_logs.py reads them (the last line is its command).

examples:
  {cmd} 256 fp16
      5 runs each of 1, 2, 4 and 8 GPUs, 256 images per GPU, fp16
  TEST_NUM=1 STEPS=60 {cmd} 16
      a short try: 1 run of 60 steps (also on CPU)
  {cmd} 128 fp32 1 --gpus 8 --dry-run
      the plan for 8 GPUs (commands, logs); runs nothing

""" + _COMMON,
    "two": """\
ResNet-50 v1.5 images/second on 2 nodes: start it the same way on both (or
with srun); every run starts together on both nodes (a barrier on node 0).

examples:
  NODES=h1:11111,h2:11111 {cmd} 256 fp16
      on h1 and on h2: 5 runs of 2 nodes x 8 GPUs
  srun -N2 --ntasks-per-node=1 {cmd} 256 fp16
      the same in a Slurm job (node list and index from Slurm)
  NODES=h1,h2 LAUNCHER=horovod {cmd} 128
      on h1 only: one horovodrun reaches h2 over ssh

""" + _COMMON,
    "multi": """\
ResNet-50 v1.5 images/second on N nodes (DLPerf: 4): start it the same way
on every node (or with srun); every run starts together on every node.

examples:
  HOSTFILE=hosts {cmd} 256 fp16
      on every host of the file (one host[:port] per line)
  srun -N4 --ntasks-per-node=1 {cmd} 256 fp16
      the same in a Slurm job (node list and index from Slurm)
  NODES=h1,h2,h3,h4 LAUNCHER=horovod {cmd} 128
      on h1 only: one horovodrun reaches the others over ssh

""" + _COMMON,
}

# What each status the launcher ends with means, in its --help's words;
# the numbers and their order are contracts/exit_status.py's (exit_help).
EXIT_WORDS: Dict[int, str] = {
    es.OK: "all runs ok",
    es.FAILED: "some run failed",
    es.CONFIG: "bad arguments or config",
    es.CLUSTER: "node list / task index",
    es.NOT_WRITABLE: "a log could not be written (disk full)",
    es.LOGS_IN_USE: "the log tree is in use or holds these runs (RESUME=1 "
                    "or OVERWRITE=1)",
    es.BARRIER_TIMEOUT: "a node never arrived",
    es.INTERRUPTED: "interrupted",
    es.TERMINATED: "interrupted",
}
EXIT_LABEL = "exit status: "
# The block's lines as they were first wrapped by hand (74 columns).
EXIT_WIDTH = 74


def exit_help(words: Mapping[int, str]) -> str:
    """The epilog's exit-status block: each status of `words` in the
    table's order, neighbours with the same words as one ("130/143
    interrupted"); KeyError for a status the table lacks."""
    for code in words:
        if es.lookup(code) is None:
            raise KeyError(f"exit status {code} is not a row of "
                           "contracts/exit_status.py")
    parts: List[tuple] = []  # ([codes], words)
    for row in es.TABLE:
        if row.code not in words:
            continue
        if parts and parts[-1][1] == words[row.code]:
            parts[-1][0].append(row.code)
        else:
            parts.append(([row.code], words[row.code]))
    text = ", ".join("/".join(map(str, codes)) + " " + what
                     for codes, what in parts)
    return textwrap.fill(text, width=EXIT_WIDTH, initial_indent=EXIT_LABEL,
                         subsequent_indent=" " * len(EXIT_LABEL),
                         break_on_hyphens=False, break_long_words=False)


_EXIT = exit_help(EXIT_WORDS)

_NODES = """\
node list:   TF_CONFIG > NODES > HOSTFILE > Slurm > the config's
             runtime.worker_hosts; this node: TASK_INDEX, else Slurm, else
             the node whose host is this machine
"""

_MORE = "\nevery variable and behaviour: docs/run_scripts.md"

_EPILOG = {
    "single": _EXIT + _MORE,
    "two": _EXIT + "\n" + _NODES.rstrip("\n") + _MORE,
    "multi": _EXIT + "\n" + _NODES.rstrip("\n") + _MORE,
}


def reference_markdown() -> str:
    """docs/run_scripts.md's variable table, from KNOBS: every knob's
    variable, option, default and long help (a test compares them)."""
    rows = ["| variable | option | default | what |", "|---|---|---|---|"]
    for knob in KNOBS:
        default = knob.default
        if isinstance(default, list):
            default = ",".join(map(str, default))
        shown = "" if default in (None, False) else f"`{default}`"
        flag = f"`{knob.flag}`" + (" or position" if knob.positional else "")
        scripts = "two, multi only: " if knob.section in NODE_SECTIONS \
            else ""
        text = (scripts + knob.help).replace("|", "\\|")
        rows.append(f"| `{knob.env}` | {flag} | {shown} | {text} |")
    return "\n".join(rows) + "\n"


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
        try:
            values[knob.name] = _convert(knob, raw, source)
        except SettingsError as e:
            if knob.name != "task_index" or mode not in MODES:
                raise
            # A node index the launcher cannot use: the node/index status,
            # as one out of range gets (nodes.py).
            raise SettingsError(str(e), es.CLUSTER, MODES[mode])
        sources[knob.name] = source
    for name in ("worker_port", "barrier_port"):
        port = values[name]
        if port is not None and not 0 < port < 65536:
            raise SettingsError(f"{name.upper()}={port} ({sources[name]}) is "
                                "not a port in 1..65535")
    if values["resume"] and values["overwrite"]:
        raise SettingsError(f"RESUME ({sources['resume']}) and OVERWRITE "
                            f"({sources['overwrite']}) are both set; set "
                            "one: RESUME keeps the ok runs, OVERWRITE moves "
                            "every old run aside")
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
                    launch_python_unset=environ.get(
                        "OB_LAUNCH_PYTHON_UNSET") or None,
                    launch_python_unset_from=environ.get(
                        "OB_LAUNCH_PYTHON_UNSET_FROM") or None,
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
