"""A case's model FLOP rate and utilisation (MFU), from its runs' records.

The trainer counts the model's training FLOPs per image and looks up the
device's dense peak (result.json's ``flops`` object,
:mod:`official_bench.contracts.flops`); the extractor turns them into
per-case figures at the case's own speed, so that the tables say how close
each case came to the hardware:

* achieved TFLOP/s = the case's images / time over the counted window
  (``images_per_second_over_window``, the median over its runs, all
  devices) x GFLOP per image / 1000: the rate the trainer's own MFU uses
  (docs/mfu.md, "which average"), so that one run gives one MFU in
  result.json and in the table; ``median_speed`` (DLPerf's mean of the
  interval rates) only where a case has no such figure;
* MFU = achieved / (peak per device x devices), the contract's
  :func:`~official_bench.contracts.flops.mfu` (one definition for all), over
  the devices the trainer counts (:func:`peak_devices`): nodes x GPUs; on
  CPUs the trainer's own count (one per worker process, whose logical
  devices share the CPU's peak), one per node where no record says.

On GPUs a record's ``devices`` other than the case's count (a result.json
in the wrong ``{N}n{G}g`` directory, a run that saw fewer GPUs) is a
warning, and the case's count is used. A record without a peak gives MFU
``None`` and a note naming why (the peak source the trainer recorded, or
that none was recorded).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from official_bench.contracts import flops as flops_contract
from official_bench.contracts.flops import FlopsRecord

KEY = "model_flops"  # the case entry's key


def _agree(records: Sequence[FlopsRecord]) -> bool:
    """True when the runs' records give the same per-image count and peak."""
    first = records[0]
    return all((r.gflop_per_image, r.peak_tflops_per_device) ==
               (first.gflop_per_image, first.peak_tflops_per_device)
               for r in records[1:])


def why_no_mfu(record: FlopsRecord) -> str:
    """The reason a case has no MFU, for the tables' "n/a (...)"."""
    device = record.device or "the device"
    if record.peak_source:
        return f"peak unknown for {device}: {record.peak_source}"
    return (f"peak unknown for {device} (result.json has no peak; set "
            "runtime.peak_tflops)")


def peak_devices(num_nodes: int, num_devices: int,
                 device_kind: Optional[str],
                 records: Sequence[Optional[FlopsRecord]] = ()) -> int:
    """The devices a case's peak is counted over, as the trainer counts
    them: on GPUs the case's ``num_devices`` (nodes x GPUs). On CPUs
    (``device_kind`` "cpu") the first of ``records`` (the counted runs')
    that names its ``devices``: the trainer counts worker processes, which
    only it can tell from logical devices (a Horovod or WORKERS_PER_NODE
    1n2g is 2 processes on one node, a mirrored CPU_DEVICES=2 one is 1);
    one per node where no record says."""
    if device_kind != "cpu":
        return num_devices
    return next((r.devices for r in records
                 if r is not None and r.devices is not None), num_nodes)


def case_flops(records: Sequence[Optional[FlopsRecord]],
               images_per_second: Optional[float], devices: int, label: str,
               warnings: List[str]) -> Optional[Dict[str, Any]]:
    """The ``model_flops`` object of a case, or None when no counted run
    carried a flops record or the case has no rate.

    ``records``: the counted runs' records (None for runs without one);
    ``images_per_second``: the case's images / time over the counted
    window (module doc), unrounded; ``devices``: the case's
    :func:`peak_devices`. Appends to ``warnings`` where the records
    disagree with each other or with the case.
    """
    found = [r for r in records if r is not None]
    if not found or images_per_second is None:
        return None
    record = found[0]
    if not _agree(found):
        warnings.append(f"{label}: runs report different flops (GFLOP per "
                        "image or peak); using the first run's")
    if record.devices is not None and record.devices != devices:
        warnings.append(f"{label}: result.json's flops.devices is "
                        f"{record.devices} but the case has {devices} "
                        f"device(s); MFU is counted over {devices} "
                        "device(s)")
    achieved = flops_contract.achieved_tflops(images_per_second,
                                              record.gflop_per_image)
    mfu = flops_contract.mfu(images_per_second, record.gflop_per_image,
                             record.peak_tflops_per_device, devices)
    return {"images_per_second": round(images_per_second, 2),
            "gflop_per_image": record.gflop_per_image,
            "achieved_tflops": round(achieved, 4),
            "achieved_tflops_per_device": round(achieved / devices, 4),
            "peak_tflops_per_device": record.peak_tflops_per_device,
            "peak_source": record.peak_source, "device": record.device,
            "precision": record.precision,
            "mfu": None if mfu is None else round(mfu, 4),
            "mfu_note": None if mfu is not None else why_no_mfu(record)}


def has_flops(model_result: Dict[str, Dict[str, Any]]) -> bool:
    """True when any case of a section carries model FLOPs."""
    return any(e.get(KEY) for e in model_result.values())
