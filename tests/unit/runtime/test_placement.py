"""Where the strategy put the replicas: decisions from device lists, the
resolver's accelerator count, and a real mismatch on CPU."""

import pytest

from official_bench import config as C, trainer
from official_bench.config.strategies import traits
from official_bench.runtime import cluster as cluster_lib, placement as P
from support.helpers import tiny

MWMS_GPUS = [f"/job:worker/replica:0/task:1/device:GPU:{i}" for i in range(4)]
MWMS_CPU = ["/job:worker/replica:0/task:1/device:CPU:0"]


def test_device_type_reads_every_spelling():
    assert P.device_type("/gpu:3") == "GPU"
    assert P.device_type("/job:localhost/replica:0/task:0/device:CPU:1") == \
        "CPU"
    assert P.device_type(MWMS_GPUS[2]) == "GPU"
    with pytest.raises(ValueError, match="not a device name"):
        P.device_type("worker")


@pytest.mark.parametrize("kind,gpus,cpus,want", [
    ("multi_worker_mirrored", 4, 1, 4), ("mirrored", 8, 1, 8),
    ("horovod", 8, 1, 1), ("parameter_server", 2, 1, 2),
    ("mirrored", 0, 2, 2), ("multi_worker_mirrored", 0, 2, 2),
    ("one_device", 0, 2, 1),
    ("one_device", 0, 1, 1)])
def test_expected_replicas(kind, gpus, cpus, want):
    assert P.expected_replicas(traits(kind), gpus, cpus) == want


def test_check_accepts_the_configured_devices():
    P.check(traits("multi_worker_mirrored"), 4, 1, P.Placement(MWMS_GPUS))
    P.check(traits("multi_worker_mirrored"), 0, 1, P.Placement(MWMS_CPU))


def test_worker_on_cpu_with_gpus_configured_is_an_error():
    """What a resolver without num_accelerators did to every 2-node run."""
    with pytest.raises(C.ConfigError) as e:
        P.check(traits("multi_worker_mirrored"), 4, 1, P.Placement(MWMS_CPU))
    msg = str(e.value)
    assert MWMS_CPU[0] in msg and "runtime.num_gpus=4" in msg
    assert "4 GPU replica(s) per worker" in msg


def test_wrong_gpu_count_is_an_error():
    with pytest.raises(C.ConfigError, match=r"\(2 replica\(s\)\), but "
                       r"runtime.num_gpus=4"):
        P.check(traits("mirrored"), 4, 1, P.Placement(MWMS_GPUS[:2]))


@pytest.mark.parametrize("num_gpus,want", [(0, {}), (4, {"GPU": 4})])
def test_resolver_carries_the_gpu_count(num_gpus, want):
    cluster = cluster_lib.Cluster(workers=["127.0.0.1:1", "127.0.0.1:2"],
                                  task_index=1)
    from official_bench.runtime.distribute import cluster_resolver
    resolver = cluster_resolver(cluster, num_gpus)
    assert resolver.num_accelerators() == want
    # What MultiWorkerMirroredStrategy reads for a non-TF_CONFIG resolver.
    assert resolver.num_accelerators().get("GPU", 0) == num_gpus
    assert resolver.task_id == 1


def test_real_mismatch_stops_the_run(tmp_path):
    """multi_worker_mirrored really uses one CPU replica per worker; a config
    asking for two is a mismatch the run must refuse, before any result."""
    cfg = tiny(runtime={"distribution_strategy": "multi_worker_mirrored",
                        "cpu_devices": 2})
    with pytest.raises(C.ConfigError,
                       match="runs one CPU replica per worker; "
                             "start more workers"):
        trainer.run(cfg, model_dir=str(tmp_path))
    assert not (tmp_path / "result.json").exists()


def test_one_device_records_its_device(tmp_path):
    r = trainer.run(tiny(), model_dir=str(tmp_path))
    assert r.environment["devices"] == [
        "/job:localhost/replica:0/task:0/device:CPU:0"]
    assert r.environment["replicas_per_worker"] == 1
