"""CLI:
python -m official_bench.launch {single,two,multi} [BATCH] [DTYPE] [TEST_NUM].

See `--help` (settings.py lists every knob) and the package docstring.

Only standard-library modules are imported before the launcher knows its
own Python can import the rest (plan needs PyYAML through config): a fresh
clone's python3 then gets one clear line instead of a traceback, and on a
two/multi-node run that node still tells node 0 through the barrier.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import uuid
from typing import Optional, Sequence

from official_bench.contracts import exit_status as es, log_tree
from official_bench.host.write_errors import NotWritable
from official_bench.launch import (
    auth,
    barrier as barrier_lib,
    nodes as nodes_lib,
    preflight,
    resume,
    settings as settings_lib,
)
from official_bench.launch.barrier import BarrierError
from official_bench.launch.claims import ClaimError, Claims, claim_name
from official_bench.launch.node_list import Node, NodeError


def describe(plan) -> None:
    from official_bench.launch.sweep_report import say
    s = plan.settings
    out = lambda m: say(plan, m)  # noqa: E731
    cases = list(dict.fromkeys(r.case for r in plan.runs))
    out(f"{s.script}: bz{plan.batch} {plan.dtype}, {s.test_num} run(s) of "
        f"each of {', '.join(cases)}")
    dev = plan.devices
    out(f"devices: {dev.kind}" + (f", {dev.available} GPU(s) visible"
                                  if dev.kind == "gpu" else "")
        + f" ({dev.how}); config {plan.config_file}")
    if s.bench == "allreduce":
        out("BENCH=allreduce: each run is python -m official_bench."
            "allreduce.bench (same config, devices, nodes and strategy), "
            "logged as allreduce_{dtype}_{i}.log")
    out(f"trainer python: {plan.python.described}"
        + ("" if s.python_check_timeout else " (not checked: "
           "PYTHON_CHECK_TIMEOUT=0)"))
    if plan.nodeset is not None:
        ns = plan.nodeset
        out(f"nodes: {ns.worker_hosts} (from {ns.nodes_from})")
        out(f"this node: index {ns.index} = {ns.me.address} ({ns.index_from})")
    hvd = plan.horovod
    if hvd is not None:
        out(f"launcher: horovod, {hvd.horovodrun} ({hvd.venv_from}); ranks "
            f"run {hvd.python}")
        out(f"horovodrun hosts: {', '.join(hvd.hosts)}"
            + (" (ports of the node list are not used; ranks on the other "
               "nodes are started over ssh)" if plan.nodeset else "")
            + f"; one process per {'GPU' if dev.kind == 'gpu' else 'slot'}"
            f", runtime.num_gpus={1 if dev.kind == 'gpu' else 0} each")
    elif plan.cluster is not None:
        w, k = plan.workers_per_node, plan.index
        run = plan.runs[0]
        out(f"workers: {w} per node, one per "
            f"{'GPU' if dev.kind == 'gpu' else 'CPU device'} "
            f"(runtime.num_gpus={1 if dev.kind == 'gpu' else 0} each), "
            f"multi_worker_mirrored over {len(plan.cluster)} tasks: "
            f"{','.join(plan.cluster)}")
        out(f"this node's workers: tasks {k * w}..{k * w + w - 1} on "
            + ", ".join(x.address for x in run.workers)
            + ("; CUDA_VISIBLE_DEVICES " + ", ".join(
                x.env["CUDA_VISIBLE_DEVICES"] for x in run.workers)
               if dev.kind == "gpu" else ""))
    elif plan.nodeset is not None:
        ns = plan.nodeset
        out(f"TF_CONFIG for the trainer: {ns.tf_config_json()}"
            + (" (from the environment)" if ns.tf_config else
               " (passed as runtime.worker_hosts + runtime.task_index)"))
    if plan.uses_barrier:
        describe_barrier(plan, out)
    ports = open_ports(plan)
    if ports:
        who = "JAX's coordinator accepts" if plan.settings.backend == "jax" \
            else "TensorFlow's worker servers accept"
        out("ports this node opens: " + "; ".join(ports) + f" ({who} any "
            "client that reaches them: use a private network or a firewall; "
            "docs/security.md)")
    for note in plan.notes:
        out(f"note: {note}")


def describe_barrier(plan, out) -> None:
    """Where the barrier is and how it authenticates (one warning line when
    it is open)."""
    host, port = plan.barrier
    key = auth.key_for(plan.settings)
    out(f"barrier: node 0's launcher at "
        f"{Node(host, port).address}, "
        f"{plan.settings.barrier_timeout:g} s timeout, "
        + ("open (no key)" if key.open else f"authenticated (key: "
           f"{key.source})"))
    if key.open:
        out(auth.open_warning(port))


def open_ports(plan) -> list:
    """The TCP ports this node will listen on, for the user's firewall."""
    ports = []
    if plan.uses_barrier and plan.index == 0:
        ports.append(f"barrier {plan.barrier[1]} on "
                     f"{', '.join(plan.barrier_bind or ['?'])}")
    run = plan.runs[0] if plan.runs else None
    workers = [w.address for w in run.workers if w.address] if run else []
    if not workers and plan.nodeset is not None and plan.horovod is None:
        workers = [plan.nodeset.me.address]
    if workers and plan.settings.backend == "jax":
        # Only worker 0 listens: jax.distributed's coordination service.
        if plan.index == 0:
            ports.append(f"jax.distributed coordinator (gRPC, every "
                         f"interface) {workers[0]}")
    elif workers:
        # TensorFlow's gRPC server listens on every interface (`ss -ltn`
        # shows *:port), whatever host the node list names.
        ports.append(f"TensorFlow worker (gRPC, every interface) "
                     f"{', '.join(workers)}")
    return ports


