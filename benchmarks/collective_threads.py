"""Thread count of two loopback multi_worker_mirrored workers over 650 steps,
with and without runtime.collective_timeout_seconds.

    .venv/bin/python benchmarks/collective_threads.py off 300

Each argument is one run: "off" (the default config) or a timeout in
seconds. Prints worker 0's thread count (/proc/<pid>/status) at every
TimeHistory line (every 50 steps), sampled while the worker is inside fit.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import workers as workers_lib

from official_bench.contracts.hostport import free_ports
from official_bench.contracts.trainer_command import trainer_argv

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS, LOG_STEPS = 650, 50
TINY = ("runtime.num_gpus=0,model.name=resnet_cifar,"
        "model.model_params.depth=8,train_dataset.builder=synthetic,"
        "train_dataset.image_size=16,train_dataset.num_classes=10,"
        "train_dataset.batch_size=4,evaluation.skip_eval=true,"
        "runtime.distribution_strategy=multi_worker_mirrored,"
        "runtime.all_reduce_alg=ring,runtime.peer_timeout_seconds=120,"
        f"train.steps={STEPS},train.time_history.log_steps={LOG_STEPS}")
LINE = re.compile(r"examples/second between steps \d+ and (\d+)")


def threads_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith("Threads:")).split()[1])


def sample(proc, counts):
    """Reads the worker's log; samples its threads at each interval end."""
    for line in proc.stdout:
        m = LINE.search(line)
        if m:
            try:
                counts[int(m.group(1))] = threads_of(proc.pid)
            except OSError:
                pass


def one_run(timeout: str) -> None:
    p0, p1 = free_ports(2)
    override = f"{TINY},runtime.worker_hosts='127.0.0.1:{p0},127.0.0.1:{p1}'"
    if timeout != "off":
        override += f",runtime.collective_timeout_seconds={timeout}"
    model_dir = tempfile.mkdtemp(prefix="collective_threads.")
    procs, counts = [], {}
    start = time.monotonic()
    for i in (0, 1):
        procs.append(subprocess.Popen(
            trainer_argv(sys.executable, mode="train", model_dir=model_dir,
                         params_override=f"{override},runtime.task_index={i}"),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    readers = [threading.Thread(target=sample, args=(p, c), daemon=True)
               for p, c in zip(procs, (counts, {}))]
    for r in readers:
        r.start()
    workers_lib.wait_all(procs, timeout=900)
    for r in readers:
        r.join(timeout=5)
    grown = counts.get(STEPS, 0) - counts.get(100, 0)
    print(f"collective_timeout_seconds={timeout}: "
          f"exit {[p.returncode for p in procs]}, "
          f"{time.monotonic() - start:.0f} s; worker 0 threads by step: "
          + ", ".join(f"{k}:{v}" for k, v in sorted(counts.items()))
          + f"; growth step 100 -> {STEPS}: {grown}", flush=True)


def main(argv) -> int:
    for timeout in argv or ["off", "300"]:
        one_run(timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
