"""Small helpers shared by tests: tiny configs, free ports, CLI runs."""

import copy
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from official_bench.contracts.hostport import free_ports
from official_bench.contracts.trainer_command import trainer_argv

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# DLPerf's six TF 2.3 ResNet-50 YAMLs, kept as fixtures (header names the
# source); the suite must never read anything outside the repository.
DLPERF_CONFIGS = os.path.join(REPO, "tests", "fixtures", "dlperf")
DLPERF_NAMES = ("gpu.yaml", "gpu_fp16.yaml", "two_node_gpu.yaml",
                "two_node_gpu_fp16.yaml", "multi_node_gpu.yaml",
                "multi_node_gpu_fp16.yaml")
EXAMPLES = os.path.join(REPO, "configs", "examples", "resnet", "imagenet")
# The regex DLPerf's tooling uses on lines containing "TimeHistory".
DLPERF_REGEX = re.compile(r", (\d+.\d+) examples/second ")

def fixture_set(directory, pattern="*.yaml", required=()):
    """Sorted paths matching pattern; raises when the set is empty or lacks a
    required name, so a parametrized test can never shrink to a skip."""
    import glob
    paths = sorted(glob.glob(os.path.join(directory, pattern)))
    names = {os.path.basename(p) for p in paths}
    missing = [n for n in required if n not in names]
    if not paths or missing:
        raise FileNotFoundError(
            f"fixture set {os.path.join(directory, pattern)} is "
            f"{'empty' if not paths else 'missing ' + ', '.join(missing)}")
    return paths


TINY = {
    "runtime": {"distribution_strategy": "one_device", "num_gpus": 0},
    "model": {"name": "resnet_cifar", "model_params": {"depth": 8},
              "learning_rate": {"name": "constant", "initial_lr": 0.05,
                                "warmup_epochs": 0}},
    "train_dataset": {"builder": "synthetic", "image_size": 16,
                      "num_classes": 10, "batch_size": 8,
                      "num_examples": 800},
    "validation_dataset": {"builder": "synthetic", "image_size": 16,
                           "num_classes": 10, "batch_size": 8,
                           "num_examples": 32},
    "train": {"epochs": 1, "steps": 6,
              "time_history": {"log_steps": 2, "progress_seconds": 3600}},
    "evaluation": {"skip_eval": True},
}


def tiny(**sections):
    """TINY with nested overrides: tiny(runtime={"seed": 1})."""
    cfg = copy.deepcopy(TINY)
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            _merge(cfg[key], value)
        else:
            cfg[key] = value
    return cfg


def _merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = v


TINY_OVERRIDE = ",".join([
    "runtime.num_gpus=0",
    "model.name=resnet_cifar", "model.model_params.depth=8",
    "train_dataset.builder=synthetic", "train_dataset.image_size=16",
    "train_dataset.num_classes=10", "train_dataset.batch_size=4",
    "validation_dataset.builder=synthetic",
    "validation_dataset.image_size=16", "validation_dataset.num_classes=10",
    "validation_dataset.batch_size=4", "validation_dataset.num_examples=16",
    "train.steps=6", "train.time_history.log_steps=2",
    "evaluation.skip_eval=true",
])


def consecutive_free_port(n):
    """A port p with p..p+n-1 all free on 127.0.0.1 (worker i binds p + i)."""
    return free_ports(n, consecutive=True)[0]


_ERROR_LINE = re.compile(r"(^|[^a-z])(error|exception)\b|Traceback|exit "
                         r"with status|exited with", re.I)


def failure_text(out, tail=3000):
    """A failed multi-process run's output for an assertion message: its
    first error lines (the rank that failed first is often not the last to
    print) and then its tail."""
    first, seen = [], set()
    for line in out.splitlines():
        shape = re.sub(r"[\d.:]+", "", line)  # repeats differ by time only
        if _ERROR_LINE.search(line) and shape not in seen:
            seen.add(shape)
            first.append(line)
    return ("first error lines:\n" + "\n".join(first[:25])
            + "\n... output tail:\n" + out[-tail:])


