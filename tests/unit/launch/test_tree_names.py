"""BATCH and DTYPE name the log tree (bz{B}, rn50_b{B}_{dtype}_{i}.log): a
PARAMS_OVERRIDE or CONFIG_FILE that makes the trainer run another batch
or precision is refused in one line before anything starts, dry run or
not; one that agrees is no contradiction."""

import pytest

from official_bench.contracts import exit_status
from official_bench.launch import plan as plan_lib, settings as settings_lib
from official_bench.launch.errors import PlanError
from official_bench.launch.plan import DEFAULT_CONFIG_DIR
from support.launch_cli import script

FP16_CONFIG = f"{DEFAULT_CONFIG_DIR}/gpu_fp16.yaml"


def plan(tmp_path, *argv, **env):
    environ = dict(DEVICE="cpu", TEST_NUM="1", LOG_DIR=str(tmp_path / "l"),
                   MODEL_DIR=str(tmp_path / "m"), **env)
    settings = settings_lib.parse(["single", *argv, "--dry-run"], environ)
    return plan_lib.make_plan(settings, "20260101-000000")


@pytest.mark.parametrize("argv, env, words", [
    (["8", "fp32"], {"PARAMS_OVERRIDE": "train_dataset.batch_size=4"},
     "BATCH=8 (command line) contradicts train_dataset.batch_size 4 "
     "(PARAMS_OVERRIDE): the trainer follows PARAMS_OVERRIDE and would run "
     "batch 4, filed under bz8"),
    (["16", "fp32"], {"PARAMS_OVERRIDE": "train_dataset.dtype=float16"},
     "DTYPE=fp32 (command line) contradicts train_dataset.dtype float16 "
     "(PARAMS_OVERRIDE): the trainer follows the config and would run fp16, "
     "filed as fp32"),
    (["16"], {"PARAMS_OVERRIDE": "runtime.mixed_precision_dtype=bfloat16"},
     "DTYPE=fp32 (default) contradicts runtime.mixed_precision_dtype "
     "bfloat16 (PARAMS_OVERRIDE)"),
    (["16"], {"CONFIG_FILE": FP16_CONFIG},
     f"DTYPE=fp32 (default) contradicts train_dataset.dtype float16 "
     f"({FP16_CONFIG})"),
])
def test_a_layer_that_contradicts_the_tree_names_is_refused(tmp_path, argv,
                                                            env, words):
    with pytest.raises(PlanError) as e:
        plan(tmp_path, *argv, **env)
    assert str(e.value).startswith(words), str(e.value)
    assert str(e.value).endswith("or the same batch in both") or \
        str(e.value).endswith("or the same precision in both")


@pytest.mark.parametrize("argv, env", [
    (["8", "fp32"], {"PARAMS_OVERRIDE": "train_dataset.batch_size=8"}),
    ([], {"PARAMS_OVERRIDE": "train_dataset.batch_size=4"}),  # names bz4
    (["8", "fp16"], {"PARAMS_OVERRIDE": "train_dataset.dtype=float16"}),
    (["8", "fp16"], {"CONFIG_FILE": FP16_CONFIG}),
    (["8", "bf16"], {}),  # the launcher sets the CPU config's dtype
])
def test_layers_that_agree_plan(tmp_path, argv, env):
    p = plan(tmp_path, *argv, **env)
    assert f"bz{p.batch}" in p.log_root


def test_a_real_run_stops_with_one_line_and_writes_nothing(tmp_path):
    out = script("single", tmp_path, "8", "fp32", TEST_NUM=1, DEVICE="cpu",
                 PARAMS_OVERRIDE="train_dataset.batch_size=4")
    assert out.returncode == exit_status.CONFIG, (out.stdout, out.stderr)
    assert out.stdout == ""
    assert out.stderr.startswith("error: run_single_node.sh: BATCH=8 "
                                 "(command line) contradicts"), out.stderr
    assert out.stderr.count("\n") == 1
    assert not (tmp_path / "logs").exists()
