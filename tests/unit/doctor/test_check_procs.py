"""A check's trainer processes (doctor/check_procs.py): the timeout."""

import os
import sys
import time

from official_bench.doctor.check_procs import Command, ProcessGroup


def test_timeout_kills_a_process_that_ignores_sigterm(tmp_path):
    code = ("import signal, time; signal.signal(signal.SIGTERM, "
            "signal.SIG_IGN); print('up', flush=True); time.sleep(120)")
    group = ProcessGroup([Command([sys.executable, "-c", code],
                                  dict(os.environ), str(tmp_path / "x.log"))],
                         str(tmp_path)).start()
    start = time.monotonic()
    [outcome] = group.wait(1.5)
    assert group.timed_out and outcome.returncode == -9
    assert time.monotonic() - start < 30
    assert "up" in open(tmp_path / "x.log").read()
