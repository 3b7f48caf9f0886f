"""Running one planned check (doctor/run_checks.py): a failed process, a
timeout, Ctrl-C, and a GPU run without a sampler."""

import sys
import time

import pytest

from official_bench.doctor import report, run_checks, threads
from official_bench.doctor.commands import CPU_PROFILE, GPU_PROFILE
from support.doctor_facts import planned
from support.helpers import REPO, cli_env


def _ctx(tmp_path, **kw):
    args = dict(python=sys.executable, repo=REPO, workdir=str(tmp_path),
                env=cli_env(), timeouts={"cpu": 120, "gpu": 120},
                profiles={"cpu": CPU_PROFILE, "gpu": GPU_PROFILE},
                progress=lambda line: None)
    args.update(kw)
    return run_checks.RunContext(**args)


def test_run_check_reports_a_failed_process(tmp_path):
    spec = planned(0)["cpu-fp32-xla_off"]
    result = run_checks.run_check(spec, _ctx(tmp_path, python="/bin/false"),
                                  {}, {})
    assert result.result == report.FAIL
    assert result.detail == "train exit 1: no output"
    assert result.fix.startswith("logs: ")


def test_run_check_timeout_is_named(tmp_path):
    spec = planned(0)["cpu-fp32-xla_off"]
    start = time.monotonic()
    result = run_checks.run_check(
        spec, _ctx(tmp_path, timeouts={"cpu": 1.0, "gpu": 1.0}), {}, {})
    assert result.result == report.FAIL
    assert result.detail == "timeout: not finished within 1 s (killed)"
    assert "raise --timeout" in result.fix
    assert result.data["returncodes"] in ([-9], [-15], [143])
    assert time.monotonic() - start < 30


def test_interrupted_check_kills_its_processes(tmp_path, monkeypatch):
    """Ctrl-C during a check ends the trainer processes too (they run in
    their own sessions, so the terminal's SIGINT does not reach them)."""
    fake = tmp_path / "fakepython"
    fake.write_text("#!/bin/bash\ntrap '' TERM\necho $$ > "
                    f"{tmp_path}/pid\nsleep 120\n")
    fake.chmod(0o755)
    monkeypatch.setattr(run_checks, "HEARTBEAT_SECONDS", 0.5)

    def interrupt(line):
        if (tmp_path / "pid").exists():  # the fake trainer is up
            raise KeyboardInterrupt
    spec = planned(0)["cpu-fp32-xla_off"]
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_checks.run_check(spec, _ctx(tmp_path, python=str(fake),
                                        progress=interrupt), {}, {})
    pid = int((tmp_path / "pid").read_text())
    assert threads.thread_count(pid) is None  # gone (SIGKILL after TERM)
    assert time.monotonic() - start < 30


def test_gpu_run_without_a_sampler_is_not_called_busy():
    spec = planned(2)["mirrored-2gpu"]
    ctx = run_checks.RunContext(
        python=sys.executable, repo=REPO, workdir="/nonexistent", env={},
        timeouts={}, profiles={},
        gpu_reader_desc="no GPU sampler: pynvml unusable and nvidia-smi "
                        "not on PATH")
    finding = run_checks._busy(spec, None, (None, None), ctx, {})
    assert not finding.ok
    assert finding.text == ("GPU busy unknown: no GPU sampler: pynvml "
                            "unusable and nvidia-smi not on PATH")