def print_dry_run(plan) -> None:
    from official_bench.launch.sweep_report import say
    s = plan.settings
    timeout = shutil.which("timeout")
    prefix = [timeout or "timeout", "-k", f"{s.kill_after:g}s",
              f"{s.run_timeout:g}s"]
    for run in plan.runs:
        say(plan, f"{run.name}:")
        for w in run.workers:
            indent = "  "
            if run.many:
                print(f"  {w.label}, {w.address}:")
                indent = "    "
            print(f"{indent}log:       {w.log_path}")
            print(f"{indent}result:    {w.model_dir}/{w.result_name} -> "
                  f"{w.json_path}")
            print(f"{indent}model_dir: {w.model_dir} (fresh)")
            if w.env:
                print(f"{indent}env:       " + " ".join(
                    f"{k}={shlex.quote(v)}" for k, v in sorted(w.env.items())))
            print(f"{indent}command:   {shlex.join(prefix + w.command)}")
    say(plan, "dry run: nothing was started")


def main(argv: Optional[Sequence[str]] = None, environ=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        settings = settings_lib.parse(argv, environ)
    except settings_lib.SettingsError as e:
        print(f"error: {e}", file=sys.stderr)
        return es.CONFIG
    try:
        from official_bench.config import ConfigError
        from official_bench.launch import plan as plan_lib
        from official_bench.launch.runner import Interrupted
        from official_bench.launch.sweep_report import say
    except ImportError as e:
        return launcher_cannot_run(settings, e)
    stamp = log_tree.session_stamp()
    try:
        plan = plan_lib.make_plan(settings, stamp)
    except NodeError as e:
        print(f"error: {settings.script}: {e}", file=sys.stderr)
        return es.CLUSTER
    except (plan_lib.PlanError, ConfigError) as e:
        print(f"error: {settings.script}: {e}", file=sys.stderr)
        return es.CONFIG
    unresolved = plan.nodeset.unresolved if plan.nodeset else []
    if unresolved and not settings.dry_run:
        print(f"error: {settings.script}: {unresolved[0]}", file=sys.stderr)
        return es.CLUSTER
    for problem in unresolved:
        plan.notes.append(f"{problem}; a real run stops here (exit 3)")
    cannot_run = None
    if not settings.dry_run and not (plan.horovod and plan.horovod.idle):
        # DATA_DIR's problem first: it needs no interpreter check to say.
        cannot_run = plan.data_problem or check_trainer_python(plan)
        if cannot_run and not plan.uses_barrier:
            print(f"error: {settings.script}: {cannot_run}", file=sys.stderr)
            return es.CONFIG
    describe(plan)
    if plan.horovod is not None and plan.horovod.idle:
        say(plan, f"LAUNCHER=horovod: nothing to run on node {plan.index}: "
            f"horovodrun on node 0 ({plan.horovod.hosts[0]}) starts the "
            "ranks of every node over ssh (starting the script on node 0 "
            "alone is enough)")
        return es.OK
    if settings.dry_run:
        print_dry_run(plan)
        return es.OK

    def on_signal(signum, frame):
        raise Interrupted(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    claims = Claims(settings.script, f"{os.getpid()}-{uuid.uuid4().hex}")
    try:
        return run_with_claims(plan, stamp, cannot_run, claims)
    except NotWritable as e:
        say(plan, f"error: {e}", stream=sys.stderr)
        return es.NOT_WRITABLE
    except Interrupted as e:
        say(plan, f"interrupted by {e}; no run started", stream=sys.stderr)
        return es.by_signal(e.signum)
    finally:
        claims.release()


def claim_logs(plan, claims: Claims) -> tuple:
    """(problem or None, this node's survey): claims every case directory
    this node writes, then lists the planned runs already there."""
    bench = plan_bench_name(plan)
    name = claim_name(plan.batch, plan.dtype, bench)
    try:
        for folder in sorted({os.path.dirname(r.log_path)
                              for r in plan.runs}):
            claims.take(folder, name)
    except ClaimError as e:
        return str(e), {}
    for note in claims.notes:
        say_plan(plan, f"note: {note}")
    return None, resume.survey(plan.runs)


def plan_bench_name(plan) -> str:
    from official_bench.launch.plan import Bench
    return Bench.of(plan.settings).name


def say_plan(plan, message: str, stream=None) -> None:
    from official_bench.launch.sweep_report import say
    say(plan, message, stream=stream)


def settle_logs(plan, runner, surveys: dict, stamp: str) -> tuple:
    """RESUME / OVERWRITE / refuse, the same way on every node (see
    resume.py): RESUME moves old files aside now, OVERWRITE stages the new
    runs. (The refusal line or None, the runs OVERWRITE replaces.)"""
    s = plan.settings
    decision = resume.decide(s.resume, s.overwrite,
                             [r.name for r in plan.runs], surveys,
                             plan.index, plan.log_root)
    if decision.problem:
        return decision.problem, []
    if decision.replace and s.overwrite:
        folders = resume.stage(plan.runs, stamp)
        say_plan(plan, f"OVERWRITE=1: this sweep writes into "
                 f"{', '.join(folders)}; once every run is ok the files of "
                 f"{', '.join(decision.replace)} move aside into "
                 f"{resume.REPLACED_PREFIX}{stamp}/ and the new ones take "
                 "their place (until then the extractor reads the old runs)")
    elif decision.replace:
        folders = resume.move_aside(plan.runs, decision.replace, stamp)
        say_plan(plan, f"RESUME=1: moved the files of "
                 f"{', '.join(decision.replace)} aside into "
                 + ", ".join(folders))
    if decision.reuse:
        say_plan(plan, f"RESUME=1: keeping {', '.join(decision.reuse)} "
                 "(status ok); running the others")
    runner.reused = set(decision.reuse)
    return None, decision.replace if s.overwrite else []


def end_overwrite(plan, replaced: list, ok: bool, stamp: str) -> None:
    """OVERWRITE=1's end (resume.py): a sweep that ended ok replaces the
    old runs; any other end leaves them where the extractor reads them."""
    if not ok:
        folders = sorted({os.path.dirname(w.log_path) for r in plan.runs
                          for w in r.workers})
        say_plan(plan, "OVERWRITE=1: the sweep did not end ok, so the old "
                 f"runs ({', '.join(replaced)}) stay where the extractor "
                 f"reads them; this sweep's files are in "
                 f"{', '.join(folders)}", stream=sys.stderr)
        return
    folders = resume.swap_in(plan.runs, replaced, stamp)
    say_plan(plan, f"OVERWRITE=1: every run ok: moved the files of "
             f"{', '.join(replaced)} aside into {', '.join(folders)}; the "
             "new runs are in their place")


def run_with_claims(plan, stamp: str, cannot_run: Optional[str],
                    claims: Claims) -> int:
    """Claims the log tree, meets the other nodes, settles old runs,
    runs the sweep."""
    from official_bench.launch import runner as runner_lib
    from official_bench.launch.runner import Interrupted
    from official_bench.launch.sweep_report import node_name, say
    logs_problem, survey = claim_logs(plan, claims)
    if logs_problem and not plan.uses_barrier:
        say(plan, f"error: {logs_problem}", stream=sys.stderr)
        return es.LOGS_IN_USE
    runner = runner_lib.Runner(plan, stamp)
    try:
        surveys = {plan.index: survey}
        if plan.uses_barrier:
            if cannot_run:
                say(plan, f"error: this node: {cannot_run}; telling the "
                    "other nodes", stream=sys.stderr)
            if logs_problem:
                say(plan, f"error: this node: {logs_problem}; telling the "
                    "other nodes", stream=sys.stderr)
            hello = runner.setup_barrier({"cannot_run": cannot_run,
                                          "logs_problem": logs_problem,
                                          "existing": survey})
            say(plan, "barrier: all nodes arrived: " + ", ".join(
                f"node {k} on {v.get('host')} (pid {v.get('pid')})"
                for k, v in sorted(hello.items())))
            broken = {k: v["cannot_run"] for k, v in sorted(hello.items())
                      if v.get("cannot_run")}
            for k, text in broken.items():
                who = "this node" if k == plan.index else \
                    node_name(plan, k)
                say(plan, f"error: {who} cannot start the trainer: {text}",
                    stream=sys.stderr)
            if broken:
                say(plan, "no run started (on any node): "
                    f"{len(broken)} node(s) cannot start the trainer",
                    stream=sys.stderr)
                return es.CONFIG
            in_use = {k: v["logs_problem"] for k, v in sorted(hello.items())
                      if v.get("logs_problem")}
            for k, text in in_use.items():
                if k != plan.index:  # this node's was said before hello
                    say(plan, f"error: {node_name(plan, k)}: {text}",
                        stream=sys.stderr)
            if in_use:
                say(plan, "no run started (on any node): the log tree of "
                    f"{len(in_use)} node(s) is in use", stream=sys.stderr)
                return es.LOGS_IN_USE
            head_stamp = (hello.get(0) or {}).get("stamp")
            if head_stamp and head_stamp != stamp:
                plan.restamp(head_stamp)
            surveys = {k: v.get("existing") or {} for k, v in hello.items()}
        refused, replaced = settle_logs(plan, runner, surveys, stamp)
        if refused:
            say(plan, f"error: {refused}", stream=sys.stderr)
            return es.LOGS_IN_USE
        ended: list = []
        if replaced:
            runner.on_end = lambda ok: ended.append(ok) or end_overwrite(
                plan, replaced, ok, stamp)
        try:
            return runner.run_all()
        finally:
            if replaced and not ended:  # stopped: a signal, a lost node
                end_overwrite(plan, replaced, False, stamp)
    except BarrierError as e:
        say(plan, f"error: {e}", stream=sys.stderr)
        if runner.report.results:
            runner.summary()
        return es.BARRIER_TIMEOUT if e.missing else es.CLUSTER
    except Interrupted as e:
        say(plan, f"interrupted by {e}; trainer stopped", stream=sys.stderr)
        return es.by_signal(e.signum)
    finally:
        runner.close()


def check_trainer_python(plan) -> Optional[str]:
    """The one-line problem with the trainer's Python, or None (also when
    PYTHON_CHECK_TIMEOUT=0). Checked with the environment of run 1."""
    s = plan.settings
    if not s.python_check_timeout:
        return None
    env = dict(s.environ)
    env.update(plan.runs[0].env)
    problem = preflight.check(plan.python.python, env,
                              s.python_check_timeout, plan.check_modules)
    if problem is None:
        return None
    return preflight.cannot_run_text(
        plan.python.described, problem,
        preflight.fix_advice(plan.python.chosen_by, preflight.REPO_ROOT,
                             s.backend))


def launcher_cannot_run(settings: settings_lib.Settings,
                        error: ImportError) -> int:
    """The launcher's own Python lacks the trainer's packages (PyYAML at
    least): one line, exit 2; on a two/multi-node run also tell node 0
    through the barrier (when the node list does not need the config)."""
    missing = preflight.missing_here(list(preflight.TRAINER_MODULES))
    problem = preflight.launcher_problem(missing) if missing else \
        f"cannot import the launcher ({error})"
    python = settings.launch_python or sys.executable or "python3"
    how = settings.launch_python_from or "launcher"
    text = preflight.cannot_run_text(
        preflight.describe_choice(how, python, preflight.REPO_ROOT), problem,
        preflight.fix_advice(how, preflight.REPO_ROOT), role="launcher")
    if settings.mode == "single" or settings.launcher != "tf" or \
            settings.dry_run:
        print(f"error: {settings.script}: {text}", file=sys.stderr)
        return es.CONFIG
    try:
        nodeset = nodes_lib.resolve(
            settings, None, "the config file (not read: this launcher "
            "cannot import PyYAML)", None)
        host, port = nodes_lib.barrier_address(
            nodeset, settings.barrier_port, settings.workers_per_node)
    except (NodeError, ValueError) as e:
        print(f"error: {settings.script}: {text} (and the other nodes "
              f"cannot be told: {e})", file=sys.stderr)
        return es.CONFIG
    prefix = f"[launch node {nodeset.index}/{len(nodeset.nodes)}]"
    print(f"{prefix} error: this node: {text}; telling the other nodes",
          file=sys.stderr, flush=True)
    head = f"node 0 ({nodeset.nodes[0].address})"
    client = barrier_lib.Client(host, port, nodeset.index, uuid.uuid4().hex,
                                None, coordinator_name=head,
                                key=auth.key_for(settings))
    try:
        client.meet("hello", {"host": os.uname().nodename,
                              "pid": os.getpid(), "cannot_run": text},
                    settings.barrier_timeout)
        print(f"{prefix} {head} was told; no run started", flush=True)
    except BarrierError as e:
        print(f"{prefix} error: {e}", file=sys.stderr)
    return es.CONFIG


if __name__ == "__main__":
    sys.exit(main())
