"""A run's model FLOPs utilisation: result.json's ``flops`` object and the
summary line's words for it.

Counted once, after the model is built and before the first step
(`ModelFlops.of`), so its cost never falls inside a timed interval; the
record is filled in after training from the run's rate. Conventions and
fields: contracts/flops.py; peaks: host/peaks.py; docs/mfu.md.
TensorFlow-free: each backend passes its Keras module, its compiler's own
count as the cross-check (measure/flops.py for TensorFlow) and whether
float32 matrix work may use TF32.

The achieved rate is images / time over the counted window (contracts/
throughput.py), not the mean of interval rates: FLOPs done over the time
they took. A run too short for one interval uses its whole-run rate.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Dict, List, Optional

from absl import logging

from official_bench.contracts import dtypes, flops as contract
from official_bench.host import peaks
from official_bench.measure import layer_flops as counting

TF_COUNTED_BY = "TensorFlow profiler float_operation, forward x 3"
# result.json's key prefix -> (whose count checks ours, with what).
CHECKERS = {"tf": ("TensorFlow", "profiler"), "xla": ("XLA", "cost analysis")}
# TensorFlow's count also has BN, bias adds, residual adds: a few tenths
# of a percent for ResNets. More than this means the two disagree. XLA's
# leaves out the multiply-adds over padded borders (2.5% of ResNet-50's at
# 224x224, a fifth at 32x32), so its check is looser.
CHECK_TOLERANCE = {"tf": 0.05, "xla": 0.3}


@dataclasses.dataclass(frozen=True)
class ModelFlops:
    """The model's training GFLOP per image, and how it was counted."""
    forward_gmacs: float
    counted_by: str
    tf_forward_gflop: Optional[float]  # the checker's forward GFLOP
    seconds: float  # what counting cost (BENCHMARKS.md)
    checker: str = "tf"  # CHECKERS: whose count tf_forward_gflop is

    @property
    def gflop_per_image(self) -> float:
        return contract.training_gflop_per_image(self.forward_gmacs)

    @property
    def tf_gflop_per_image(self) -> Optional[float]:
        """TensorFlow's forward count on the training convention (x3)."""
        if self.tf_forward_gflop is None:
            return None
        return contract.TRAINING_TO_FORWARD * self.tf_forward_gflop

    @classmethod
    def of(cls, model, keras, cross_check=None,
           checker: str = "tf") -> Optional["ModelFlops"]:
        """Counts `model` (built with `keras`) from its layer shapes,
        checked against `cross_check(model)`, the compiler's forward GFLOP
        at batch 1 (measure/flops.tf_cost_analysis, jax_backend/
        flop_check.py; `checker` names it) or None; that count alone for a
        model without a layer graph; None when neither can count it."""
        start = time.perf_counter()
        try:
            count: Optional[counting.ForwardCount] = \
                counting.count_forward(model, keras)
        except ValueError as e:
            logging.info("official_bench: FLOPs: %s", e)
            count = None
        tf_gflop = cross_check(model) if cross_check else None
        seconds = time.perf_counter() - start
        if count is not None and count.macs > 0:
            by = counting.COUNTED_BY
            if count.uncounted:
                by += (f" ({len(count.uncounted)} layer(s) with a kernel not "
                       f"counted: {', '.join(count.uncounted[:5])})")
                logging.warning("official_bench: FLOPs: %s", by)
            result = cls(count.gmacs, by, tf_gflop, seconds, checker)
            _check(result)
            logging.info("official_bench: FLOPs: %.4g GFLOP per training "
                         "image (%s check: %s), counted in %.2f s before the "
                         "first step", result.gflop_per_image,
                         CHECKERS[checker][0] + "'s",
                         "%.4g" % result.tf_gflop_per_image
                         if tf_gflop else "unavailable", seconds)
            return result
        if tf_gflop and checker == "tf":
            return cls(tf_gflop / contract.FLOPS_PER_MULTIPLY_ADD,
                       TF_COUNTED_BY, tf_gflop, seconds)
        return None


