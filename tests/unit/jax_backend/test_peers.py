"""jax_backend/peers.py: which worker a failed collective points at, from
the text JAX's error holds and the cluster (no JAX needed).

GLOO is the error worker 0 got (JAX 0.10.2, CPU, gloo collectives) when
worker 1 of a two-process run on 127.0.0.1 was SIGKILLed mid-run; it ended
in 0.17 s with exit 4 and the line `lost worker 1 at 127.0.0.1:P at step
51 of 400 (worker 0 saw its collective fail: JaxRuntimeError: UNKNOWN:
Gloo all-reduce failed: ...)`. Two JAX processes cost ~70 s of CPU here,
so that run is not repeated in the suite: with two processes the peer is
the other one whatever the text says, and the text is parsed here.
"""

from types import SimpleNamespace

import pytest

from official_bench.jax_backend import peers
from official_bench.runtime.cluster import Cluster, PeerLost

GLOO = ("UNKNOWN: Gloo all-reduce failed: [external/gloo/gloo/transport/"
        "tcp/pair.cc:538] Read error [{ip}]:5517: Connection reset by peer")
COORDINATION = ("UNAVAILABLE: Task /job:jax_worker/replica:0/task:2 "
                "heartbeat timeout")
HOSTS = ["10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"]


def test_the_task_the_coordination_service_names():
    assert peers.lost_index(COORDINATION, HOSTS, 0) == 2


def test_gloo_address_of_one_workers_host():
    assert peers.lost_index(GLOO.format(ip="10.0.0.3"), HOSTS, 0) == 2
    assert peers.lost_index(GLOO.format(ip="10.0.0.1"), HOSTS, 1) == 0


def test_an_address_several_workers_share_names_none():
    local = ["127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"]
    assert peers.lost_index(GLOO.format(ip="127.0.0.1"), local, 0) is None


def test_two_processes_the_peer_is_the_other_one():
    local = ["127.0.0.1:7000", "127.0.0.1:7001"]
    assert peers.lost_index("INTERNAL: something broke", local, 0) == 1
    assert peers.lost_index("INTERNAL: something broke", local, 1) == 0


def test_nothing_to_go_by_names_none():
    assert peers.lost_index("INTERNAL: something broke", HOSTS, 0) is None


def _run(index, workers):
    return SimpleNamespace(
        cluster=Cluster(workers=workers, task_index=index),
        process_index=index, process_count=len(workers))


def test_the_line_names_the_worker_and_its_host():
    error = RuntimeError(GLOO.format(ip="10.0.0.3"))
    line = str(peers.lost_peer(_run(0, HOSTS), 51, 400, error))
    assert line.startswith("official_bench: lost worker 2 at 10.0.0.3:7000 "
                           "at step 51 of 400 (worker 0 saw its collective "
                           "fail: RuntimeError: UNKNOWN: Gloo"), line
    assert line.endswith("see that task's log for why it ended (the run "
                         "scripts print its path)")


def test_a_peer_with_the_reason_where_nothing_tells():
    local = ["127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"]
    error = RuntimeError(GLOO.format(ip="127.0.0.1"))
    line = str(peers.lost_peer(_run(0, local), None, 400, error))
    assert line.startswith("official_bench: lost a peer of worker 0 (3 "
                           "processes) before the first step: a collective "
                           "failed (RuntimeError: UNKNOWN: Gloo"), line


# What worker 0 got (JAX 0.10.2, CPU) while building the model when
# worker 1 was SIGKILLed during its own build: Keras' check that every
# variable is the same on each process is an all-gather over gloo.
GLOO_INIT = ("UNKNOWN: Gloo context initialization failed: "
             "DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
             "cpu:gloo/0,2048/1 and duration: 29.99999995s")


class _JaxRuntimeError(RuntimeError):
    pass


def _jax_run(index, workers):
    run = _run(index, workers)
    run.jax = SimpleNamespace(
        errors=SimpleNamespace(JaxRuntimeError=_JaxRuntimeError))
    return run


def test_a_collective_failing_before_the_loop_is_the_lost_peers_line():
    local = ["127.0.0.1:7000", "127.0.0.1:7001"]
    with pytest.raises(PeerLost) as caught:
        with peers.before_the_loop(_jax_run(0, local), 400):
            raise _JaxRuntimeError(GLOO_INIT)
    assert str(caught.value).startswith(
        "official_bench: lost worker 1 at 127.0.0.1:7001 before the first "
        "step (worker 0 saw its collective fail: _JaxRuntimeError: UNKNOWN: "
        "Gloo context initialization failed"), caught.value


def test_before_the_loop_leaves_one_process_and_other_errors_alone():
    with pytest.raises(_JaxRuntimeError):
        with peers.before_the_loop(_jax_run(0, ["127.0.0.1:7000"]), 400):
            raise _JaxRuntimeError(GLOO_INIT)
    with pytest.raises(ValueError):
        with peers.before_the_loop(
                _jax_run(0, ["127.0.0.1:7000", "127.0.0.1:7001"]), 400):
            raise ValueError("a bug")
