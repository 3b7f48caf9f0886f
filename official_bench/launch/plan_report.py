"""What the launcher prints about its plan, before anything starts.

`describe` says what the sweep will do on this node (runs, devices, the
trainer's Python, nodes and workers, the barrier and how it
authenticates, the ports this node opens, the plan's notes); a dry run
then prints each run's paths and command (`print_dry_run`) and starts
nothing. What is printed about the runs themselves is sweep_report.py's.
"""

from __future__ import annotations

import shlex
import shutil
from typing import Callable, List

from official_bench.launch import auth
from official_bench.launch.node_list import Node
from official_bench.launch.plan import Plan
from official_bench.launch.sweep_report import say


def describe(plan: Plan) -> None:
    """What the sweep will do on this node, before it starts (and in a
    dry run): runs, devices, interpreter, nodes, workers, barrier, open
    ports and the plan's notes."""
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
        who = "JAX's coordinator accepts" if plan.backend.name == "jax" \
            else "TensorFlow's worker servers accept"
        out("ports this node opens: " + "; ".join(ports) + f" ({who} any "
            "client that reaches them: use a private network or a firewall; "
            "docs/security.md)")
    for note in plan.notes:
        out(f"note: {note}")


def describe_barrier(plan: Plan, out: Callable[[str], None]) -> None:
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


def open_ports(plan: Plan) -> List[str]:
    """The TCP ports this node will listen on, for the user's firewall."""
    ports = []
    if plan.uses_barrier and plan.index == 0:
        ports.append(f"barrier {plan.barrier[1]} on "
                     + (", ".join(plan.barrier_bind) if plan.barrier_bind
                        else f"{plan.barrier[0]} (not usable here: see the "
                        "note)"))
    run = plan.runs[0] if plan.runs else None
    workers = [w.address for w in run.workers if w.address] if run else []
    if not workers and plan.nodeset is not None and plan.horovod is None:
        workers = [plan.nodeset.me.address]
    if workers and plan.backend.name == "jax":
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


def print_dry_run(plan: Plan) -> None:
    """Each run's log, result, model_dir, environment and command, as
    the launcher would start it; nothing is started."""
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
