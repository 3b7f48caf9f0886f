"""official-bench-doctor: flags, the order of work, the console entry.

    official-bench-doctor [--backend {auto,tensorflow,jax}] [--quick]
                          [--only NAME ...] [--output FILE]

Its exit statuses are EXIT_STATUSES below, listed by --help from
contracts/exit_status.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import errno
import os
import sys
import textwrap
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from official_bench.contracts import exit_status as es
from official_bench.doctor import (
    check_plan as plan,
    commands,
    env_checks,
    jax_diagnosis,
    jaxprobe,
    report,
    run_checks,
    tfprobe,
)
from official_bench.host import gpu_diagnosis, gpus as host_gpus, probes
from official_bench.host.flag_errors import OneLineParser
from official_bench.host.terminal import help_formatter, help_width
from official_bench.host.write_errors import NotWritable, writing

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DEFAULT_TIMEOUTS = {"gpu": 900.0, "cpu": 300.0}
PROBE_TIMEOUT = 300.0


# --help's exit statuses (contracts/exit_status.help_text).
EXIT_STATUSES = {
    es.OK: "nothing failed (skips are not failures)",
    es.FAILED: "a check failed",
    es.CONFIG: "bad flags",
    es.NOT_WRITABLE: "the report cannot be written (the last line names the "
                     "file and the free space there; the doctor stops at "
                     "once)",
    es.INTERRUPTED: "interrupted (the JSON then holds the checks finished so "
                    "far)",
}


def _epilog() -> str:
    kinds = "\n".join(textwrap.fill(
        text, help_width(), initial_indent=f"  {kind:<13} ",
        subsequent_indent=" " * 16) for kind, text in plan.KIND_HELP.items())
    gpu = commands.GPU_PROFILE
    return f"""checks (by kind):
{kinds}

With GPUs, single-GPU runs cover fp32/fp16/bf16 x channels_first/
channels_last x XLA off/on (bf16 only on compute capability >= 8.0); runs
are ResNet-50, synthetic 224x224 images, batch {gpu.batch_size} per GPU,
{gpu.steps} steps. Without GPUs the CPU subset runs instead (tiny resnet_cifar,
16x16 images): fp32, fp32+XLA, bf16, fp16 on one CPU device, mirrored over
2 logical CPU devices, 2 local workers, Horovod; every GPU check is listed
as SKIP with the reason. `--list` shows the plan for this machine.

--backend jax (auto's choice where TensorFlow does not import but JAX and
Keras 3 do) checks the jax backend instead: a jax row for tensorflow's,
JAX's GPUs against nvidia-smi's, fp32/fp16/bf16 on one device and mirrored
over all GPUs, two local workers; data format, XLA off and Horovod are
SKIP (TensorFlow backend only).

