"""A background thread that samples something periodically during a run.

The doctor samples GPU utilisation and worker thread counts while a trainer
subprocess runs; the verdicts only use samples taken after the run's
warm-up, so every sample carries its time. The thread itself is shared with
the per-run utilisation sampler and lives in runtime/probes.py.
"""

from official_bench.runtime.probes import PeriodicSampler  # noqa: F401
