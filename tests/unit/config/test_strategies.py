"""The strategy traits table is the one place strategies differ
(config/strategies.py), and config's list of names is its keys."""

import pytest

from official_bench import config as C
from official_bench.config import strategies


def test_every_configurable_strategy_has_traits():
    assert tuple(strategies.TRAITS) == C.STRATEGIES
    assert all(t.name == n for n, t in strategies.TRAITS.items())


def test_unknown_strategy_names_the_valid_ones():
    with pytest.raises(C.ConfigError, match="'nope' is not one of off, "
                       "one_device, mirrored"):
        strategies.traits("nope")


def test_traits_state_the_differences_that_were_string_compares():
    t = strategies.traits
    # Staged by the strategy's MultiDeviceIterator unless default strategy.
    assert {n for n, x in strategies.TRAITS.items() if x.default_strategy} \
        == {"off", "horovod"}
    assert {n for n, x in strategies.TRAITS.items()
            if not x.measures_input_wait} == {"horovod", "parameter_server"}
    assert {n for n, x in strategies.TRAITS.items()
            if not x.saves_on_every_worker} == {"horovod"}
    assert t("horovod").input_per_process and \
        t("horovod").horovod_allreduce
    assert t("parameter_server").input_via_dataset_creator and \
        t("parameter_server").tasks_serve_coordinator
    # How runtime.all_reduce_alg and num_packs apply (config/rules.py), and
    # the replicas a process feeds (data/input_bench.py).
    assert {n for n, x in strategies.TRAITS.items() if x.peer_workers} == \
        {"multi_worker_mirrored"}
    assert {n for n, x in strategies.TRAITS.items()
            if x.gpu_cross_device_ops} == {"mirrored"}
    assert {n for n, x in strategies.TRAITS.items()
            if x.replica_per_local_device} == {"mirrored",
                                               "multi_worker_mirrored"}
    with pytest.raises(TypeError, match="unknown strategy traits"):
        strategies._traits("x", stages=True)


@pytest.mark.parametrize("strategy,task,jobs,serves", [
    ("parameter_server", "worker", {"ps": ["h:3"]}, True),
    ("parameter_server", "ps", {"ps": ["h:3"]}, True),
    ("parameter_server", "chief", {"ps": ["h:3"]}, False),
    ("parameter_server", "worker", {}, False),  # no ps: not a PS cluster
    ("multi_worker_mirrored", "worker", {"ps": ["h:3"]}, False),
])
def test_only_parameter_server_tasks_serve(monkeypatch, strategy, task, jobs,
                                           serves):
    from official_bench.runtime import distribute, ps_server
    from official_bench.runtime.cluster import Cluster
    served = []
    monkeypatch.setattr(ps_server, "serve",
                        lambda rt, cluster: served.append(cluster.task_type))
    extra = dict(jobs, chief=["h:1"]) if jobs else {}
    cluster = Cluster(workers=["h:2"], task_type=task, task_index=0,
                      extra_jobs=extra)
    rt = C.RuntimeConfig(distribution_strategy=strategy)
    assert distribute.serve_if_not_coordinator(rt, cluster) is serves
    assert served == ([task] if serves else [])
