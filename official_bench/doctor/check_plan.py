"""Which checks the doctor runs on a machine, decided from its device list.

Everything here is a decision from facts (the backend, how many GPUs it
sees, their compute capability, whether the Horovod venv exists), so it
imports no TensorFlow and is tested with faked device lists. Running the
checks is official_bench/doctor/run_checks.py.

The jax backend runs every precision on one device and mirrored over all
GPUs, and two local workers; the checks that only TensorFlow has a knob
for (data format, XLA off/on) or a launcher for (Horovod) are listed as
SKIP with TF_ONLY.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import List, Optional, Sequence, Tuple

from official_bench.contracts import dtypes
from official_bench.host import gpus as host_gpus

DTYPES = dtypes.SHORT_NAMES
BACKENDS = ("tensorflow", "jax")
# The rows about the machine itself: always first, never filtered out.
ENV_KINDS = ("tensorflow", "jax", "gpus")
TF_ONLY = "TensorFlow backend only"
DATA_FORMATS = ("channels_first", "channels_last")
# bf16 convolutions and matmuls need Ampere (compute capability 8.0) or newer.
BF16_MIN_CAPABILITY = (8, 0)
# The 1-GPU run mirrored's per-GPU throughput is compared with.
SCALING_BASELINE = ("fp32", "channels_last", False)
# What --help prints for each kind of check.
KIND_HELP = {
    "tensorflow": "TensorFlow imports; its version, tf-keras, and the CUDA/"
                  "cuDNN it was built with",
    "jax": "(--backend jax) JAX and Keras 3 import; their versions, the "
           "CUDA plugin and JAX's devices",
    "gpus": "TensorFlow (or JAX) lists the GPUs nvidia-smi sees (driver "
            "version); otherwise why not and the fix",
    "single": "a short synthetic run on one device: exit 0, loss finite, "
              "the precision asked for, "
              "1 replica on the right device, GPU busy (utilisation "
              "sampled with NVML or nvidia-smi)",
    "mirrored": "mirrored over all GPUs: replicas = GPUs, all GPUs busy, "
                "img/s per GPU within 15% of the 1-GPU run",
    "multi_worker": "multi_worker_mirrored, 2 local workers on 127.0.0.1 "
                    "splitting the GPUs: replicas = GPUs, the replicas run "
                    "on GPUs, each worker's thread count stable",
    "horovod": "horovodrun with one process per GPU from the Horovod venv "
               "(scripts/install_horovod.sh): size = processes, loss finite",
}


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One trainer run: strategy, devices, precision, layout, XLA."""
    strategy: str  # one_device | mirrored | multi_worker_mirrored | horovod
    num_gpus: int  # per process
    dtype: str = "fp32"
    data_format: str = "channels_last"
    xla: bool = False
    processes: int = 1  # workers (multi_worker) or ranks (horovod)
    # CUDA_VISIBLE_DEVICES per process; empty: leave the environment alone.
    visible_devices: Tuple[str, ...] = ()
    cpu_devices: int = 1


@dataclasses.dataclass(frozen=True)
class CheckSpec:
    """A check as planned; `skip` set means it is reported, not run."""
    name: str
    kind: str  # a key of KIND_HELP
    device: str  # gpu | cpu | none
    run: Optional[RunSpec] = None
    skip: Optional[str] = None
    baseline: Optional[str] = None  # the 1-device check to compare with
    expected_replicas: Optional[int] = None


def single_name(device: str, dtype: str, data_format: str, xla: bool,
                backend: str = "tensorflow") -> str:
    """1gpu-fp16-channels_first-xla_on; cpu-fp32-xla_off (CPU: NHWC);
    on jax, where XLA is always on and the layout is XLA's, 1gpu-fp16 and
    cpu-fp16."""
    if backend == "jax":
        return f"{'cpu' if device == 'cpu' else '1gpu'}-{dtype}"
    if device == "cpu":
        return f"cpu-{dtype}-xla_{'on' if xla else 'off'}"
    return f"1gpu-{dtype}-{data_format}-xla_{'on' if xla else 'off'}"


def _bf16_skip(capabilities: Sequence[Optional[tuple]]) -> Optional[str]:
    known = [c for c in capabilities if c]
    if known and min(known) < BF16_MIN_CAPABILITY:
        low = min(known)
        return (f"bf16 needs compute capability >= "
                f"{BF16_MIN_CAPABILITY[0]}.{BF16_MIN_CAPABILITY[1]}; GPU "
                f"has {low[0]}.{low[1]}")
    return None


