"""What a run gives back to a notebook or the CLI, whichever backend ran it.

Both backends' trainers (training/tf_trainer.py, jax_backend/trainer.py)
build it by keyword; official_bench.trainer.run returns it. TensorFlow-free.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from official_bench.config import ExperimentConfig
from official_bench.measure.stats import ThroughputStats


@dataclasses.dataclass
class RunResult:
    """What a run gives back to a notebook or the CLI: its config,
    statistics, Keras history, evaluation, environment, files and model."""
    config: ExperimentConfig
    stats: Optional[ThroughputStats] = None
    history: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    evaluation: Dict[str, float] = dataclasses.field(default_factory=dict)
    environment: Dict[str, Any] = dataclasses.field(default_factory=dict)
    model_dir: Optional[str] = None
    result_path: Optional[str] = None
    model: Any = dataclasses.field(default=None, repr=False)
    # result.json's flops object (contracts/flops.py); None: not counted.
    flops: Optional[Dict[str, Any]] = dataclasses.field(default=None,
                                                        repr=False)
    # result.json's records_skipped ({split: count} of bad records a
    # skip_bad_records run read past; None: none) and warnings.
    records_skipped: Optional[Dict[str, int]] = None
    warnings: List[str] = dataclasses.field(default_factory=list)
    # result.json's `input` (the input feed: builder, decoder, decode,
    # num_workers: input worker processes, ...; JAX with records or a
    # python source, else None) and `input_wait` (the steps' wait for
    # input; None where not measured). Not in the repr: the fields say.
    input: Optional[Dict[str, Any]] = dataclasses.field(default=None,
                                                        repr=False)
    input_wait: Optional[Dict[str, Any]] = dataclasses.field(default=None,
                                                             repr=False)

    @property
    def examples_per_second(self) -> Optional[float]:
        return self.stats.average_examples_per_second if self.stats else None

    @property
    def images_per_second_over_window(self) -> Optional[float]:
        """Images / time over the counted window (never above the mean of
        interval rates, examples_per_second)."""
        return self.stats.images_per_second_over_window if self.stats \
            else None

    @property
    def mfu(self) -> Optional[float]:
        """Model FLOPs utilisation in (0, 1]; None without a known peak."""
        return (self.flops or {}).get("mfu")

    def __repr__(self) -> str:
        """One line a notebook can read; the fields hold the rest."""
        rate = self.examples_per_second
        return (f"RunResult(model={self.config.model.name!r}, strategy="
                f"{self.config.runtime.distribution_strategy!r}, replicas="
                f"{self.stats.num_replicas if self.stats else None}, "
                + (f"{rate:.2f} img/s" if rate is not None else "no rate")
                + (f", records_skipped={self.records_skipped}"
                   if self.records_skipped else "")
                + f", result={self.result_path!r})")