{textwrap.fill(es.help_text(EXIT_STATUSES), help_width())}"""


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="official-bench-doctor",
        # Raw (the epilog is laid out by hand), so wrapped here.
        description=textwrap.fill(
            "Checks this machine before any benchmark number is trusted: "
            "prints a PASS/FAIL/SKIP table and writes it as JSON.",
            help_width()),
        epilog=_epilog(),
        formatter_class=help_formatter(argparse.RawDescriptionHelpFormatter))
    p.add_argument("--workdir", default=os.path.join("model_dir", "doctor"),
                   help="where each check's run directory and logs go "
                        "(default: model_dir/doctor)")
    p.add_argument("--output", default=None,
                   help="the JSON report (default: WORKDIR/doctor.json)")
    p.add_argument("--backend", choices=("auto",) + plan.BACKENDS,
                   default="auto",
                   help="the trainer backend to check (default auto: "
                        "tensorflow when the trainer's Python imports it, "
                        "else jax when it imports JAX and Keras 3)")
    p.add_argument("--quick", action="store_true",
                   help="fewer runs: fp32 and fp16, channels_last, XLA off "
                        "(CPU: fp32 only)")
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="run only checks matching NAME (glob, repeatable, "
                        "or comma-separated), e.g. '1gpu-fp16-*'; a check's "
                        "baseline still runs")
    p.add_argument("--list", action="store_true",
                   help="print the checks planned for this machine and exit")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="per check; default 900 on GPU, 300 on CPU")
    p.add_argument("--steps", type=int, default=None,
                   help=f"training steps per run (default GPU "
                        f"{commands.GPU_PROFILE.steps}, CPU "
                        f"{commands.CPU_PROFILE.steps})")
    p.add_argument("--batch-size", type=int, default=None,
                   help=f"per replica (default GPU "
                        f"{commands.GPU_PROFILE.batch_size}, CPU "
                        f"{commands.CPU_PROFILE.batch_size})")
    p.add_argument("--require-gpu", action="store_true",
                   help="a machine without a usable GPU is a failure, not "
                        "a skip")
    p.add_argument("--horovod-venv", default=None, metavar="DIR",
                   help="Horovod venv (default: scripts/install_horovod.sh "
                        "--print-venv)")
    p.add_argument("--sample-period", type=float, default=0.5,
                   metavar="SECONDS",
                   help="GPU utilisation / thread count sampling period")
    return p


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds")


def _profiles(args) -> Dict[str, commands.Profile]:
    out = {}
    for device, base in (("gpu", commands.GPU_PROFILE),
                         ("cpu", commands.CPU_PROFILE)):
        changes = {}
        if args.steps:
            changes["steps"] = args.steps
            changes["log_steps"] = max(1, min(base.log_steps,
                                              args.steps // 4))
        if args.batch_size:
            changes["batch_size"] = args.batch_size
        out[device] = dataclasses.replace(base, **changes)
    return out


def _validate(args, parser) -> List[str]:
    for name in ("timeout", "steps", "batch_size", "sample_period"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0, got "
                         f"{value}")
    return [p.strip() for item in args.only for p in item.split(",")
            if p.strip()]


@dataclasses.dataclass
class Machine:
    """The facts the plan and the environment rows are made from."""
    tf_facts: Optional[Dict]
    probe_error: Optional[str]
    smi: gpu_diagnosis.SmiFacts
    diagnosis: gpu_diagnosis.Diagnosis
    reader: Optional[Callable]
    reader_desc: str
    horovod_venv: Optional[str]
    horovod_skip: Optional[str]
    no_gpu: Optional[str]  # why the GPU checks are skipped
    backend: str = "tensorflow"
    jax_facts: Optional[Dict] = None
    jax_error: Optional[str] = None
    backend_note: Optional[str] = None  # why --backend auto chose it

    @property
    def facts(self) -> Optional[Dict]:
        """The checked backend's probe facts (both list GPUs alike)."""
        return self.jax_facts if self.backend == "jax" else self.tf_facts

    @property
    def started(self) -> bool:
        """The backend imports (on jax: JAX and Keras 3 both)."""
        if self.backend == "jax":
            return jaxprobe.usable(self.jax_facts)
        return self.tf_facts is not None

    def backend_row(self) -> report.CheckResult:
        if self.backend == "jax":
            return env_checks.jax_row(self.jax_facts, self.jax_error)
        return env_checks.tensorflow_row(self.tf_facts, self.probe_error)

    def to_json(self) -> Dict:
        smi = self.smi
        return {
            "backend": self.backend, "backend_note": self.backend_note,
            "jax": self.jax_facts, "jax_error": self.jax_error,
            "tensorflow": self.tf_facts, "tensorflow_error": self.probe_error,
            "nvidia_smi": {"found": smi.found, "ok": smi.ok,
                           "error": smi.error,
                           "gpus": [g._asdict() for g in smi.gpus]},
            "diagnosis": self.diagnosis._asdict(),
            "gpu_sampler": self.reader_desc,
            "horovod_venv": self.horovod_venv,
            "horovod_skip": self.horovod_skip, "python": sys.executable,
        }


Probe = Callable[[], Tuple[Optional[Dict], Optional[str]]]


@dataclasses.dataclass
class Choice:
    """The backend to check and what its probe (and auto's) found."""
    backend: str
    tf: Tuple[Optional[Dict], Optional[str]] = (None, None)
    jax: Tuple[Optional[Dict], Optional[str]] = (None, None)
    note: Optional[str] = None


def choose_backend(requested: str, probe_tf: Probe, probe_jax: Probe
                   ) -> Choice:
    """--backend's choice: asked for, or (auto) tensorflow when the
    trainer's Python imports it, else jax when it imports JAX and Keras 3,
    else tensorflow, whose row then says what failed. Runs only the probes
    the choice needs."""
    if requested == "jax":
        return Choice("jax", jax=probe_jax())
    tf = probe_tf()
    if requested == "tensorflow" or tf[0] is not None:
        return Choice("tensorflow", tf=tf)
    jax = probe_jax()
    if jaxprobe.usable(jax[0]):
        return Choice("jax", tf=tf, jax=jax,
                      note=f"TensorFlow does not import ({tf[1]}); JAX and "
                           "Keras 3 do")
    why = jax[1] or env_checks.jax_row(*jax).detail
    return Choice("tensorflow", tf=tf, jax=jax,
                  note=f"neither TensorFlow nor JAX with Keras 3 imports "
                       f"(JAX: {why})")


