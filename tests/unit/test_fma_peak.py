"""benchmarks/fma_peak.py: the compiled kernel really computes (its rate
follows the time it ran, not a constant) and the report derives the clock
from the measured rate and host/peaks.py's FLOP per cycle."""

import os
import shutil

import pytest

from official_bench.host import peaks
from support.helpers import load_script


def _load():
    return load_script("benchmarks", "fma_peak.py")


FACTS = peaks.CpuFacts("Test CPU", "AuthenticAMD", 0x19, 0x11,
                       frozenset("avx2 fma avx512f".split()), 2, 2.0,
                       "cpuinfo cpu MHz")


def test_report_derives_the_clock_from_the_measured_rate(capsys):
    module = _load()
    # Zen 4 fp32: 32 FLOP/cycle/core; 2 cores at 128 GFLOP/s -> 2.00 GHz,
    # exactly what FACTS assume (128 GFLOP/s), so measured / assumed = 1.
    module.report("fp32 FMA", "fp32", 64.0, 128.0, [0, 1], FACTS)
    line = capsys.readouterr().out
    assert "2 cores 128.0 GFLOP/s (2.00x one core)" in line
    assert "that is 2.00 GHz" in line
    assert "measured / assumed = 1.000" in line
    module.report("fp32 FMA", "fp32", 64.0, 96.0, [0, 1], FACTS)
    assert "that is 1.50 GHz" in capsys.readouterr().out


def test_busy_cores_are_named_and_quiet_ones_pass():
    module = _load()
    assert module.busy_reasons(0.9, 2, 1.95, 3.6, 2.6) == []
    # One core measured: scaling says nothing.
    assert module.busy_reasons(0.5, 1, 1.0, 3.6, 2.6) == []
    # The walk's loaded run: load 38.85, 1.01x, 0.53 GHz of 2.60.
    reasons = module.busy_reasons(38.85, 2, 1.01, 0.53, 2.6)
    assert len(reasons) == 3
    assert "load average 38.85 >= the 2 cores measured" in reasons
    assert "2 cores gave 1.01x one core (< 1.5x)" in reasons
    assert ("the implied 0.53 GHz is under 60% of the nominal 2.60 GHz"
            in reasons)
    # Each alone is enough; an unknown clock skips the clock test.
    assert len(module.busy_reasons(2.0, 2, 1.9, 3.0, 2.6)) == 1
    assert len(module.busy_reasons(0.1, 2, 1.4, 3.0, 2.6)) == 1
    assert module.busy_reasons(0.1, 2, 1.9, 1.0, None) == []


def test_busy_cores_give_a_warning_instead_of_the_override(capsys):
    module = _load()
    # 2 cores at 1.01x one core, at load 38.85: 0.51 GHz implied.
    module.report("fp32 FMA", "fp32", 32.5, 32.8, [0, 1], FACTS, 38.85)
    out = capsys.readouterr().out
    assert "WARNING: the cores were busy (load average 38.85" in out
    assert "no runtime.peak_tflops override is given" in out
    assert "--params_override" not in out
    module.report("fp32 FMA", "fp32", 64.0, 128.0, [0, 1], FACTS, 0.5)
    out = capsys.readouterr().out
    assert "runtime.peak_tflops=0.128" in out and "WARNING" not in out


@pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc to build "
                    "the kernel (the report's arithmetic is tested above)")
def test_kernel_runs_on_this_cpu_and_gives_a_plausible_rate(tmp_path):
    module = _load()
    exe = module.build(str(tmp_path))
    cpu = [sorted(os.sched_getaffinity(0))[0]]
    rate = module.run(exe, 0, 0.2, cpu, per_cpu_second=True)
    facts = peaks.read_cpu_facts()
    per_cycle, _ = peaks.cpu_flop_per_cycle(facts, "fp32")
    # Per second of CPU it got (a busy core gives it less of its clock,
    # which the wall-clock rate fell with, below this floor on a loaded
    # CI): between 0.2 and 6 GHz of the design's FLOP/cycle; a kernel
    # optimised away, or counting wrongly, falls outside.
    assert 0.2 * per_cycle < rate < 6 * per_cycle, (rate, per_cycle)
