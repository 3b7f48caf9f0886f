"""runtime.task_index left unset (-1) with several hosts of this task's
type: refused naming the hosts and the valid indices (as Model Garden r2.3
did), before TensorFlow starts. It was taken as 0, so every process
started as worker 0: a port clash on one machine, a stall until the peer
timeout across machines, and no word of the cause."""

import pytest

from official_bench import config as C
from official_bench.runtime.cluster import resolve_cluster


def _rt(override):
    return C.load_config(params_override=override).runtime


def test_unset_task_index_with_two_workers_is_refused():
    rt = _rt("runtime.distribution_strategy=multi_worker_mirrored,"
             "runtime.worker_hosts='127.0.0.1:5000,127.0.0.1:5001'")
    with pytest.raises(C.ConfigError) as e:
        resolve_cluster(rt, environ={}, quiet=True)
    assert str(e.value) == (
        "runtime.task_index is unset (-1) but 2 worker hosts are listed "
        "(127.0.0.1:5000, 127.0.0.1:5001): set it to this process's index, "
        "0..1 (the run scripts set it for you)")


@pytest.mark.parametrize("override,index", [
    ("runtime.distribution_strategy=multi_worker_mirrored,"
     "runtime.worker_hosts='127.0.0.1:5000'", 0),
    ("runtime.distribution_strategy=multi_worker_mirrored,"
     "runtime.worker_hosts='127.0.0.1:5000,127.0.0.1:5001',"
     "runtime.task_index=1", 1),
    # the one chief of a parameter-server cluster needs no index
    ("runtime.distribution_strategy=parameter_server,"
     "runtime.chief_host='127.0.0.1:5000',runtime.task_type=chief,"
     "runtime.worker_hosts='127.0.0.1:5001,127.0.0.1:5002',"
     "runtime.ps_hosts='127.0.0.1:5003'", 0),
])
def test_an_index_that_names_one_task_is_accepted(override, index):
    assert resolve_cluster(_rt(override), environ={},
                           quiet=True).task_index == index
