"""Which devices a run uses, and the thread / cuDNN knobs Model Garden had.

Device configuration must happen before TensorFlow initialises its runtime;
in a process that already ran TensorFlow ops (a notebook, a test session) a
request that would change the devices is an error that says so.
"""

from __future__ import annotations

import os
from typing import List, Optional

from absl import logging

from official_bench.config import ConfigError, RuntimeConfig
from official_bench.host import gpu_diagnosis, gpus as host_gpus
from official_bench.runtime.keras_setup import tf


def configure_devices(rt: RuntimeConfig) -> List[str]:
    """Makes the first `num_gpus` GPUs visible, or splits the CPU.

    Returns the device names replicas should run on, one per replica.
    """
    gpus = tf.config.list_physical_devices("GPU")
    if rt.num_gpus > len(gpus):
        raise ConfigError(
            f"runtime.num_gpus is {rt.num_gpus} but {len(gpus)} GPU(s) are "
            f"visible{': ' + ', '.join(g.name for g in gpus) if gpus else ''}"
            f"{no_gpu_cause([g.name for g in gpus])}; use --num_gpus=0 for "
            "CPU")
    if rt.num_gpus > 0:
        wanted = gpus[:rt.num_gpus]
        try:
            tf.config.set_visible_devices(wanted, "GPU")
            for g in wanted:
                tf.config.experimental.set_memory_growth(g, True)
        except RuntimeError:
            visible = tf.config.get_visible_devices("GPU")
            if len(visible) != rt.num_gpus:
                raise ConfigError(
                    f"TensorFlow is already initialised with {len(visible)} "
                    f"visible GPU(s); runtime.num_gpus={rt.num_gpus} needs a "
                    "fresh process")
        return [f"/gpu:{i}" for i in range(rt.num_gpus)]
    if gpus:
        try:
            tf.config.set_visible_devices([], "GPU")
        except RuntimeError:
            logging.warning("GPUs stay visible (TensorFlow already "
                            "initialised); num_gpus=0 trains on the CPU")
    ensure_cpu_devices(rt.cpu_devices)
    return [f"/cpu:{i}" for i in range(rt.cpu_devices)]


def no_gpu_cause(gpu_names: List[str]) -> str:
    """Why TensorFlow sees fewer GPUs than asked: the wheel, the libraries or
    the driver, with the fix (the doctor gives the same answer)."""
    facts = gpu_diagnosis.diagnose(
        tf.sysconfig.get_build_info(), gpu_names,
        gpu_diagnosis.probe_nvidia_smi(),
        host_gpus.cuda_visible_devices(), tf.__version__)
    if facts.fix is None:
        return f" ({facts.verdict})"
    return f" ({facts.verdict}; fix: {facts.fix})"


def ensure_cpu_devices(count: int) -> None:
    """Splits the CPU into `count` logical devices (for mirrored on CPU)."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    have = len(current) if current else 1
    if have >= count:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError:
        raise ConfigError(
            f"runtime.cpu_devices={count} needs a fresh process: TensorFlow "
            f"is already initialised with {have} CPU device(s)")


def configure_threads(rt: RuntimeConfig) -> None:
    """GPU thread mode and cuDNN knobs, as environment variables TF reads."""
    if rt.gpu_thread_mode:
        per_gpu = rt.per_gpu_thread_count or 2
        os.environ["TF_GPU_THREAD_MODE"] = rt.gpu_thread_mode
        os.environ["TF_GPU_THREAD_COUNT"] = str(per_gpu)
        logging.info("TF_GPU_THREAD_MODE=%s TF_GPU_THREAD_COUNT=%d",
                     rt.gpu_thread_mode, per_gpu)
    if rt.batchnorm_spatial_persistent:
        os.environ["TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT"] = "1"


def dataset_private_threads(rt: RuntimeConfig,
                            cpu_count: Optional[int]) -> Optional[int]:
    """Input threads per process: the configured count, else (with
    gpu_private) what the cores leave after the GPUs' own threads.

    With gpu_private every GPU gets `per_gpu_thread_count` host threads for
    launching its kernels, plus one runtime thread; the input pipeline gets
    a private pool of the remaining cores, at most 8 per GPU, so it cannot
    starve the launch threads (the rule Model Garden r2.3 used).
    """
    if rt.dataset_num_private_threads:
        return rt.dataset_num_private_threads
    if rt.gpu_thread_mode != "gpu_private" or rt.num_gpus < 1 or \
            not cpu_count:
        return None
    per_gpu = rt.per_gpu_thread_count or 2
    left = cpu_count - rt.num_gpus * (per_gpu + 1)
    return max(1, min(left, 8 * rt.num_gpus))
