"""Which checks the doctor runs (doctor/check_plan.py), decided from faked
device lists: GPU counts, compute capabilities, --quick and --only."""

import pytest

from official_bench.doctor import check_plan as plan
from support.doctor_facts import NO_GPU, NO_GPU_JAX, VOLTA, planned


def test_plan_without_gpu_skips_every_gpu_check_and_runs_the_cpu_subset():
    checks = planned(0)
    gpu = [c for c in checks.values() if c.device == "gpu"]
    assert len(gpu) == 12 + 3
    assert all(c.skip == NO_GPU for c in gpu)
    cpu = {n for n, c in checks.items() if c.device == "cpu" and not c.skip}
    assert cpu == {"cpu-fp32-xla_off", "cpu-fp32-xla_on", "cpu-bf16-xla_off",
                   "cpu-fp16-xla_off", "cpu-mirrored-2dev",
                   "cpu-multi_worker-2x1", "cpu-horovod-2rank"}
    assert checks["cpu-mirrored-2dev"].run.cpu_devices == 2
    assert checks["cpu-mirrored-2dev"].baseline == "cpu-fp32-xla_off"
    assert list(checks)[:2] == ["tensorflow", "gpus"]


def test_plan_one_gpu_runs_the_matrix_and_skips_multi_gpu_checks():
    checks = planned(1)
    singles = [c for c in checks.values() if c.kind == "single"]
    assert len(singles) == 12 and not any(c.skip for c in singles)
    assert {(c.run.dtype, c.run.data_format, c.run.xla) for c in singles} \
        == {(d, f, x) for d in ("fp32", "fp16", "bf16")
            for f in ("channels_first", "channels_last") for x in (0, 1)}
    assert all(c.run.num_gpus == 1 and c.run.strategy == "one_device"
               for c in singles)
    for name in ("mirrored-2gpu", "multi_worker-2x1gpu"):
        assert checks[name].skip == "needs 2 or more GPUs; TensorFlow sees 1"
    assert not checks["horovod-1gpu"].skip
    assert not any(c.device == "cpu" for c in checks.values())


def test_plan_two_gpus_split_one_per_worker():
    checks = planned(2)
    m = checks["mirrored-2gpu"]
    assert not m.skip and m.run.num_gpus == 2 and m.expected_replicas == 2
    assert m.baseline == "1gpu-fp32-channels_last-xla_off"
    mw = checks["multi_worker-2x1gpu"]
    assert mw.run.visible_devices == ("0", "1") and mw.run.num_gpus == 1
    assert mw.expected_replicas == 2 and mw.run.processes == 2


def test_plan_eight_gpus_split_four_per_worker():
    checks = planned(8, horovod_skip="Horovod venv not built at /x")
    mw = checks["multi_worker-2x4gpu"]
    assert mw.run.visible_devices == ("0,1,2,3", "4,5,6,7")
    assert mw.run.num_gpus == 4 and mw.expected_replicas == 8
    assert checks["mirrored-8gpu"].expected_replicas == 8
    assert checks["horovod-8gpu"].skip == "Horovod venv not built at /x"
    assert checks["horovod-8gpu"].run.processes == 8


def test_plan_bf16_skipped_below_ampere_and_quick_plan():
    checks = planned(1, caps=VOLTA)
    bf16 = [c for c in checks.values() if c.run and c.run.dtype == "bf16"]
    assert bf16 and all("compute capability >= 8.0; GPU has 7.0" in c.skip
                        for c in bf16)
    quick = planned(2, quick=True)
    singles = sorted(n for n, c in quick.items() if c.kind == "single")
    assert singles == ["1gpu-fp16-channels_last-xla_off",
                       "1gpu-fp32-channels_last-xla_off"]
    assert quick["mirrored-2gpu"].baseline in quick


def test_select_by_glob_keeps_environment_rows_and_rejects_unknown():
    checks = list(planned(0).values())
    chosen = [c.name for c in plan.select(checks, ["cpu-fp*"])]
    assert chosen == ["tensorflow", "gpus", "cpu-fp32-xla_off",
                      "cpu-fp32-xla_on", "cpu-fp16-xla_off"]
    with pytest.raises(ValueError, match="matches no check; valid: "
                                         "tensorflow, gpus, 1gpu-"):
        plan.select(checks, ["mirored"])


