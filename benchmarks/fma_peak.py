"""What the cores really do at full tilt: measured FMA throughput, against
the peak that official_bench/host/peaks.py assumes for MFU.

Issue 31 section 4. The MFU denominator on a CPU is cores x clock x FLOP
per cycle, and two of those are assumptions: under a hypervisor the clock
is the host's nominal one (boost is invisible), and the FLOP per cycle
comes from the core design, which /proc/cpuinfo does not state. This
script measures the product: a small C kernel (compiled here with gcc
-O3 -march=native) keeps 16 independent vector FMA chains busy for a fixed
time, one process per core, each pinned to its core; FLOP/s = chains x
lanes x 2 x iterations / seconds. With the design's FLOP per cycle from
host/peaks.py, the measured rate implies the clock the cores ran at.

Printed per precision (fp32 always; bf16 where the CPU has avx512_bf16,
with vdpbf16ps, two bf16 products per fp32 lane): GFLOP/s on one core and
on all allowed cores, the clock that implies, and peaks.py's figure. A
second all-core figure near twice the one-core figure says the "cores"
do not share FMA units (not SMT siblings of one host core). Where the
measured figure is above peaks.py's (a hypervisor shows the nominal clock,
not the boost), a run's MFU against peaks.py can pass 100%; the line ends
with the runtime.peak_tflops override that divides by the measured one.
On busy cores (busy_reasons: load, scaling over cores, implied clock) the
figures are not a peak: a warning replaces the override.

    .venv/bin/python benchmarks/fma_peak.py
    .venv/bin/python benchmarks/fma_peak.py --seconds 5 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from typing import List, Optional

from official_bench.host import peaks  # TensorFlow-free

# One vector width per build: AVX-512 where the CPU has it, else AVX2+FMA.
# KIND 0 = fp32 FMA (vfmadd), 1 = bf16 dot product (vdpbf16ps).
KERNEL = (r"""
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 16
/* fully unrolled, so that the accumulators live in registers */
#define UNROLL _Pragma("GCC unroll 16")

static double now(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static double cpu_now(void) {
  struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
  int kind = atoi(argv[1]);
  double seconds = atof(argv[2]);
  long iters = 1000000, done = 0;
  double start = now(), took, cpu_start = cpu_now();
#if defined(__AVX512F__)
  const int lanes = 16;
  __m512 acc[CHAINS];
  for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps(1e-3f * c);
  __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-6f);
#if defined(__AVX512BF16__)
  __m512bh ah = _mm512_cvtne2ps_pbh(a, a), bh = _mm512_cvtne2ps_pbh(b, b);
#endif
  do {
    for (long i = 0; i < iters; i++) {
      if (kind == 0) {
        UNROLL for (int c = 0; c < CHAINS; c++) acc[c] = """
          r"""_mm512_fmadd_ps(acc[c], a, b);
      }
#if defined(__AVX512BF16__)
      else {
        UNROLL for (int c = 0; c < CHAINS; c++) acc[c] = """
          r"""_mm512_dpbf16_ps(acc[c], ah, bh);
      }
#endif
    }
    done += iters;
    took = now() - start;
  } while (took < seconds);
  float sink = 0;
  for (int c = 0; c < CHAINS; c++) sink += _mm512_reduce_add_ps(acc[c]);
#else
  const int lanes = 8;
  __m256 acc[CHAINS];
  for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_ps(1e-3f * c);
  __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-6f);
  if (kind != 0) { """
          r"""fprintf(stderr, "no bf16 kernel in this build\n"); return 2; }
  do {
    for (long i = 0; i < iters; i++)
      UNROLL for (int c = 0; c < CHAINS; c++) acc[c] = """
          r"""_mm256_fmadd_ps(acc[c], a, b);
    done += iters;
    took = now() - start;
  } while (took < seconds);
  float tmp[8], sink = 0;
  for (int c = 0; c < CHAINS; c++) {
    _mm256_storeu_ps(tmp, acc[c]);
    for (int k = 0; k < 8; k++) sink += tmp[k];
  }
#endif
  /* fp32 FMA: 2 FLOP per lane; vdpbf16ps: 2 products + 2 adds per lane */
  double flop_per_op = kind == 0 ? 2.0 * lanes : 4.0 * lanes;
  /* GFLOP/s by the clock, lanes, the sink, GFLOP per CPU-second */
  double gflop = done * CHAINS * flop_per_op / 1e9;
  printf("%.6f %d %g %.6f\n", gflop / took, lanes, (double)sink,
         gflop / (cpu_now() - cpu_start));
  return 0;
}
""")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=3.0,
                   help="length of each measurement (default 3)")
    p.add_argument("--repeats", type=int, default=3,
                   help="measurements per figure; the best is kept, as a "
                        "peak is what the cores can do (default 3)")
    return p.parse_args(argv)


def build(work: str) -> str:
    """Compile the kernel for this CPU; the binary's path."""
    gcc = shutil.which("gcc")
    if not gcc:
        raise SystemExit("fma_peak: gcc not found (Debian: apt-get install "
                         "gcc); it compiles the FMA kernel for this CPU")
    src, exe = os.path.join(work, "fma.c"), os.path.join(work, "fma")
    with open(src, "w") as f:
        f.write(KERNEL)
    subprocess.run([gcc, "-O3", "-march=native", "-o", exe, src], check=True)
    return exe


