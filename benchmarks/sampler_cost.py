"""What one utilisation sample costs this process: the /proc reads of
measure/utilisation.py's ProcessReader (CPU time, RSS, threads), timed
over many calls. No TensorFlow; GPU queries are not included (NVML needs a
GPU).

    PYTHONPATH=. .venv/bin/python benchmarks/sampler_cost.py
"""

import os
import time

from official_bench.host import probes


def main(n: int = 2000) -> None:
    pid = os.getpid()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        (probes.cpu_seconds(pid), probes.rss_bytes(pid),
         probes.thread_count(pid))
    wall = (time.perf_counter() - t0) / n
    cpu = (time.process_time() - c0) / n
    print(f"one /proc sample: {wall * 1e6:.1f} us wall, {cpu * 1e6:.1f} us "
          f"CPU; at the 1 s default period: {cpu * 100:.4f}% of one core")


if __name__ == "__main__":
    main()