def gather(env: Dict[str, str], horovod_venv: Optional[str],
           backend: str = "tensorflow",
           progress: Optional[Callable[[str], None]] = None) -> Machine:
    """Asks the backend (in a subprocess) and nvidia-smi what this machine
    has, diagnoses a missing GPU, and finds the Horovod venv; `progress`
    gets a line while a probe takes long."""
    choice = choose_backend(
        backend,
        lambda: tfprobe.probe(sys.executable, REPO, env, PROBE_TIMEOUT,
                              progress),
        lambda: jaxprobe.probe(sys.executable, REPO, env, PROBE_TIMEOUT,
                               progress))
    (tf_facts, probe_error), (jax_facts, jax_error) = choice.tf, choice.jax
    smi = gpu_diagnosis.probe_nvidia_smi()
    visible = host_gpus.cuda_visible_devices()
    if choice.backend == "jax":
        facts, error = jax_facts, jax_error
        diagnosis = jax_diagnosis.diagnose(jax_facts, smi, visible)
        hvd_venv, hvd_skip = None, plan.TF_ONLY
    else:
        facts, error = tf_facts, probe_error
        diagnosis = gpu_diagnosis.diagnose(
            (tf_facts or {}).get("build") or {},
            env_checks.gpu_names(tf_facts), smi, visible,
            (tf_facts or {}).get("tensorflow"))
        hvd_venv, hvd_skip = env_checks.find_horovod_venv(REPO, horovod_venv)
    reader, reader_desc = (probes.make_gpu_reader()
                           if env_checks.gpu_names(facts)
                           else (None, "no GPU"))
    machine = Machine(tf_facts, probe_error, smi, diagnosis, reader,
                      reader_desc, hvd_venv, hvd_skip, None,
                      backend=choice.backend, jax_facts=jax_facts,
                      jax_error=jax_error, backend_note=choice.note)
    if not machine.started and facts is not None:  # JAX without Keras 3
        facts, error = None, machine.backend_row().detail
    machine.no_gpu = env_checks.no_gpu_reason(facts, error, diagnosis,
                                              choice.backend)
    return machine


def plan_for(machine: Machine, quick: bool) -> List[plan.CheckSpec]:
    """The checks for this machine; if the backend did not even start,
    every run is a SKIP naming that (one failure instead of ten)."""
    n = len(env_checks.gpu_names(machine.facts))
    gpu_ids = host_gpus.gpu_ids(host_gpus.cuda_visible_devices(), n)
    checks = plan.plan(gpu_ids if not machine.no_gpu else [],
                       env_checks.capabilities(machine.facts),
                       machine.no_gpu, machine.horovod_skip, quick=quick,
                       backend=machine.backend)
    if not machine.started:
        checks = [dataclasses.replace(c, skip=c.skip or machine.no_gpu)
                  if c.run else c for c in checks]
    return checks