def run(exe: str, kind: int, seconds: float, cpus: List[int],
        per_cpu_second: bool = False) -> float:
    """GFLOP/s summed over one process per CPU in `cpus`, each pinned; with
    `per_cpu_second`, GFLOP per second of CPU the kernels got (what the
    cores do while they run it, however busy they are)."""
    procs = [subprocess.Popen(
        [exe, str(kind), str(seconds)], stdout=subprocess.PIPE, text=True,
        preexec_fn=lambda c=c: os.sched_setaffinity(0, {c})) for c in cpus]
    total = 0.0
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"fma_peak: kernel exited {proc.returncode}")
        total += float(out.split()[3 if per_cpu_second else 0])
    return total


def best(exe: str, kind: int, args, cpus: List[int]) -> float:
    return max(run(exe, kind, args.seconds, cpus)
               for _ in range(args.repeats))


# Busy cores, not a peak: below this scaling from one core to 2 or more,
# or an implied clock below this share of the nominal one.
MIN_SCALING = 1.5
MIN_CLOCK_SHARE = 0.6


def busy_reasons(load: float, cores: int, scaling: float,
                 clock_ghz: Optional[float],
                 nominal_ghz: Optional[float]) -> List[str]:
    """Why the measured figures are not the cores' peak ([] if none):
    load, the 1-minute load average before measuring; scaling, all cores'
    rate over one core's; clock_ghz, the clock the rate implies."""
    reasons = []
    if load >= cores:
        reasons.append(f"load average {load:.2f} >= the {cores} cores "
                       "measured")
    if cores >= 2 and scaling < MIN_SCALING:
        reasons.append(f"{cores} cores gave {scaling:.2f}x one core "
                       f"(< {MIN_SCALING}x)")
    if clock_ghz and nominal_ghz and \
            clock_ghz < MIN_CLOCK_SHARE * nominal_ghz:
        reasons.append(f"the implied {clock_ghz:.2f} GHz is under "
                       f"{MIN_CLOCK_SHARE:.0%} of the nominal "
                       f"{nominal_ghz:.2f} GHz")
    return reasons


def _against_peaks(precision: str, every: float, cores: int,
                   facts: peaks.CpuFacts):
    """(words, implied clock in GHz) against host/peaks.py's figure."""
    per_cycle, why = peaks.cpu_flop_per_cycle(facts, precision)
    clock = every / cores / per_cycle
    assumed = peaks.cpu_peak(facts, precision)
    words = f"; at {per_cycle} FLOP/cycle/core ({why}) that is {clock:.2f} GHz"
    if assumed:
        words += (f"; host/peaks.py assumes {assumed.tflops * 1000:.1f} "
                  f"GFLOP/s at {facts.clock_ghz:.2f} GHz "
                  f"({facts.clock_source}): measured / assumed = "
                  f"{every / (assumed.tflops * 1000):.3f}")
    return words, clock


def report(name: str, precision: str, one: float, every: float,
           cpus: List[int], facts: Optional[peaks.CpuFacts],
           load: float = 0.0) -> None:
    line = (f"{name}: 1 core {one:.1f} GFLOP/s, {len(cpus)} cores "
            f"{every:.1f} GFLOP/s ({every / one:.2f}x one core)")
    clock = None
    if facts:
        words, clock = _against_peaks(precision, every, len(cpus), facts)
        line += words
    reasons = busy_reasons(load, len(cpus), every / one, clock,
                           facts.clock_ghz if facts else None)
    if reasons:
        print(line + "\n  WARNING: the cores were busy (" +
              "; ".join(reasons) + "): these figures are not their peak, "
              "so no runtime.peak_tflops override is given; rerun on a "
              "quiet machine", flush=True)
        return
    print(line + f"\n  MFU against the measured figure: --params_override="
          f"runtime.peak_tflops={every / 1000:.3f} ({precision} runs on "
          "these cores)", flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    facts = peaks.read_cpu_facts()
    cpus = sorted(os.sched_getaffinity(0))
    load = os.getloadavg()[0]
    print(f"CPU: {facts.model if facts else 'unknown'}; cores {cpus}; "
          f"load {load:.2f}; best of {args.repeats} x "
          f"{args.seconds:g} s", flush=True)
    with tempfile.TemporaryDirectory(prefix="fma_peak_") as work:
        exe = build(work)
        kinds = [("fp32 FMA", "fp32", 0)]
        if facts and "avx512_bf16" in facts.flags:
            kinds.append(("bf16 dot product (vdpbf16ps)", "bf16", 1))
        for name, precision, kind in kinds:
            one = best(exe, kind, args, cpus[:1])
            every = best(exe, kind, args, cpus)
            report(name, precision, one, every, cpus, facts, load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