def plan_gpu(gpu_ids: Sequence[str], capabilities: Sequence[Optional[tuple]],
             no_gpu_reason: Optional[str], horovod_skip: Optional[str],
             quick: bool = False) -> List[CheckSpec]:
    """The GPU checks; all SKIP with `no_gpu_reason` when there is no GPU."""
    n = len(gpu_ids)
    checks = []
    dtypes = ("fp32", "fp16") if quick else DTYPES
    formats = ("channels_last",) if quick else DATA_FORMATS
    xlas = (False,) if quick else (False, True)
    bf16_skip = _bf16_skip(capabilities)
    for dtype in dtypes:
        for fmt in formats:
            for xla in xlas:
                skip = no_gpu_reason or (bf16_skip if dtype == "bf16"
                                         else None)
                checks.append(CheckSpec(
                    single_name("gpu", dtype, fmt, xla), "single", "gpu",
                    RunSpec("one_device", 1, dtype, fmt, xla), skip=skip,
                    expected_replicas=1))
    baseline = single_name("gpu", *SCALING_BASELINE)
    need_two = no_gpu_reason or (
        f"needs 2 or more GPUs; TensorFlow sees {n}" if n < 2 else None)
    checks.append(CheckSpec(
        f"mirrored-{max(n, 2)}gpu", "mirrored", "gpu",
        RunSpec("mirrored", n, *SCALING_BASELINE), skip=need_two,
        baseline=baseline, expected_replicas=n))
    checks.append(_multi_worker(gpu_ids, need_two))
    hv_skip = no_gpu_reason or horovod_skip
    checks.append(CheckSpec(
        f"horovod-{max(n, 1)}gpu", "horovod", "gpu",
        RunSpec("horovod", 1, *SCALING_BASELINE, processes=max(n, 1)),
        skip=hv_skip, expected_replicas=max(n, 1)))
    return checks


def plan_cpu(horovod_skip: Optional[str], quick: bool = False,
             skip: Optional[str] = None) -> List[CheckSpec]:
    """The CPU subset: one device, mirrored over 2 logical CPUs, 2 workers.

    CPU runs use channels_last only: Eigen's CPU kernels train NHWC only.
    """
    runs = [("fp32", False)] if quick else [
        ("fp32", False), ("fp32", True), ("bf16", False), ("fp16", False)]
    checks = [CheckSpec(single_name("cpu", d, "channels_last", x), "single",
                        "cpu", RunSpec("one_device", 0, d, xla=x), skip=skip,
                        expected_replicas=1) for d, x in runs]
    checks.append(CheckSpec(
        "cpu-mirrored-2dev", "mirrored", "cpu",
        RunSpec("mirrored", 0, cpu_devices=2), skip=skip,
        baseline=single_name("cpu", "fp32", "channels_last", False),
        expected_replicas=2))
    checks.append(CheckSpec(
        "cpu-multi_worker-2x1", "multi_worker", "cpu",
        RunSpec("multi_worker_mirrored", 0, processes=2), skip=skip,
        expected_replicas=2))
    checks.append(CheckSpec(
        "cpu-horovod-2rank", "horovod", "cpu",
        RunSpec("horovod", 0, processes=2), skip=skip or horovod_skip,
        expected_replicas=2))
    return checks


def _multi_worker(gpu_ids: Sequence[str], need_two: Optional[str],
                  dtype: str = "fp32") -> CheckSpec:
    """Two local workers splitting the GPUs in equal halves."""
    if need_two:
        return CheckSpec("multi_worker-2x1gpu", "multi_worker", "gpu",
                         skip=need_two)
    shares = host_gpus.split_ids(gpu_ids, 2)
    per = len(shares[0])
    return CheckSpec(
        f"multi_worker-2x{per}gpu", "multi_worker", "gpu",
        RunSpec("multi_worker_mirrored", per, dtype, processes=2,
                visible_devices=tuple(",".join(s) for s in shares)),
        expected_replicas=2 * per)


