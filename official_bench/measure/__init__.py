"""What a run measures: throughput, input wait, utilisation, profiler traces,
and the environment a number was measured on."""