def main(argv: Optional[Sequence[str]] = None,
         out: Callable[[str], None] = print) -> int:
    """Runs the doctor; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    only = _validate(args, parser)
    workdir = os.path.abspath(args.workdir)
    output = os.path.abspath(args.output or os.path.join(workdir,
                                                         "doctor.json"))
    started = _now()
    env = commands.child_env(os.environ)
    asked = {"auto": "the trainer's Python", "tensorflow": "TensorFlow",
             "jax": "JAX"}[args.backend]
    out(f"official-bench-doctor: asking {asked} what it sees ...")
    machine = gather(env, args.horovod_venv, args.backend, out)
    if machine.backend_note:  # auto did not find TensorFlow
        out(f"official-bench-doctor: backend {machine.backend}: "
            f"{machine.backend_note}")
    checks = plan_for(machine, args.quick)
    try:
        selected = plan.select(checks, only)
    except ValueError as e:
        parser.error(str(e))
    if args.list:
        # the gpus row as the run will judge it: SKIP on a machine with none
        gpus_skip = _gpus_row(machine, args).result == report.SKIP
        if machine.no_gpu and any(c.skip == machine.no_gpu or c.name == "gpus"
                                  and gpus_skip for c in selected):
            out("official-bench-doctor: "
                f"{report.skipped_line(machine.no_gpu)}")
        for c in selected:
            skip = report.NO_GPU_SHORT if (
                c.skip and c.skip == machine.no_gpu
                or c.name == "gpus" and gpus_skip) else c.skip
            out(f"{c.name:<34} {'SKIP: ' + skip if skip else 'run'}")
        return es.OK
    try:  # before any check runs: a check's minutes are not lost
        _check_writable(workdir, output)
    except NotWritable as e:
        return _not_writable(e)
    facts = dict(machine.to_json(), workdir=workdir)
    no_gpu = machine.no_gpu
    results = [machine.backend_row(), _gpus_row(machine, args)]
    if no_gpu:  # the one place the reason is said (report.shown_detail)
        out(f"official-bench-doctor: {report.skipped_line(no_gpu)}")
    timeouts = ({"gpu": args.timeout, "cpu": args.timeout} if args.timeout
                else dict(DEFAULT_TIMEOUTS))
    ctx = run_checks.RunContext(
        python=sys.executable, repo=REPO, workdir=workdir, env=env,
        timeouts=timeouts, profiles=_profiles(args),
        gpu_reader=machine.reader, gpu_reader_desc=machine.reader_desc,
        horovod_venv=machine.horovod_venv, sample_period=args.sample_period,
        progress=out, backend=machine.backend)
    try:
        results += _run_all(selected, checks, ctx, out, output, facts,
                            started, no_gpu, results)
    except KeyboardInterrupt:
        out(f"official-bench-doctor: interrupted; the checks finished so "
            f"far are in {output} (complete: false)")
        return es.INTERRUPTED
    except NotWritable as e:  # the next checks would fail to write too
        return _not_writable(e)
    out("")
    out(report.table(results, no_gpu))
    try:
        report.write(output, report.document(results, facts, started,
                                             _now(), no_gpu))
    except NotWritable as e:
        return _not_writable(e)
    out(f"official-bench-doctor: report written to {output}")
    return report.exit_status(results)


def _check_writable(workdir: str, output: str) -> None:
    """NotWritable when the run folders or the report's folder cannot be
    made (a file in a folder's place, read-only, no permission)."""
    runs = os.path.join(workdir, "runs")
    for path, folder, what in (
            (runs, runs, "the checks' run folders"),
            (output, os.path.dirname(output), "the doctor's report")):
        with writing(path, what):
            os.makedirs(folder, exist_ok=True)
        if not os.access(folder, os.W_OK):
            raise NotWritable(errno.EACCES, path, what, None)
    if os.path.isdir(output):
        raise NotWritable(errno.EISDIR, output, "the doctor's report", None)


def _gpus_row(machine, args) -> "report.CheckResult":
    """The gpus row from what `gather` found (no probe runs again)."""
    return env_checks.gpus_row(machine.facts, machine.smi, machine.diagnosis,
                               machine.reader_desc, args.require_gpu,
                               machine.backend)


def _not_writable(error: NotWritable) -> int:
    """The report could not be written: one line (path, cause, free space),
    last, on stderr."""
    sys.stdout.flush()
    print(f"error: {error}", file=sys.stderr, flush=True)
    return es.NOT_WRITABLE


def _run_all(selected, planned, ctx, out, output, machine, started, no_gpu,
             head) -> List[report.CheckResult]:
    """Runs the selected checks in order, printing progress and keeping the
    JSON report current after each one."""
    runnable = [c for c in selected if c.kind not in plan.ENV_KINDS]
    specs = {c.name: c for c in planned}
    done: Dict[str, report.CheckResult] = {}
    results = []
    for i, spec in enumerate(runnable, 1):
        tag = f"[{i}/{len(runnable)}] {spec.name}"
        if not spec.skip:
            out(f"{tag}: running (timeout {ctx.timeouts[spec.device]:g} s)")
        start = time.monotonic()
        result = run_checks.run_check(spec, ctx, done, specs)
        done[spec.name] = result
        # A baseline run_check ran first (not selected itself) is listed too.
        results = list(done.values())
        out(f"{tag}: {result.result}" + (
            f" in {time.monotonic() - start:.0f} s" if not spec.skip else
            f" ({report.shown_detail(result, no_gpu)})"))
        report.write(output, report.document(head + results, machine,
                                             started, None, no_gpu))
    return results


def run_main() -> None:
    """Console script entry (official-bench-doctor)."""
    sys.exit(main())


if __name__ == "__main__":
    run_main()
