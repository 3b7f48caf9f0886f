"""Faked machine facts for the doctor's and the GPU diagnosis' tests:
TensorFlow builds, nvidia-smi's answers, and the doctor's plan for n GPUs.
Only decisions made from these are tested with them; no measurement is
faked."""

from official_bench.doctor import check_plan as plan
from official_bench.host import gpu_diagnosis as gd


CUDA_BUILD = {"is_cuda_build": True, "cuda_version": "12.5.1",
              "cudnn_version": "9",
              "cuda_compute_capabilities": ["sm_60", "sm_70", "sm_80",
                                            "sm_89", "compute_90"]}


CPU_BUILD = {"is_cuda_build": False, "is_rocm_build": False}


def smi(*gpus, driver="550.54.15", cap="8.0"):
    return gd.SmiFacts(found=True, ok=True, gpus=tuple(
        gd.SmiGpu(i, name, driver, cap) for i, name in enumerate(gpus)))


NO_SMI = gd.SmiFacts(found=False)


AMPERE, VOLTA = (8, 0), (7, 0)


NO_GPU = "no GPU visible to TensorFlow: no NVIDIA driver"


def planned(n, caps=AMPERE, horovod_skip=None, quick=False):
    ids = [str(i) for i in range(n)]
    return {c.name: c for c in plan.plan(
        ids, [caps] * n, None if n else NO_GPU, horovod_skip, quick)}


SMI_UTIL = "0, 97, 15020\n1, 3, 310\n"
