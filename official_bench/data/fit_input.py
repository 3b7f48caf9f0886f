"""What model.fit and evaluate iterate: the configured input, handed to the
distribution.

The data layer builds one input pipeline as a function of its
InputContext; the distribution (runtime/distribute.py) decides how that
function is called (by the strategy once per pipeline, once per Horovod
process, or remotely through a DatasetCreator). Here the two meet:

- the training input's wait is measured where the strategy lets the
  pipeline pass through the meter (measure/input_wait.py);
- the strategies that do not stage batches onto the device get a final
  prefetch to it (data/device_stage.py);
- `synthetic_location: device` keeps one batch per replica on its device
  (data/resident_batch.py) and feeds a token per step instead; that batch
  is attached to the model before fit (`FitInput.prepare_fit`);
- record files get their framing checked whole beside training
  (data/records/file_check.py), whatever part of them fit reads.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from official_bench.config import DatasetConfig
from official_bench.data import factory
from official_bench.data.records import file_check
from official_bench.data.resident_batch import ResidentBatch
from official_bench.measure import wait_meter


@dataclasses.dataclass
class FitInput:
    """The iterable for fit or evaluate, and the resident batch behind it
    when there is one."""
    data: Any
    resident: Optional[ResidentBatch] = None
    file_check: Optional[file_check.FileCheck] = None

    def prepare_fit(self, model) -> None:
        """A resident batch wraps whichever train step the model has (so
        call this after the distribution's own prepare_fit)."""
        if self.resident is not None:
            self.resident.attach(model)


def fit_input(dist, ds: DatasetConfig, global_batch: int, is_training: bool,
              seed: int) -> FitInput:
    """This process's input for `ds`, shaped for `dist`'s model.fit.

    `dist` is a runtime.distribute.Distribution: its traits say whether the
    wait is measured, `stage_device` where to prefetch, `distribute_input`
    how the pipeline function is called.
    """
    meter = wait_meter.TRAIN_METER if \
        is_training and dist.traits.measures_input_wait else None
    if meter is not None:
        meter.reset()
    if is_training and ds.builder == "synthetic" and \
            ds.synthetic_location == "device":
        resident = ResidentBatch(
            dist.strategy, ds, global_batch // dist.num_replicas, seed,
            stream_offset=dist.rank)
        return FitInput(dist.distribute_input(resident.dataset_fn(meter)),
                        resident)
    return FitInput(dist.distribute_input(factory.pipeline_fn(
        ds, global_batch, is_training, seed, dist.private_threads, meter,
        dist.stage_device)), file_check=file_check.start(ds, is_training))
