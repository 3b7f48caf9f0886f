"""The run history's write: what the trainer's chief pays after its run.

Issue 29 §4: the append (contracts/history_db.py, one row, one transaction,
WAL) happens after the timed loop and after result.json, so it cannot show
in img/s; this measures how long it takes, for a new file and for files that
already hold many rows, with a row of 10 and of 100 counted intervals (a
DLPerf-length run and a long one). Each figure is the median of the
repeats, in milliseconds, with the row built as the trainer builds it
(contracts/history_row.py from the result.json content).

    .venv/bin/python benchmarks/history_write.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from official_bench.contracts import history_db
from official_bench.contracts.history_row import row_from_result


def result(intervals: int, salt: float) -> dict:
    """A result.json-shaped dict with ``intervals`` counted intervals."""
    items = [{"start_step": 10 * k, "end_step": 10 * (k + 1),
              "seconds": 1.0, "examples_per_second": 1000.0 + salt + k}
             for k in range(intervals + 1)]
    return {"config": {"model": {"name": "resnet", "model_params":
                                 {"depth": 50}},
                       "train_dataset": {"image_size": 224}},
            "stats": {"intervals": items, "warmup_steps": 10,
                      "num_replicas": 8, "global_batch_size": 1024},
            "environment": {"num_workers": 1, "dtype": "float16",
                            "tensorflow": "2.21.0", "hostname": "h",
                            "gpu_names": ["NVIDIA A100-SXM4-40GB"] * 8}}


def timed_append(path: str, intervals: int, salt: float) -> float:
    """Milliseconds for the trainer's whole write: build the row, append."""
    start = time.perf_counter()
    row = row_from_result(result(intervals, salt), "trainer", "/m")
    history_db.append(path, [row])
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=30,
                   help="timed appends per case, whose median and maximum "
                        "are printed (default 30)")
    args = p.parse_args()
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    salt = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for intervals in (10, 100):
            new = []
            for r in range(args.repeats):
                path = os.path.join(tmp, f"new_{intervals}_{r}.sqlite")
                salt += 1
                new.append(timed_append(path, intervals, salt))
            print(f"{intervals:>3} intervals, new file: median "
                  f"{statistics.median(new):.1f} ms, max {max(new):.1f} ms")
            path = os.path.join(tmp, f"big_{intervals}.sqlite")
            rows = []
            for k in range(1000):
                salt += 1
                rows.append(row_from_result(result(intervals, salt),
                                            "trainer", "/m"))
            history_db.append(path, rows)
            times = []
            for r in range(args.repeats):
                salt += 1
                times.append(timed_append(path, intervals, salt))
            print(f"{intervals:>3} intervals, file with 1000+ rows: median "
                  f"{statistics.median(times):.1f} ms, max "
                  f"{max(times):.1f} ms")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
