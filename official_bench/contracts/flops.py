"""Training FLOPs and model FLOPs utilisation (MFU): one definition for the
trainer that writes them, the extractor's tables, compare and history.

Conventions (those of every accelerator's peak figure): a multiply-add is
2 FLOPs; a training step costs 3x the forward pass (forward, plus backward
for activations and for weights); images count the global batch. MFU is the
achieved model FLOP/s over the dense peak of the devices the run used, for
the run's precision: a fraction in (0, 1], None when the peak is unknown.

result.json carries them under ``"flops"`` (schema below); every field but
``gflop_per_image`` may be null.

    flops.gflop_per_image               training GFLOP per image (3 x fwd)
    flops.forward_gmacs_per_image       forward multiply-adds, in G
    flops.counted_by                    how gflop_per_image was counted
    flops.tf_cost_analysis_gflop_per_image  TensorFlow's own count, a check
                                            (xla_cost_analysis_... on JAX)
    flops.devices                       devices the run used (all workers)
    flops.device                        the device name the peak is for
    flops.precision                     the dtype the peak is for (fp32 ...)
    flops.peak_tflops_per_device        dense peak, TFLOP/s
    flops.peak_source                   where the peak came from
    flops.achieved_tflops_total         img/s x GFLOP/image / 1000
    flops.achieved_tflops_per_device
    flops.mfu                           achieved_per_device / peak
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Optional

KEY = "flops"
# A training step: forward, then backward through activations and weights.
TRAINING_TO_FORWARD = 3
FLOPS_PER_MULTIPLY_ADD = 2


def training_gflop_per_image(forward_gmacs: float) -> float:
    """Training GFLOP per image from forward multiply-adds (in G)."""
    return TRAINING_TO_FORWARD * FLOPS_PER_MULTIPLY_ADD * forward_gmacs


def achieved_tflops(images_per_second: float, gflop_per_image: float) -> float:
    """Model TFLOP/s of a run that trained ``images_per_second`` (global)."""
    return images_per_second * gflop_per_image / 1000.0


def mfu(images_per_second: float, gflop_per_image: float,
        peak_tflops_per_device: Optional[float],
        devices: int) -> Optional[float]:
    """Model FLOPs utilisation of ``devices`` devices; None without a peak."""
    if not peak_tflops_per_device or devices < 1:
        return None
    return achieved_tflops(images_per_second, gflop_per_image) / (
        peak_tflops_per_device * devices)


@dataclasses.dataclass(frozen=True)
class FlopsRecord:
    """The parts of result.json's ``flops`` object a reader needs."""
    gflop_per_image: float
    devices: Optional[int] = None
    device: Optional[str] = None
    precision: Optional[str] = None
    peak_tflops_per_device: Optional[float] = None
    peak_source: Optional[str] = None

    def mfu_at(self, images_per_second: float) -> Optional[float]:
        """MFU at another rate (a case's median, a compare side's)."""
        return mfu(images_per_second, self.gflop_per_image,
                   self.peak_tflops_per_device, self.devices or 0)


def _positive(item: Dict[str, Any], key: str) -> Optional[float]:
    """A finite positive number or None; anything else is malformed."""
    value = item.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{KEY}.{key} is {value!r}, expected a finite "
                         "number > 0 or null")
    return float(value)


def _text(item: Dict[str, Any], key: str) -> Optional[str]:
    value = item.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{KEY}.{key} is {value!r}, expected a string")
    return value


def read_record(data: Dict[str, Any]) -> Optional[FlopsRecord]:
    """The ``flops`` object of a decoded result.json, None when absent
    (older files); ValueError naming the field when it is malformed."""
    item = data.get(KEY)
    if item is None:
        return None
    if not isinstance(item, dict):
        raise ValueError(f"{KEY} is not an object")
    gflop = _positive(item, "gflop_per_image")
    if gflop is None:
        return None
    devices = item.get("devices")
    if devices is not None and (isinstance(devices, bool) or
                                not isinstance(devices, int) or devices < 1):
        raise ValueError(f"{KEY}.devices is {devices!r}, expected an "
                         "integer >= 1")
    return FlopsRecord(gflop, devices, _text(item, "device"),
                       _text(item, "precision"),
                       _positive(item, "peak_tflops_per_device"),
                       _text(item, "peak_source"))
