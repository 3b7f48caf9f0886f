"""Distribution keys a strategy would silently ignore, or could not run,
are refused when the config loads (config/rules.py), naming the key.

- runtime.num_packs / all_reduce_alg with a strategy that never reads them
  (the run recorded num_packs=4 it did not use);
- runtime.enable_xla where TensorFlow 2.21 cannot run the compiled step
  (it was a traceback at the first step, or an abort).
"""

import os

import pytest

from official_bench import config as C
from official_bench.config import strategies
from support.helpers import DLPERF_CONFIGS, config_error_lines


@pytest.mark.parametrize("strategy", ["off", "one_device",
                                      "parameter_server", "horovod"])
def test_num_packs_with_a_strategy_that_does_not_pack_is_refused(strategy):
    lines = config_error_lines(
        f"runtime.distribution_strategy='{strategy}',runtime.num_packs=4")
    assert lines[0].startswith(
        f"runtime.num_packs: is 4, but {strategy} does not use it"), lines
    assert "set it to 1" in lines[0]


@pytest.mark.parametrize("strategy,alg", [
    ("off", "nccl"), ("one_device", "hierarchical_copy"),
    ("parameter_server", "ring")])
def test_all_reduce_alg_with_a_strategy_that_does_not_all_reduce(strategy,
                                                                 alg):
    lines = config_error_lines(
        f"runtime.distribution_strategy='{strategy}',"
        f"runtime.all_reduce_alg={alg}")
    assert len(lines) == 1 and lines[0].startswith(
        f"runtime.all_reduce_alg: {alg!r}, but {strategy} does not "
        "all-reduce with it (it picks mirrored's GPU all-reduce and "
        "multi_worker_mirrored's collectives): set it to null"), lines


def test_jax_still_checks_an_all_reduce_alg_value_it_ignores():
    """The unused-key refusal is TensorFlow's; on JAX (which lists the key
    as ignored) a one_device all_reduce_alg is still checked as a value."""
    assert C.load_config(None, "runtime.backend=jax,runtime."
                         "distribution_strategy=one_device,runtime."
                         "all_reduce_alg=nccl").runtime.all_reduce_alg == \
        "nccl"
    lines = config_error_lines("runtime.backend=jax,runtime."
                               "distribution_strategy=one_device,"
                               "runtime.all_reduce_alg=bogus")
    assert len(lines) == 1 and lines[0].startswith(
        "runtime.all_reduce_alg: unknown all_reduce_alg for one_device "
        "'bogus'; valid: nccl, hierarchical_copy"), lines


def test_an_unquoted_off_says_to_quote_it():
    """YAML 1.1 reads off as False: the docs' strategy name was refused as
    'expected str, got bool False', with no hint of the fix."""
    assert config_error_lines("runtime.distribution_strategy=off")[0] == (
        "runtime.distribution_strategy: expected str, got bool False; YAML "
        "reads an unquoted off, no or false as a boolean: quote the word "
        "('off'); valid: off, one_device, mirrored, multi_worker_mirrored, "
        "horovod, parameter_server (from --params_override "
        "'runtime.distribution_strategy="
        "off')")
    assert C.load_config(params_override="runtime.distribution_strategy="
                         "'off'").runtime.distribution_strategy == "off"


def test_horovod_keeps_the_multi_node_yamls_all_reduce_alg():
    """LAUNCHER=horovod turns DLPerf's two-node YAML (all_reduce_alg nccl)
    into the horovod strategy: still accepted."""
    cfg = C.load_config(os.path.join(DLPERF_CONFIGS, "two_node_gpu.yaml"),
                        "runtime.distribution_strategy=horovod,"
                        "runtime.num_gpus=1,runtime.worker_hosts=null,"
                        "train_dataset.builder=synthetic,"
                        "validation_dataset.builder=synthetic")
    assert cfg.runtime.all_reduce_alg == "nccl"


@pytest.mark.parametrize("override,why", [
    ("runtime.distribution_strategy=mirrored,runtime.cpu_devices=2",
     "mirrored over runtime.cpu_devices=2 CPU replicas cannot run an "
     "XLA-compiled step"),
    ("runtime.distribution_strategy=multi_worker_mirrored,"
     "runtime.worker_hosts='127.0.0.1:1,127.0.0.1:2',runtime.task_index=0",
     "multi_worker_mirrored over 2 CPU workers cannot run an XLA-compiled "
     "step (TensorFlow has no XLA collectives on CPU)"),
    ("runtime.distribution_strategy=parameter_server,"
     "runtime.chief_host='127.0.0.1:1',runtime.worker_hosts='127.0.0.1:2',"
     "runtime.ps_hosts='127.0.0.1:3',runtime.task_type=chief",
     "parameter_server keeps the variables on the ps tasks"),
])
def test_xla_where_tensorflow_cannot_run_the_step_is_refused(override, why):
    lines = config_error_lines("runtime.enable_xla=true," + override)
    assert len(lines) == 1 and lines[0].startswith(
        "runtime.enable_xla: is true, but " + why), lines
    assert "runtime.enable_xla=false" in lines[0]


@pytest.mark.parametrize("override", [
    "runtime.distribution_strategy=one_device",
    "runtime.distribution_strategy=mirrored,runtime.cpu_devices=1",
    "runtime.distribution_strategy=multi_worker_mirrored",
    "runtime.distribution_strategy=mirrored,runtime.num_gpus=2",
    "runtime.distribution_strategy=multi_worker_mirrored,runtime.num_gpus=1,"
    "runtime.worker_hosts='127.0.0.1:1,127.0.0.1:2',runtime.task_index=0",
    "runtime.distribution_strategy=horovod,runtime.num_gpus=0",
])
def test_xla_where_it_runs_is_accepted(override):
    assert C.load_config(
        params_override="runtime.enable_xla=true," + override
    ).runtime.enable_xla is True


def test_only_parameter_server_cannot_jit_compile_its_step():
    assert {n for n, t in strategies.TRAITS.items()
            if not t.jit_compiles_step} == {"parameter_server"}
