"""Where a two-worker multi_worker_mirrored Keras step spends its time
beyond compute and the gradient's all-reduce (issue 14 §4).

    .venv/bin/python benchmarks/step_collectives.py
        [ROUNDS [WORKERS [NS_A=ADDR_A,NS_B=ADDR_B]]]

(the third argument runs worker k in network namespace NS_k at ADDR_k, e.g.
two namespaces joined by a tbf-limited veth pair as in the netem test)

Starts two workers on 127.0.0.1, each pinned to its own core (taskset -c k,
as tests/system/test_scaling_netem.py pins its launchers), with the netem
test's model (resnet_cifar depth 8, batch 16 per worker, 16x16 synthetic
images). Each worker sets up the trainer's own strategy, model, compile and
input (official_bench.trainer), then:

1. traces one call of Keras' train_function and counts the collective ops
   in its graph (all nested functions), by type and by where they sit;
2. ROUNDS times (default 3), side by side in the same processes: times 30
   train steps as compiled (tf_keras' distribute_reduction_method "auto",
   which is "sum" under multi-worker MirroredStrategy-like strategies), 30
   with "first" (what TF 2.3's Keras did: no cross-worker reduction of
   the step's logs), the gradient's all-reduce alone as allreduce_bench
   times it, and one 4-byte all-reduce.

Worker 0 prints the medians per round; the spread is across rounds.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

import workers as workers_lib
from keras_step import TINY as STEP_TINY, compiled_step

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 30
TINY = (f"{STEP_TINY},runtime.distribution_strategy=multi_worker_mirrored,"
        "runtime.all_reduce_alg=ring,runtime.peer_timeout_seconds=120")


def collective_ops(concrete):
    """{op type: count} over the function's graph and its library."""
    graph_def = concrete.graph.as_graph_def()
    counts, where = {}, []
    nodes = [("(top)", n) for n in graph_def.node]
    for f in graph_def.library.function:
        nodes += [(f.signature.name, n) for n in f.node_def]
    for fname, n in nodes:
        if n.op.startswith("Collective"):
            counts[n.op] = counts.get(n.op, 0) + 1
            where.append((fname[:60], n.name[:60], n.op,
                          "inputs: " + " ".join(i[:40] for i in n.input)))
    return counts, where


def worker(index: int, hosts: str, rounds: int) -> None:
    from official_bench.allreduce import bench as allreduce_bench
    model, dist, iterator = compiled_step(
        f"{TINY},runtime.worker_hosts='{hosts}',runtime.task_index={index}")
    say = print if index == 0 else (lambda *a, **k: None)

    def step_fn(reduction):
        model.distribute_reduction_method = reduction
        model.train_function = None
        return model.make_train_function(force=True)

    for reduction in ("auto", "first"):
        fn = step_fn(reduction)
        counts, where = collective_ops(fn.get_concrete_function(iterator))
        say(f"train_function, distribute_reduction_method={reduction!r}: "
            f"collective ops {counts}", flush=True)
        for w in where:
            say("    ", *w, flush=True)

    def time_steps(reduction):
        fn = step_fn(reduction)
        for _ in range(5):
            logs = fn(iterator)
        float(logs["loss"])
        times = []
        for _ in range(STEPS):
            start = time.perf_counter()
            logs = fn(iterator)
            float(logs["loss"])  # waits for the step, as a callback would
            times.append(time.perf_counter() - start)
        say(f"    logs with {reduction!r}: " + ", ".join(
            f"{k} {float(v):.4f}" for k, v in logs.items()), flush=True)
        return statistics.median(times)

    grads = [int(w.shape.num_elements()) for w in model.trainable_weights]
    for r in range(rounds):
        row = {
            "step auto(sum)": time_steps("auto"),
            "step first": time_steps("first"),
            "gradient all-reduce": allreduce_bench.measure(
                dist, grads, "float32", 20, 3).seconds,
            "4-byte x8 chained, per all-reduce": allreduce_bench.measure(
                dist, 4, "float32", 20, 3, chain=8).seconds,
        }
        say(f"round {r + 1}: " + ", ".join(
            f"{k} {v * 1e3:.1f} ms" for k, v in row.items()) +
            "; auto - first %.1f ms" % (
                (row["step auto(sum)"] - row["step first"]) * 1e3),
            flush=True)


def main(argv) -> int:
    if argv and argv[0] == "--worker":
        worker(int(argv[1]), argv[2], int(argv[3]))
        return 0
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        rounds = int(argv[0]) if argv else 3
        workers = int(argv[1]) if len(argv) > 1 else 2
    except ValueError:
        print(f"error: ROUNDS and WORKERS are integers, got {argv[:2]}; "
              "see --help", file=sys.stderr)
        return 2
    try:
        hosts, prefix = workers_lib.placement(
            workers, argv[2] if len(argv) > 2 else "")
    except ValueError as e:
        print(f"error: {e}; see --help", file=sys.stderr)
        return 2
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    procs = [subprocess.Popen(
        prefix[i] + [sys.executable, os.path.abspath(__file__), "--worker",
                     str(i), hosts, str(rounds)], cwd=REPO, env=env,
        stdout=None if i == 0 else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL) for i in range(workers)]
    return max(workers_lib.wait_all(procs, timeout=1200))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
