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


@pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc to build "
                    "the kernel (the report's arithmetic is tested above)")
def test_kernel_runs_on_this_cpu_and_gives_a_plausible_rate(tmp_path):
    module = _load()
    exe = module.build(str(tmp_path))
    rate = module.run(exe, 0, 0.2, [sorted(os.sched_getaffinity(0))[0]])
    facts = peaks.read_cpu_facts()
    per_cycle, _ = peaks.cpu_flop_per_cycle(facts, "fp32")
    # Between 0.2 GHz (a loaded core) and 6 GHz of the design's FLOP/cycle:
    # a kernel optimised away, or counting wrongly, falls outside.
    assert 0.2 * per_cycle < rate < 6 * per_cycle, (rate, per_cycle)
