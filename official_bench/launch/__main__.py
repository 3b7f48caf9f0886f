"""CLI: python -m official_bench.launch {single,two,multi} [BATCH] [DTYPE] [TEST_NUM].

See `--help` (settings.py lists every knob) and the package docstring.
"""

from __future__ import annotations

import shlex
import shutil
import signal
import sys
import time
from typing import Optional, Sequence

from official_bench.config import ConfigError
from official_bench.launch import plan as plan_lib
from official_bench.launch import runner as runner_lib
from official_bench.launch import settings as settings_lib
from official_bench.launch.barrier import BarrierError
from official_bench.launch.nodes import NodeError
from official_bench.launch.runner import (EXIT_CLUSTER, EXIT_PEER,
                                          EXIT_USAGE, Interrupted, say)


def describe(plan: plan_lib.Plan) -> None:
    s = plan.settings
    out = lambda m: say(plan, m)  # noqa: E731
    cases = list(dict.fromkeys(r.case for r in plan.runs))
    out(f"{s.script}: bz{plan.batch} {plan.dtype}, {s.test_num} run(s) of "
        f"each of {', '.join(cases)}")
    dev = plan.devices
    out(f"devices: {dev.kind}" + (f", {dev.available} GPU(s) visible"
                                  if dev.kind == "gpu" else "")
        + f" ({dev.how}); config {plan.config_file}")
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
    elif plan.nodeset is not None:
        ns = plan.nodeset
        out(f"TF_CONFIG for the trainer: {ns.tf_config_json()}"
            + (" (from the environment)" if ns.tf_config else
               " (passed as runtime.worker_hosts + runtime.task_index)"))
        host, port = plan.barrier
        out(f"barrier: node 0's launcher at {host}:{port}, "
            f"{s.barrier_timeout:g} s timeout")
    for note in plan.notes:
        out(f"note: {note}")


def print_dry_run(plan: plan_lib.Plan) -> None:
    s = plan.settings
    timeout = shutil.which("timeout")
    prefix = [timeout or "timeout", "-k", f"{s.kill_after:g}s",
              f"{s.run_timeout:g}s"]
    for run in plan.runs:
        say(plan, f"{run.name}:")
        print(f"  log:       {run.log_path}")
        print(f"  result:    {run.model_dir}/{run.result_name} -> "
              f"{run.json_path}")
        print(f"  model_dir: {run.model_dir} (fresh)")
        if run.env:
            print("  env:       " + " ".join(f"{k}={shlex.quote(v)}"
                                            for k, v in sorted(run.env.items())))
        print(f"  command:   {shlex.join(prefix + run.command)}")
    say(plan, "dry run: nothing was started")


def main(argv: Optional[Sequence[str]] = None, environ=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        settings = settings_lib.parse(argv, environ)
    except settings_lib.SettingsError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        plan = plan_lib.make_plan(settings, stamp)
    except NodeError as e:
        print(f"error: {settings.script}: {e}", file=sys.stderr)
        return EXIT_CLUSTER
    except (plan_lib.PlanError, ConfigError) as e:
        print(f"error: {settings.script}: {e}", file=sys.stderr)
        return EXIT_USAGE
    describe(plan)
    if plan.horovod is not None and plan.horovod.idle:
        say(plan, f"LAUNCHER=horovod: nothing to run on node {plan.index}: "
            f"horovodrun on node 0 ({plan.horovod.hosts[0]}) starts the "
            "ranks of every node over ssh (starting the script on node 0 "
            "alone is enough)")
        return 0
    if settings.dry_run:
        print_dry_run(plan)
        return 0

    def on_signal(signum, frame):
        raise Interrupted(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    runner = runner_lib.Runner(plan, stamp)
    try:
        if plan.uses_barrier:
            hello = runner.setup_barrier()
            say(plan, "barrier: all nodes arrived: " + ", ".join(
                f"node {k} on {v.get('host')} (pid {v.get('pid')})"
                for k, v in sorted(hello.items())))
            head_stamp = (hello.get(0) or {}).get("stamp")
            if head_stamp and head_stamp != stamp:
                for run in plan.runs:
                    run.model_dir = run.model_dir.replace(f".{stamp}.",
                                                          f".{head_stamp}.")
        return runner.run_all()
    except BarrierError as e:
        say(plan, f"error: {e}", stream=sys.stderr)
        if runner.results:
            runner._summary()
        return EXIT_PEER if e.missing else EXIT_CLUSTER
    except Interrupted as e:
        say(plan, f"interrupted by {e}; trainer stopped", stream=sys.stderr)
        return 128 + e.signum
    finally:
        runner.close()


if __name__ == "__main__":
    sys.exit(main())
