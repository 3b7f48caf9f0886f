"""Where a multi-worker step's time goes, from a profile of each worker
(issue 14 §4).

    .venv/bin/python benchmarks/step_anatomy.py [--workers 2] [--steps 15] \\
        [--netns NS_A=ADDR_A,NS_B=ADDR_B] [--out DIR]

Starts the workers (127.0.0.1, or one per network namespace, e.g. two
joined by a tbf-limited veth pair as in tests/system/test_scaling_netem.py),
each pinned to its own core, with the netem test's model under
multi_worker_mirrored (benchmarks/keras_step.py: the trainer's own set-up).
Each warms up 10 steps, then records a TensorFlow profile of --steps steps
(each waited for) to DIR/w<k>, and prints, per step from its trace (medians
and every step):
- compute: from the step's start to the gradient's all-reduce (forward,
  backward, metric updates; on one worker: the whole step);
- gradient all-reduce: the SGD's CollectiveReduceV2 (waiting for the
  slower worker included);
- small collectives: the step's other collectives (metric results), from
  the first one's start to the last one's end;
- rest: after the last collective.
With one worker the step has no collective: all of it is compute.
The profiler adds per-op overhead, so compare with a profiled 1-worker run
(--workers 1), not with an unprofiled one.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import sys
import time

import workers as workers_lib
from keras_step import TINY, compiled_step

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MWMS = (f"{TINY},runtime.distribution_strategy=multi_worker_mirrored,"
        "runtime.all_reduce_alg=ring,runtime.peer_timeout_seconds=120")
GRADIENT = "SGD/"  # the optimizer's name scope holds the gradient's all-reduce


def profile(index: int, hosts: str, steps: int, logdir: str) -> None:
    """One worker: warm up, then profile `steps` steps into `logdir`."""
    import tensorflow as tf
    model, _, iterator = compiled_step(
        f"{MWMS},runtime.worker_hosts='{hosts}',runtime.task_index={index}")
    fn = model.make_train_function()
    for _ in range(10):
        float(fn(iterator)["loss"])
    tf.profiler.experimental.start(logdir)
    for _ in range(steps):
        float(fn(iterator)["loss"])
    tf.profiler.experimental.stop()


def _events(logdir: str):
    """(start ms, duration ms, name) of every host event, sorted."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    paths = glob.glob(os.path.join(logdir, "plugins", "profile", "*",
                                   "*.xplane.pb"))
    if not paths:
        raise FileNotFoundError(f"no *.xplane.pb under {logdir}")
    space = xplane_pb2.XSpace()
    with open(paths[0], "rb") as f:
        space.ParseFromString(f.read())
    events = []
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            for e in line.events:
                start = (line.timestamp_ns + e.offset_ps / 1e3) / 1e6
                events.append((start, e.duration_ps / 1e9,
                               names.get(e.metadata_id, "?")))
    return sorted(events)


def anatomy(logdir: str):
    """Per profiled step: {part: ms} (see the module doc)."""
    events = _events(logdir)
    rows = []
    for start, length, name in events:
        if name != "train_function":
            continue
        end = start + length
        coll = [(s, d, n) for s, d, n in events
                if start <= s <= end and n.endswith(":CollectiveReduceV2")]
        grad = [c for c in coll if c[2].startswith(GRADIENT)]
        small = [c for c in coll if not c[2].startswith(GRADIENT)]
        if not grad:
            rows.append({"step": length, "compute": length})
            continue
        g_start, g_len, _ = grad[0]
        last = max(s + d for s, d, _ in coll)
        rows.append({
            "step": length, "compute": g_start - start,
            "gradient all-reduce": g_len,
            "small collectives": last - small[0][0] if small else 0.0,
            "small count": float(len(small)),
            "rest": end - last})
    return rows


def report(name: str, rows) -> None:
    print(f"{name}: {len(rows)} profiled steps", flush=True)
    for part in rows[0]:
        values = [r[part] for r in rows]
        unit = "" if part == "small count" else " ms"
        print(f"  {part:20s} median {statistics.median(values):7.2f}{unit}"
              f"  [{', '.join(f'{v:.1f}' for v in values)}]", flush=True)


def main(argv) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--workers", type=int, default=2,
                        help="worker processes, each pinned to a core "
                        "(default 2)")
    parser.add_argument("--steps", type=int, default=15,
                        help="profiled steps per worker, after 10 untimed\n"
                        "ones (default 15)")
    parser.add_argument("--netns", default="",
                        help="NS_A=ADDR_A,NS_B=ADDR_B: worker k runs in\n"
                        "namespace NS_k at ADDR_k (default: all on "
                        "127.0.0.1)")
    parser.add_argument("--out", default="",
                        help="profile directory (default: a new temporary "
                        "one)")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--hosts", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        profile(args.worker, args.hosts, args.steps,
                os.path.join(args.out, f"w{args.worker}"))
        return 0
    if args.workers < 1 or args.steps < 1:
        parser.error(f"--workers and --steps must be >= 1, got "
                     f"{args.workers} and {args.steps}")
    out = args.out or os.path.join("/tmp", f"step_anatomy_{int(time.time())}")
    try:
        hosts, prefix = workers_lib.placement(args.workers, args.netns)
    except ValueError as e:
        parser.error(f"--netns: {e}")
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    procs = [subprocess.Popen(
        prefix[i] + [sys.executable, os.path.abspath(__file__), "--worker",
                     str(i), "--hosts", hosts, "--steps", str(args.steps),
                     "--out", out], cwd=REPO, env=env,
        stderr=subprocess.DEVNULL) for i in range(args.workers)]
    codes = workers_lib.wait_all(procs, timeout=1200)
    if any(codes):
        print(f"error: a worker failed: exit {codes}", file=sys.stderr)
        return 1
    for i in range(args.workers):
        report(f"worker {i} ({os.path.join(out, f'w{i}')})",
               anatomy(os.path.join(out, f"w{i}")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