# --backend jax ---------------------------------------------------------------

TF_ONLY = "TensorFlow backend only"


def _runs(checks):
    return {n for n, c in checks.items() if c.run and not c.skip}


def test_jax_plan_without_gpu_runs_the_cpu_subset_on_jax():
    checks = planned(0, backend="jax")
    assert list(checks)[:2] == ["jax", "gpus"] and "tensorflow" not in checks
    assert _runs(checks) == {"cpu-fp32", "cpu-bf16", "cpu-fp16",
                             "cpu-mirrored-2dev", "cpu-multi_worker-2x1"}
    assert {n for n, c in checks.items() if c.skip == TF_ONLY} == {
        "1gpu-channels_first", "1gpu-xla_off", "horovod-1gpu",
        "cpu-xla_off", "cpu-horovod-2rank"}
    gpu = [c for c in checks.values() if c.device == "gpu"
           and c.skip != TF_ONLY]
    assert len(gpu) == 3 + 3 + 1 and all(c.skip == NO_GPU_JAX for c in gpu)
    assert checks["cpu-mirrored-2dev"].baseline == "cpu-fp32"
    assert checks["cpu-mirrored-2dev"].run.cpu_devices == 2
    assert {c.run.dtype for n, c in checks.items()
            if n.startswith("cpu-") and c.kind == "single" and c.run} == \
        {"fp32", "bf16", "fp16"}
    quick = planned(0, backend="jax", quick=True)
    assert _runs(quick) == {"cpu-fp32", "cpu-mirrored-2dev",
                            "cpu-multi_worker-2x1"}


def test_jax_plan_one_gpu_runs_each_precision_and_skips_the_rest():
    checks = planned(1, backend="jax")
    assert _runs(checks) == {"1gpu-fp32", "1gpu-fp16", "1gpu-bf16"}
    for dtype in ("fp32", "fp16", "bf16"):
        run = checks[f"1gpu-{dtype}"].run
        assert (run.strategy, run.num_gpus, run.dtype, run.xla) == \
            ("one_device", 1, dtype, False)
        assert checks[f"mirrored-2gpu-{dtype}"].skip == \
            "needs 2 or more GPUs; JAX sees 1"
    assert checks["multi_worker-2x1gpu"].skip == \
        "needs 2 or more GPUs; JAX sees 1"
    assert checks["horovod-1gpu"].skip == TF_ONLY
    assert not any(c.device == "cpu" for c in checks.values())
    volta = planned(1, caps=VOLTA, backend="jax")
    assert "GPU has 7.0" in volta["1gpu-bf16"].skip
    assert not volta["1gpu-fp16"].skip


def test_jax_plan_eight_gpus_mirrors_every_precision_and_splits_workers():
    checks = planned(8, backend="jax")
    for dtype in ("fp32", "fp16", "bf16"):
        m = checks[f"mirrored-8gpu-{dtype}"]
        assert not m.skip and m.run.strategy == "mirrored"
        assert m.run.num_gpus == 8 and m.expected_replicas == 8
        assert m.run.dtype == dtype and m.baseline == f"1gpu-{dtype}"
    mw = checks["multi_worker-2x4gpu"]
    assert mw.run.visible_devices == ("0,1,2,3", "4,5,6,7")
    assert mw.run.num_gpus == 4 and mw.expected_replicas == 8
    assert checks["horovod-8gpu"].skip == TF_ONLY
    quick = planned(8, backend="jax", quick=True)
    assert _runs(quick) == {"1gpu-fp32", "1gpu-fp16", "mirrored-8gpu-fp32",
                            "mirrored-8gpu-fp16", "multi_worker-2x4gpu"}
    chosen = plan.select(list(checks.values()), ["mirrored-*-bf16"])
    assert [c.name for c in chosen] == ["jax", "gpus", "mirrored-8gpu-bf16"]
