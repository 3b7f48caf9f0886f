"""Plans of the real launcher whose trainer is a stand-in shell script
(the launcher's --python), for the tests of one run, its outcome and the
sweep (tests/unit/launch): real processes, no TensorFlow, a fraction of a
second each."""

import os
import sys

from official_bench.contracts import log_tree
from official_bench.launch import plan as plan_lib, settings as settings_lib

# What the stand-in does, by kind; it reads --model_dir from its arguments
# and writes the result files a trainer would (node 0's, node 1's).
_OK = ('mkdir -p "$md" && for f in result result_worker1; do '
       "echo '{\"ok\": 1}' > \"$md/$f.json\"; done\n"
       'echo "stand-in trainer ok"\n')
_INTERVALS = ('for e in 2 4 6; do echo "TimeHistory: 1.00 seconds, 10.0 '
              'examples/second between steps $((e-2)) and $e"; done\n')
STAND_IN = {
    "ok": _OK,
    "fail": 'echo "stand-in trainer starting"\n'
            'echo "error: stand-in trainer failed" >&2\nexit 1\n',
    # Log three TimeHistory intervals (a rate to measure), then fail or
    # end ok.
    "rate_then_fail": _INTERVALS + 'echo "error: stand-in trainer failed '
                                   'late" >&2\nexit 1\n',
    "rate_then_ok": _INTERVALS + _OK,
    # Waits for a peer that never starts, under the trainer's start-up
    # watchdog (runtime/watchdog.py, 3 s: a wait line after 1.5 s).
    "peer_wait": f"exec {sys.executable} -c 'import time; from "
                 "official_bench.runtime.watchdog import StartupWatchdog as W"
                 "\nwith W(\"worker 0\", {\"worker 1\": \"127.0.0.1:9\"}, "
                 "3.0):\n    time.sleep(30)'\n",
    "no_result": 'echo "stand-in trainer forgot its result"\n',
    # BENCH=allreduce: the all-reduce tool's record, no intervals.
    "allreduce_ok": 'mkdir -p "$md" && echo \'{"results": []}\' > '
                    '"$md/allreduce.json"\n',
    "sleep": 'echo "stand-in trainer sleeping"\nexec sleep 60\n',
    # WORKERS_PER_NODE: task 1 fails at once, the others sleep.
    "task1_fails": 'case "$*" in *\'"task_index": 1\'*) '
                   'echo "error: task 1 failed" >&2; exit 1;; esac\n'
                   "exec sleep 60\n",
    # WORKERS_PER_NODE: task 1 logs its jax.distributed join and JAX's
    # fatal line for a coordinator gone, then aborts (SIGABRT, 134), as
    # JAX's coordination client does; the others sleep.
    "task1_jax_aborts": 'case "$*" in *\'"task_index": 1\'*) '
                        'echo "official_bench: worker 1 joins 2 process(es) '
                        'at 127.0.0.1:9 (jax.distributed)"; '
                        'echo "F client.h:80] Terminating process because '
                        'the JAX distributed service detected fatal errors. '
                        'absl::Status: UNAVAILABLE: Failed to send RPC to '
                        'coordination service." >&2; kill -ABRT $$;; esac\n'
                        "exec sleep 60\n",
}


def stand_in(folder, kind):
    """A 'python' of `kind` (STAND_IN) in `folder`; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"stand_in_{kind}.sh"
    path.write_text(
        "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --model_dir=*) "
        "md=\"${a#--model_dir=}\";; esac; done\n" + STAND_IN[kind])
    path.chmod(0o755)
    return str(path)


def make_plan(tmp_path, kind="ok", test_num=1, mode="single", **knobs):
    """The launcher's plan for batch 4 fp32 on CPU, TEST_NUM runs, its
    trainer the stand-in of `kind`; `knobs` as environment variables."""
    env = {"DEVICE": "cpu", "LOG_DIR": str(tmp_path / "logs"),
           "MODEL_DIR": str(tmp_path / "model_dir"),
           "PATH": os.environ["PATH"], "SLEEP_SECONDS": "0",
           "PYTHON_CHECK_TIMEOUT": "0", "KILL_AFTER": "2"}
    env.update({k.upper(): str(v) for k, v in knobs.items()})
    settings = settings_lib.parse(
        ["4", "fp32", str(test_num), "--python", stand_in(tmp_path, kind)],
        environ=env, mode=mode)
    return plan_lib.make_plan(settings, log_tree.session_stamp(0))


def two_launchers(tmp_path, kinds):
    """Two launchers of a two-node sweep on 127.0.0.1, node k's trainer the
    stand-in kinds[k], meeting through a real barrier, each run in a thread
    here. Returns ({node: sweep exit status}, {node: its Runner})."""
    import threading

    from official_bench.launch.node_link import NodeLink
    from official_bench.launch.runner import Runner
    from support.helpers import free_ports

    w0, w1, b = free_ports(3)
    plans = [make_plan(tmp_path / f"n{k}", kind, mode="two",
                       nodes=f"127.0.0.1:{w0},127.0.0.1:{w1}",
                       task_index=k, barrier_port=b, barrier_timeout=60)
             for k, kind in enumerate(kinds)]
    results, runners = {}, {}

    def node(k):
        link = NodeLink.open(plans[k])
        try:
            link.hello(plans[k].runs[0].workers[0].model_dir_spec.stamp)
            runners[k] = Runner(plans[k], link)
            results[k] = runners[k].run_all()
        finally:
            link.close()

    threads = [threading.Thread(target=node, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results, runners


def two_node_plans(tmp_path):
    """Both nodes' plans of a two-node stand-in sweep on 127.0.0.1 (free
    worker and barrier ports), node k's tree under tmp_path/n<k>."""
    from support.helpers import free_ports
    w0, w1, b = free_ports(3)
    return [make_plan(tmp_path / f"n{k}", "sleep", mode="two",
                      nodes=f"127.0.0.1:{w0},127.0.0.1:{w1}",
                      task_index=k, barrier_port=b, barrier_timeout=60)
            for k in (0, 1)]


def session_stamp(plan):
    """The session stamp a plan's model_dirs carry (the barrier's hello)."""
    return plan.runs[0].workers[0].model_dir_spec.stamp