def _check(counted: ModelFlops) -> None:
    """A warning when the layer count and TensorFlow's disagree."""
    ours = contract.FLOPS_PER_MULTIPLY_ADD * counted.forward_gmacs
    theirs = counted.tf_forward_gflop
    if theirs and abs(theirs - ours) > \
            CHECK_TOLERANCE[counted.checker] * theirs:
        logging.warning(
            "official_bench: FLOPs: %.3f GFLOP forward from the layer shapes "
            "but %.3f from %s; MFU uses the former",
            ours, theirs, "%s's %s" % CHECKERS[counted.checker])


@dataclasses.dataclass(frozen=True)
class RunDevices:
    """What the peak is for: the device, how many, at which precision."""
    device: str
    devices: int
    precision: str
    peak: Optional[peaks.Peak]


def run_devices(*, num_gpus: int, gpu_names: List[str], num_workers: int,
                num_replicas: int, dtype: str,
                peak_override: Optional[float],
                tf32: bool = False) -> RunDevices:
    """GPU runs: every replica is a GPU (all workers). CPU runs: each
    worker's process is one device, its allowed cores; logical CPU
    devices (runtime.cpu_devices) share those cores, so they are not
    counted as more devices. `tf32`: float32 matrix work may run as TF32
    (the backend says; the peak follows)."""
    precision = dtypes.TO_SHORT.get(dtype, dtype)
    if num_gpus > 0:
        device = gpu_names[0] if gpu_names else "unknown GPU"
        peak = peaks.device_peak(
            device, precision, gpu=True,
            tf32=tf32, override=peak_override)
        return RunDevices(device, num_replicas, precision, peak)
    cpu = peaks.read_cpu_facts()
    peak = peaks.device_peak("", precision, gpu=False, tf32=False, cpu=cpu,
                             override=peak_override)
    return RunDevices(cpu.model if cpu else "unknown CPU",
                      max(1, num_workers), precision, peak)


def record(counted: Optional[ModelFlops], devices: RunDevices,
           images_per_second: Optional[float]) -> Optional[Dict[str, Any]]:
    """result.json's ``flops`` object (contracts/flops.py), None when the
    model could not be counted."""
    if counted is None:
        return None
    gflop = counted.gflop_per_image
    peak = devices.peak
    total = contract.achieved_tflops(images_per_second, gflop) \
        if images_per_second else None
    return {
        "gflop_per_image": gflop,
        "forward_gmacs_per_image": counted.forward_gmacs,
        "counted_by": counted.counted_by,
        f"{counted.checker}_cost_analysis_gflop_per_image":
            counted.tf_gflop_per_image,
        "devices": devices.devices,
        "device": devices.device,
        "precision": devices.precision,
        "peak_tflops_per_device": peak.tflops if peak else None,
        "peak_source": peak.source if peak else None,
        "achieved_tflops_total": total,
        "achieved_tflops_per_device":
            total / devices.devices if total is not None else None,
        "mfu": contract.mfu(images_per_second, gflop,
                            peak.tflops if peak else None, devices.devices)
        if images_per_second else None,
    }


def summary_text(item: Optional[Dict[str, Any]],
                 peak: Optional[peaks.Peak]) -> str:
    """'; 24.5 GFLOP/img, 0.07 TFLOP/s, MFU 41.2% of 0.16 TFLOP/s (CPU fp32
    peak at 2.60 GHz)' for the summary line; '' when nothing was counted.
    TFLOP/s are per device."""
    if not item:
        return ""
    text = f"; {item['gflop_per_image']:.3g} GFLOP/img"
    achieved = item.get("achieved_tflops_per_device")
    if achieved is not None:
        text += f", {achieved:.3g} TFLOP/s"
        if item["devices"] > 1:
            text += (f" per device ({item['achieved_tflops_total']:.3g} over "
                     f"{item['devices']})")
    if item.get("mfu") is not None and peak is not None:
        text += (f", MFU {100 * item['mfu']:.1f}% of {peak.tflops:.3g} "
                 f"TFLOP/s ({peak.label})")
    elif achieved is not None:
        text += (f", MFU: peak unknown for {item['device']} "
                 f"{item['precision']} (set runtime.peak_tflops)")
    return text