def plan_gpu_jax(gpu_ids: Sequence[str],
                 capabilities: Sequence[Optional[tuple]],
                 no_gpu_reason: Optional[str],
                 quick: bool = False) -> List[CheckSpec]:
    """The jax backend's GPU checks: each precision on one GPU and
    mirrored over all of them (against its own 1-GPU run), two workers,
    and the TensorFlow-only rows as SKIP."""
    n = len(gpu_ids)
    dtypes = ("fp32", "fp16") if quick else DTYPES
    bf16_skip = _bf16_skip(capabilities)
    need_two = no_gpu_reason or (
        f"needs 2 or more GPUs; JAX sees {n}" if n < 2 else None)
    checks = []
    for dtype in dtypes:
        skip = no_gpu_reason or (bf16_skip if dtype == "bf16" else None)
        checks.append(CheckSpec(
            single_name("gpu", dtype, "", False, "jax"), "single", "gpu",
            RunSpec("one_device", 1, dtype), skip=skip, expected_replicas=1))
    if not quick:  # the dimensions --quick leaves out on TensorFlow too
        checks += [CheckSpec(name, "single", "gpu", skip=TF_ONLY)
                   for name in ("1gpu-channels_first", "1gpu-xla_off")]
    for dtype in dtypes:
        skip = need_two or (bf16_skip if dtype == "bf16" else None)
        checks.append(CheckSpec(
            f"mirrored-{max(n, 2)}gpu-{dtype}", "mirrored", "gpu",
            RunSpec("mirrored", n, dtype), skip=skip,
            baseline=single_name("gpu", dtype, "", False, "jax"),
            expected_replicas=n))
    checks.append(_multi_worker(gpu_ids, need_two))
    checks.append(CheckSpec(f"horovod-{max(n, 1)}gpu", "horovod", "gpu",
                            skip=TF_ONLY))
    return checks


def plan_cpu_jax(quick: bool = False,
                 skip: Optional[str] = None) -> List[CheckSpec]:
    """The jax backend's CPU subset: TensorFlow's, on JAX (XLA always on,
    no Horovod)."""
    dtypes = ("fp32",) if quick else ("fp32", "bf16", "fp16")
    checks = [CheckSpec(single_name("cpu", d, "", False, "jax"), "single",
                        "cpu", RunSpec("one_device", 0, d), skip=skip,
                        expected_replicas=1) for d in dtypes]
    if not quick:
        checks.append(CheckSpec("cpu-xla_off", "single", "cpu",
                                skip=TF_ONLY))
    checks.append(CheckSpec(
        "cpu-mirrored-2dev", "mirrored", "cpu",
        RunSpec("mirrored", 0, cpu_devices=2), skip=skip,
        baseline=single_name("cpu", "fp32", "", False, "jax"),
        expected_replicas=2))
    checks.append(CheckSpec(
        "cpu-multi_worker-2x1", "multi_worker", "cpu",
        RunSpec("multi_worker_mirrored", 0, processes=2), skip=skip,
        expected_replicas=2))
    checks.append(CheckSpec("cpu-horovod-2rank", "horovod", "cpu",
                            skip=TF_ONLY))
    return checks


def plan(gpu_ids: Sequence[str], capabilities: Sequence[Optional[tuple]],
         no_gpu_reason: Optional[str], horovod_skip: Optional[str],
         quick: bool = False, backend: str = "tensorflow"
         ) -> List[CheckSpec]:
    """All checks for a machine: environment, then GPU or CPU runs.

    With GPUs the CPU subset is left out (the GPU runs cover the same code);
    without, the GPU checks are listed as SKIP with `no_gpu_reason`.
    """
    checks = [CheckSpec(backend, backend, "none"),
              CheckSpec("gpus", "gpus", "none")]
    has_gpu = bool(gpu_ids) and not no_gpu_reason
    if not has_gpu and not no_gpu_reason:
        no_gpu_reason = ("no GPU visible to "
                         f"{'JAX' if backend == 'jax' else 'TensorFlow'}")
    ids = gpu_ids if has_gpu else []
    reason = None if has_gpu else no_gpu_reason
    if backend == "jax":
        checks += plan_gpu_jax(ids, capabilities, reason, quick)
        return checks + ([] if has_gpu else plan_cpu_jax(quick))
    checks += plan_gpu(ids, capabilities, reason, horovod_skip, quick)
    if not has_gpu:
        checks += plan_cpu(horovod_skip, quick)
    return checks


def select(checks: List[CheckSpec], only: Sequence[str]) -> List[CheckSpec]:
    """The checks whose names match any --only pattern (fnmatch globs).

    The environment checks always stay: every other verdict depends on them.
    Raises ValueError listing the valid names when a pattern matches nothing.
    """
    if not only:
        return checks
    names = [c.name for c in checks]
    for pattern in only:
        if not fnmatch.filter(names, pattern):
            raise ValueError(f"--only {pattern!r} matches no check; valid: "
                             f"{', '.join(names)}")
    return [c for c in checks if c.kind in ENV_KINDS or
            any(fnmatch.fnmatchcase(c.name, p) for p in only)]
