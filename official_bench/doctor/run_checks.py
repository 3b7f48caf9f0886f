"""Running one planned check: trainer processes, samplers, verdicts.

Each check trains in its own directory under the doctor's workdir (removed
first, so a stale result.json is never read), samples GPU utilisation and
worker threads while it runs, then judges the result.json files with
official_bench/doctor/verdicts.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from typing import Callable, Dict, List, Optional

from official_bench.config import strategies
from official_bench.contracts import dtypes, stage_line
from official_bench.contracts.hostport import free_ports
from official_bench.contracts.log_tree import result_file_name
from official_bench.contracts.throughput import THROUGHPUT_MARK
from official_bench.doctor import commands, gpu_util, threads, verdicts
from official_bench.doctor.check_plan import CheckSpec
from official_bench.doctor.check_procs import Command, Outcome, ProcessGroup
from official_bench.doctor.report import FAIL, PASS, SKIP, CheckResult
from official_bench.doctor.verdicts import Finding
from official_bench.host.probes import PeriodicSampler
from official_bench.host.write_errors import writing

HEARTBEAT_SECONDS = 8.0  # never more than 10 s without a line


@dataclasses.dataclass
class RunContext:
    """Everything a check needs besides its spec."""
    python: str
    repo: str  # cwd of the trainer processes
    workdir: str
    env: Dict[str, str]
    timeouts: Dict[str, float]  # by device: gpu, cpu
    profiles: Dict[str, commands.Profile]  # by device
    gpu_reader: Optional[Callable] = None
    gpu_reader_desc: str = "no GPU sampler"
    horovod_venv: Optional[str] = None
    sample_period: float = 0.5
    progress: Callable[[str], None] = print
    backend: str = "tensorflow"  # runtime.backend of every run


def _run_dir(ctx: RunContext, name: str) -> str:
    path = os.path.join(ctx.workdir, "runs", name)
    shutil.rmtree(path, ignore_errors=True)
    with writing(path, f"the run folder of check {name}"):
        os.makedirs(path)
    return path


def _read_json(path: str) -> Optional[Dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _commands(spec: CheckSpec, ctx: RunContext, model_dir: str
              ) -> List[Command]:
    """The processes of a check: 1, one per worker, or horovodrun."""
    run = spec.run
    traits = strategies.traits(run.strategy)
    profile = ctx.profiles[spec.device]
    pairs = commands.overrides(run, profile, backend=ctx.backend)
    log = os.path.join(model_dir, "{}.log")
    if traits.horovod_allreduce:  # Horovod's ranks: horovodrun starts them
        extra = {"PATH": os.path.join(ctx.horovod_venv, "bin") + os.pathsep
                 + ctx.env.get("PATH", ""), "TF_USE_LEGACY_KERAS": "1"}
        if run.num_gpus == 0:
            extra["CUDA_VISIBLE_DEVICES"] = ""
        argv = commands.horovod_argv(ctx.horovod_venv, run.processes,
                                     model_dir, pairs)
        return [Command(argv, commands.child_env(ctx.env, extra),
                        log.format("horovodrun"))]
    if traits.peer_workers:  # one process per worker of a local cluster
        hosts = [f"127.0.0.1:{p}" for p in free_ports(run.processes)]
        peer = min(ctx.timeouts[spec.device], 300)
        cmds = []
        for i in range(run.processes):
            extra = {}
            if run.visible_devices:
                extra["CUDA_VISIBLE_DEVICES"] = run.visible_devices[i]
            argv = commands.trainer_argv(
                ctx.python, model_dir,
                pairs + commands.worker_overrides(hosts, i, peer))
            cmds.append(Command(argv, commands.child_env(ctx.env, extra),
                                log.format(f"worker{i}")))
        return cmds
    argv = commands.trainer_argv(ctx.python, model_dir, pairs)
    return [Command(argv, commands.child_env(ctx.env), log.format("train"))]


def _last_progress(group: ProcessGroup) -> str:
    """The latest interval or progress line, from its marker on."""
    for line in reversed(group.tail_lines()):
        stage = stage_line.parse_line(line)
        if stage is not None:
            return stage_line.console_text(stage)[:70]
        for mark in ("official_bench: step", THROUGHPUT_MARK):
            if mark in line:
                return line[line.index(mark):].strip()[:70]
    return "starting (no training step logged yet)"


def _wait(group: ProcessGroup, timeout: float, name: str,
          progress: Callable[[str], None]) -> List[Outcome]:
    """Waits with a heartbeat line every HEARTBEAT_SECONDS (long checks)."""
    start = time.monotonic()
    while group.running():
        elapsed = time.monotonic() - start
        if elapsed >= timeout:
            break
        slice_ = min(HEARTBEAT_SECONDS, timeout - elapsed)
        end = time.monotonic() + slice_
        while group.running() and time.monotonic() < end:
            time.sleep(0.2)
        if group.running() and time.monotonic() - start < timeout:
            progress(f"    {name}: {time.monotonic() - start:.0f} s, "
                     f"{_last_progress(group)}")
    return group.wait(max(timeout - (time.monotonic() - start), 0.01))


def _exit_findings(outcomes: List[Outcome], timed_out: bool, timeout: float,
                   names: List[str]) -> List[Finding]:
    if timed_out:
        return [Finding(False, f"timeout: not finished within {timeout:g} s "
                               "(killed)",
                        fix="if the machine is just slow, raise --timeout; "
                            "otherwise the log shows where it hung")]
    bad = []
    for name, o in zip(names, outcomes):
        if o.returncode != 0:
            lines = [l for l in o.tail.splitlines() if l.strip()]
            last = lines[-1].strip()[-200:] if lines else "no output"
            bad.append(Finding(False, f"{name} exit {o.returncode}: {last}"))
    return bad


def run_check(spec: CheckSpec, ctx: RunContext,
              earlier: Dict[str, CheckResult],
              specs: Dict[str, CheckSpec]) -> CheckResult:
    """Runs `spec` (its baseline first when that did not run yet)."""
    if spec.skip:
        return CheckResult(spec.name, spec.kind, spec.device, SKIP, spec.skip)
    if spec.baseline and spec.baseline not in earlier and \
            spec.baseline in specs:
        ctx.progress(f"    {spec.name}: running its baseline "
                     f"{spec.baseline} first")
        earlier[spec.baseline] = run_check(specs[spec.baseline], ctx,
                                           earlier, specs)
    start = time.monotonic()
    model_dir = _run_dir(ctx, spec.name)
    cmds = _commands(spec, ctx, model_dir)
    timeout = ctx.timeouts[spec.device]
    group = ProcessGroup(cmds, ctx.repo).start()
    gpu_sampler = thread_sampler = None
    if spec.device == "gpu" and ctx.gpu_reader is not None:
        gpu_sampler = PeriodicSampler(ctx.gpu_reader, ctx.sample_period)
        gpu_sampler.start()
    if spec.kind == "multi_worker":
        thread_sampler = PeriodicSampler(threads.reader(group.pids),
                                         ctx.sample_period).start()
    try:
        outcomes = _wait(group, timeout, spec.name, ctx.progress)
    except BaseException:  # Ctrl-C: the trainers have their own sessions
        group.kill()
        raise
    finally:
        for s in (gpu_sampler, thread_sampler):
            if s is not None:
                s.stop()
    # Samples count from the end of warm-up to the first process's exit.
    ends = [o.end_time for o in outcomes if o.end_time]
    window = (group.warm_time, min(ends) if ends else None)
    names = [os.path.splitext(os.path.basename(c.log_path))[0] for c in cmds]
    findings = _exit_findings(outcomes, group.timed_out, timeout, names)
    data: Dict = {"model_dir": model_dir,
                  "logs": [c.log_path for c in cmds],
                  "returncodes": [o.returncode for o in outcomes],
                  "command": cmds[0].argv}
    if not findings:
        findings = _judge(spec, model_dir, ctx, earlier, data)
    if spec.device == "gpu":
        findings.append(_busy(spec, gpu_sampler, window, ctx, data))
    if thread_sampler is not None and not group.timed_out:
        samples = thread_sampler.between(*window)
        data["threads"] = {f"worker{i}": [s[pid] for s in samples
                                          if pid in s]
                           for i, pid in enumerate(group.pids)}
        findings.append(threads.stable(samples, group.pids))
    ok = verdicts.all_ok(findings)
    fix = None
    if not ok:
        fix = "; ".join(verdicts.fixes(findings) +
                        [f"logs: {', '.join(data['logs'])}"])
    return CheckResult(
        spec.name, spec.kind, spec.device, PASS if ok else FAIL,
        verdicts.describe(findings), fix=fix, data=data,
        seconds=round(time.monotonic() - start, 1))


def _busy(spec: CheckSpec, sampler: Optional[PeriodicSampler], window,
          ctx: RunContext, data: Dict) -> Finding:
    if sampler is None:
        return Finding(False, f"GPU busy unknown: {ctx.gpu_reader_desc}")
    samples = sampler.between(*window)
    data["gpu_utilisation"] = [[g._asdict() for g in s] for s in samples]
    if sampler.error:
        data["gpu_sampler_error"] = sampler.error
    used = spec.expected_replicas or 1
    return gpu_util.busy(samples, used)


def _judge(spec: CheckSpec, model_dir: str, ctx: RunContext,
           earlier: Dict[str, CheckResult], data: Dict) -> List[Finding]:
    """Verdicts from the result.json file(s) of a finished run."""
    run = spec.run
    traits = strategies.traits(run.strategy)
    chief = _read_json(os.path.join(model_dir, "result.json"))
    if chief is None:
        return [Finding(False, f"no readable result.json in {model_dir}")]
    stats, env = chief.get("stats"), chief.get("environment") or {}
    ips = verdicts.throughput(stats)
    data["examples_per_second"] = ips
    data["environment"] = env
    findings = [verdicts.finite_loss(chief.get("history"))]
    if ips is not None:
        findings.append(Finding(True, f"{ips:.1f} img/s"))
    findings.append(verdicts.precision(env, dtypes.tf_name(run.dtype)))
    if ctx.backend != "tensorflow":  # TensorFlow's rows read as before
        findings.append(verdicts.backend(env, ctx.backend))
    kind = "GPU" if spec.device == "gpu" else "CPU"
    if traits.one_process_per_gpu:  # the ranks are the replicas
        size = (env.get("horovod") or {}).get("size")
        findings.append(Finding(size == run.processes,
                                f"horovod size {size}, expected "
                                f"{run.processes}"
                                if size != run.processes else
                                f"horovod size {size}"))
        return findings
    findings.append(verdicts.replicas(stats, spec.expected_replicas))
    per_worker = run.num_gpus if run.num_gpus else run.cpu_devices
    findings.append(verdicts.devices(env, kind, per_worker))
    if traits.peer_workers:  # every worker wrote its own result
        others = [_read_json(os.path.join(model_dir, result_file_name(
            f"worker{i}", False))) for i in range(1, run.processes)]
        if any(o is None for o in others):
            findings.append(Finding(False, "a worker wrote no result file"))
        else:
            for i, other in enumerate(others, 1):
                d = verdicts.devices(other.get("environment"), kind,
                                     per_worker)
                findings.append(d._replace(text=f"worker{i} {d.text}"))
            findings.append(verdicts.same_losses(
                [chief.get("history")] + [o.get("history") for o in others]))
    if spec.baseline:
        base = earlier.get(spec.baseline)
        base_ips = base.data.get("examples_per_second") if base else None
        scale = verdicts.scaling(base_ips, ips, spec.expected_replicas)
        if spec.device == "cpu":
            # Logical CPU devices share the same cores: reported, not judged.
            text = scale.text.split(" (must be")[0]
            scale = Finding(True, f"{text} (not judged: logical CPU "
                                  "devices share the cores)")
        findings.append(scale)
    return findings
