"""A stand-in example source for the input workers' tests, with the
records reader's call shape (`worker_index=`, `num_workers=` as keywords):
importable in spawned workers as `support.worker_examples:examples`.

Example `k` of the whole stream has label k and every pixel k % 256;
worker w makes examples w, w + n, w + 2n, ... (n workers) of `count`
(endless when count is None), so a test knows which worker made what.
"""

import os
import signal
import time

import numpy as np

from official_bench.config import ConfigError
from official_bench.data.records import record_problems

_ERRORS = {"ValueError": ValueError, "ConfigError": ConfigError}


def examples(*, worker_index, num_workers, count=None, size=4, files=(),
             fail_at=None, die_at=None, hang_at=None, progress_dir=None,
             prefix="", error="ValueError", skip_every=None):
    """The stand-in: `fail_at`, `die_at`, `hang_at` are the example index
    at which the worker that reaches it raises (naming its file), kills
    itself (SIGKILL), or sleeps; it holds its file (files[worker_index])
    open meanwhile; `prefix` starts the raised message, `error` names
    its class (ValueError, or ConfigError: the project's). `progress_dir`
    gets a file per worker with how many examples it has made. With
    `skip_every` N, example k with k % N == 0 is skipped as a bad record
    is (logged and counted in split "train"), not made."""
    held = open(files[worker_index], "rb") if files else None
    k = worker_index
    made = 0
    while count is None or k < count:
        if k == fail_at:
            where = files[worker_index] if files else "memory"
            raise _ERRORS[error](f"{prefix}bad record {k} in {where}: "
                                 "truncated")
        if k == die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if k == hang_at:
            time.sleep(3600)
        if skip_every and k % skip_every == 0:
            record_problems.log_skipped(
                "train", record_problems.SkippedRecords(),
                [record_problems.message_line("memory", k, "stand-in")], 1)
            k += num_workers
            continue
        made += 1
        if progress_dir:
            with open(os.path.join(progress_dir, str(worker_index)),
                      "w") as f:
                f.write(str(made))
        yield np.full((size, size, 3), k % 256, np.uint8), k
        k += num_workers
    if held:
        held.close()