def extract_tables(tmp_path, log_dir, python=sys.executable):
    """The extractor (root entry, as DLPerf users run it) on a run-script log
    tree: its JSON table (the 'rn50' part) and its Markdown."""
    out = subprocess.run(
        [python, os.path.join(REPO, "extract_tensorflow_logs.py"),
         "--log_dir", str(log_dir), "--warmup_batches", "2",
         "--train_batches", "6", "--output_dir", str(tmp_path / "result"),
         "--no_plot"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    result = tmp_path / "result"
    table = json.loads((result / f"{log_dir.name}_result.json")
                       .read_text())["rn50"]
    markdown = "".join(p.read_text() for p in result.glob("*.md"))
    return table, markdown


def config_error_lines(override):
    """The lines under load_config's ConfigError for --params_override
    `override` (its first line is the heading), stripped."""
    from official_bench import config
    with pytest.raises(config.ConfigError) as e:
        config.load_config(params_override=override)
    return [line.strip() for line in str(e.value).splitlines()[1:]]


def cli_env(extra=None):
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


# parse_flags in a fresh process, for each argument on stdin: its line.
_FLAG_ERRORS = """
import sys
from absl import flags
from official_bench import classifier_trainer  # noqa: F401 (its flags)
from official_bench.config.flags import parse_flags
for arg in sys.stdin.read().splitlines():
    try:
        parse_flags(["classifier_trainer", arg])
    except SystemExit:
        pass
    flags.FLAGS.unparse_flags()
"""


def flag_errors(args):
    """(the `error: ` lines the trainer's flag parsing gives for each of
    `args`, one process for all; its whole stderr for the message)."""
    p = subprocess.run([sys.executable, "-c", _FLAG_ERRORS], cwd=REPO,
                       env=cli_env(), input="\n".join(args) + "\n",
                       capture_output=True, text=True, timeout=120)
    return [line for line in p.stderr.splitlines()
            if line.startswith("error: ")], p.stderr


def child_env(extra=None):
    """cli_env with this checkout and tests/ first on PYTHONPATH: a child
    Python imports official_bench, support and a test module (by
    importable_name) without editing sys.path."""
    path = os.pathsep.join(p for p in (REPO, os.path.join(REPO, "tests"),
                                       os.environ.get("PYTHONPATH")) if p)
    return cli_env(dict(extra or {}, PYTHONPATH=path))


def load_script(*parts):
    """The module of a script outside the package (benchmarks/, scripts/)
    at REPO/<parts>, loaded and registered under its file's stem (a
    dataclass of it looks itself up in sys.modules)."""
    import importlib.util
    path = os.path.join(REPO, *parts)
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def importable_name(test_file):
    """The dotted name a child_env Python imports a test file by
    (tests/unit/data/build/test_x.py -> unit.data.build.test_x)."""
    rel = os.path.relpath(os.path.splitext(os.path.abspath(test_file))[0],
                          os.path.join(REPO, "tests"))
    return rel.replace(os.sep, ".")


# XLA's CPU back end without LLVM's optimisations, for every process the
# tests start (tests/conftest.py puts it in XLA_FLAGS): the suite's JAX
# programs are tiny and run a few steps, so compiling them is most of their
# time (one tiny CLI run: 27 -> 14 CPU-s). The product never sets it.
FAST_COMPILE = "--xla_backend_optimization_level=0"


def xla_flags(*more):
    """XLA_FLAGS as the tests run it (with FAST_COMPILE) plus `more`."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    if FAST_COMPILE not in flags:
        flags.insert(0, FAST_COMPILE)
    return " ".join(flags + list(more))


def keras3_child(test_file, function, cpu_devices=1, timeout=300):
    """Calls `function` (no arguments) of a test module in a fresh Python
    whose Keras is Keras 3 on JAX with `cpu_devices` CPU devices (JAX fixes
    both at its first use, so a pytest worker cannot); returns the JSON it
    printed as its last line of stdout."""
    env = child_env({"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
                     "XLA_FLAGS": xla_flags(
                         "--xla_force_host_platform_device_count="
                         f"{cpu_devices}")})
    code = f"import {importable_name(test_file)} as t; t.{function}()"
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, (f"{function}: exit {p.returncode} "
                               "(negative: killed by that signal)\n" +
                               p.stdout[-3000:] + p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


_BLOCK_IMPORT = '''
import sys

class _Blocked:
    """Test: behave as if {names} were not installed."""
    def find_spec(self, name, path=None, target=None):
        if any(name == n or name.startswith(n + ".") for n in {names!r}):
            raise ModuleNotFoundError("No module named " + repr(name),
                                      name=name)
        return None

sys.meta_path.insert(0, _Blocked())
'''


def without_module_env(tmp_path, module, extra=None):
    """os.environ whose Pythons cannot import `module` (a top-level name,
    or a tuple of them: ("tensorflow", "tf_keras")); a sitecustomize on
    PYTHONPATH refuses it: a process and the fresh interpreters it spawns
    run as if it were not installed, or show they finish before needing it."""
    names = (module,) if isinstance(module, str) else tuple(module)
    site = tmp_path / f"without_{'_'.join(names)}_site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_BLOCK_IMPORT.format(names=names))
    path = os.pathsep.join(p for p in (str(site), REPO,
                                       os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, **(extra or {}))


def cli(args, timeout=300, env=None, **kwargs):
    """Runs the trainer CLI; returns CompletedProcess (stdout+stderr)."""
    return subprocess.run(
        trainer_argv(sys.executable, extra=args),
        cwd=REPO, env=cli_env(env), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=timeout, **kwargs)


_STEP_LINE = re.compile(r"examples/second between steps \d+ and (\d+)")


def trainer_cmd(model_dir, override, *extra):
    return trainer_argv(sys.executable, mode="train", model_dir=model_dir,
                        params_override=override, extra=extra)


def sigint_as_at_a_terminal():
    """preexec_fn: SIGINT's default action, also where this suite was
    started in the background (`make test &`: the shell ignores SIGINT for
    it, and Python keeps an ignored SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class LiveProcess:
    """A trainer process whose output is read as it comes: its lines, the
    last TimeHistory step, and `on_step(step)` called (in the reader
    thread, while the process is still inside fit) at each interval end."""

    def __init__(self, cmd, on_step=None, env=None):
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=cli_env(env), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
            preexec_fn=sigint_as_at_a_terminal)
        self.lines, self.step, self.on_step = [], 0, on_step
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            m = _STEP_LINE.search(line)
            if m:
                self.step = int(m.group(1))
                if self.on_step:
                    self.on_step(self.step)

    @property
    def output(self):
        return "".join(self.lines)

    @property
    def last_line(self):
        return [l for l in self.output.splitlines() if l.strip()][-1]

    def wait_for_step(self, step, timeout=300):
        deadline = time.monotonic() + timeout
        while self.step < step and self.proc.poll() is None and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert self.step >= step, self.output[-3000:]

    def finish(self, timeout):
        """Waits; still running at the deadline means SIGKILL."""
        try:
            self.proc.wait(timeout=timeout)
        finally:
            kill_all([self])
        self._reader.join(timeout=10)
        return self.proc.returncode


def kill_all(processes):
    for p in processes:
        proc = getattr(p, "proc", p)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def loopback_hosts(n):
    """n free ports on 127.0.0.1 and the worker_hosts string for them."""
    ports = free_ports(n)
    return ports, ",".join(f"127.0.0.1:{p}" for p in ports)


def thread_count(pid):
    """Threads of a process, from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError(f"no Threads line for pid {pid}")


def start_service(*args, python=sys.executable, env=None, timeout=120,
                  module="official_bench.data.feeds.service"):
    """A tf.data service dispatcher or worker
    (official_bench.data.feeds.service), or `module` (such as
    support.service_cluster), once it prints its (first) ready line:
    (process, its lines so far)."""
    proc = subprocess.Popen(
        [python, "-m", module, *args], cwd=REPO,
        env=child_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "ready on port" in line:
            return proc, lines
    kill_all([proc])
    raise AssertionError("service did not start:\n" + "".join(lines))


INSTALL_HOROVOD = os.path.join(REPO, "scripts", "install_horovod.sh")


def horovod_venv():
    """The venv scripts/install_horovod.sh builds (`make horovod`), or skip."""
    venv = subprocess.run(["bash", INSTALL_HOROVOD, "--print-venv"],
                          text=True, capture_output=True).stdout.strip()
    if subprocess.run(["bash", INSTALL_HOROVOD, "--check"],
                      capture_output=True).returncode != 0:
        pytest.skip(f"Horovod venv not built at {venv}: run `make horovod` "
                    "(scripts/install_horovod.sh)")
    return venv


def horovod_env(venv, extra=None):
    """The environment of a horovodrun test: the venv's bin first on PATH
    (horovodrun starts the ranks from it), this checkout and tests/ on
    PYTHONPATH (the check scripts import official_bench and support), tf-keras,
    no GPU."""
    return cli_env(dict({"PATH": os.path.join(venv, "bin") + os.pathsep +
                         os.environ.get("PATH", ""),
                         "PYTHONPATH": os.pathsep.join(
                             [REPO, os.path.join(REPO, "tests")]),
                         "TF_USE_LEGACY_KERAS": "1",
                         "CUDA_VISIBLE_DEVICES": ""}, **(extra or {})))


def horovodrun(venv, *args):
    """horovodrun -np 2 --gloo on this machine, running the venv's python
    with `args`."""
    return [os.path.join(venv, "bin", "horovodrun"), "-np", "2", "-H",
            "localhost:2", "--gloo", os.path.join(venv, "bin", "python"),
            *args]
