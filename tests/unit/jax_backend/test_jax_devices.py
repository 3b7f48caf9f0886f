"""jax_backend/devices.py without starting JAX: how many devices a process
drives for each strategy, and the clusters it refuses before Keras 3 or
JAX load."""

import json

import pytest

from official_bench.config import RuntimeConfig
from official_bench.jax_backend import devices, keras3
from official_bench.runtime.cluster import ClusterError

# (strategy, num_gpus, cpu_devices) -> devices of one process.
COUNTS = [
    ("off", 0, 2, 1), ("off", 1, 1, 1), ("off", 8, 1, 1),
    ("one_device", 0, 2, 1), ("one_device", 1, 1, 1),
    ("one_device", 8, 1, 1),
    ("mirrored", 0, 1, 1), ("mirrored", 0, 2, 2), ("mirrored", 0, 8, 8),
    ("mirrored", 1, 2, 1), ("mirrored", 8, 2, 8),
    # one CPU replica per worker, as the TensorFlow backend; all GPUs
    ("multi_worker_mirrored", 0, 2, 1), ("multi_worker_mirrored", 1, 1, 1),
    ("multi_worker_mirrored", 8, 2, 8),
]


@pytest.mark.parametrize("strategy, num_gpus, cpu_devices, expected", COUNTS)
def test_local_device_count(strategy, num_gpus, cpu_devices, expected):
    rt = RuntimeConfig(distribution_strategy=strategy, num_gpus=num_gpus,
                       cpu_devices=cpu_devices)
    assert devices.local_device_count(rt) == expected


def test_every_strategy_jax_runs_is_counted():
    from official_bench.config.backends import TRAITS
    assert {s for s, *_ in COUNTS} == set(TRAITS["jax"].strategies)


@pytest.mark.parametrize("jobs, named", [
    ({"chief": ["127.0.0.1:1"]}, "chief"),
    ({"ps": ["127.0.0.1:2"]}, "ps"),
    ({"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"]}, "chief, ps"),
])
def test_start_refuses_a_cluster_with_other_jobs(monkeypatch, jobs, named):
    """TF_CONFIG with a chief or parameter servers: one ClusterError that
    names them, before Keras 3 or JAX is imported."""
    cluster = dict(jobs, worker=["127.0.0.1:3", "127.0.0.1:4"])
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": 0}}))

    def no_load(*args, **kwargs):
        raise AssertionError("keras3.load called for a refused cluster")
    monkeypatch.setattr(keras3, "load", no_load)
    rt = RuntimeConfig(distribution_strategy="multi_worker_mirrored",
                       num_gpus=0)
    with pytest.raises(ClusterError) as e:
        devices.start(rt)
    text = str(e.value)
    assert f"runtime.backend jax takes workers only; the cluster also has " \
           f"{named} " in text


def test_peak_memory_reader_is_off_on_cpus():
    class Cpu:
        platform = "cpu"
        id = 0
    assert devices.peak_memory_reader([Cpu()]) is None
    assert devices.peak_memory_reader([]) is None


def test_peak_memory_reader_reads_xla_peaks_per_gpu():
    class Gpu:
        platform = "gpu"

        def __init__(self, i, stats):
            self.id, self._stats = i, stats

        def memory_stats(self):
            return self._stats
    read = devices.peak_memory_reader(
        [Gpu(0, {"peak_bytes_in_use": 3 * 2**20}), Gpu(1, None)])
    assert read() == {"gpu:0": 3.0}
