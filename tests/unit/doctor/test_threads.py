"""Thread counts of a check's worker processes (doctor/threads.py), on
real processes."""

import os
import subprocess
import sys
import textwrap

import pytest

from official_bench.doctor import threads
from official_bench.doctor.check_procs import Command, ProcessGroup
from official_bench.host.probes import PeriodicSampler

GROW = textwrap.dedent("""
    import sys, threading, time
    ev = threading.Event()
    for _ in range(int(sys.argv[1])):
        threading.Thread(target=ev.wait, daemon=True).start()
        time.sleep(0.02)
    print("TimeHistory: started", flush=True)
    for _ in range(int(sys.argv[2])):
        threading.Thread(target=ev.wait, daemon=True).start()
        time.sleep(0.02)
    time.sleep(0.6)
""")


@pytest.mark.parametrize("after,leaks", [(0, False), (60, True)])
def test_thread_sampler_on_real_processes(tmp_path, after, leaks):
    """Two real processes; one variant keeps starting threads after the
    warm-up mark, as a per-collective leak does."""
    cmds = [Command([sys.executable, "-c", GROW, "5", str(after)],
                    dict(os.environ), str(tmp_path / f"w{i}.log"))
            for i in range(2)]
    group = ProcessGroup(cmds, str(tmp_path)).start()
    sampler = PeriodicSampler(threads.reader(group.pids), 0.1).start()
    outcomes = group.wait(60)
    sampler.stop()
    assert [o.returncode for o in outcomes] == [0, 0]
    assert group.warm_time is not None
    samples = sampler.between(group.warm_time,
                              min(o.end_time for o in outcomes))
    verdict = threads.stable(samples, group.pids)
    assert verdict.ok is (not leaks), verdict.text
    if leaks:
        assert "thread leak" in verdict.text
        assert "collective_timeout_seconds" in verdict.fix


def test_thread_count_of_a_gone_process_is_none():
    assert threads.thread_count(os.getpid()) >= 1
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                       capture_output=True, text=True)
    assert threads.thread_count(int(p.stdout)) is None


def test_the_verdict_takes_the_peak_not_a_sample_taken_at_exit():
    """A worker's last sample may come while it exits (its threads gone):
    compared with it, a leak read as shrinking ('124->2')."""
    quiet = [{1: 124, 2: 20}, {1: 126, 2: 21}, {1: 2, 2: 1}]
    verdict = threads.stable(quiet, [1, 2])
    assert verdict.ok, verdict.text
    assert verdict.text == ("threads w0 124 after warm-up, peak 126, "
                            "w1 20 after warm-up, peak 21")
    leaked = [{1: 10}, {1: 60}, {1: 3}]
    verdict = threads.stable(leaked, [1])
    assert not verdict.ok and "thread leak" in verdict.text, verdict.text
