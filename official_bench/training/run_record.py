"""What a run writes: the files it owns and result.json's record.

The chief writes params.yaml and result.json; every other process a result
file named for it (contracts/log_tree.py). The record's keys are
contracts/result_json.py's; both backends assemble it here, so the
extractor, the history and the compare command read one format.
TensorFlow-free.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Dict, Optional, Tuple

import numpy as np
from absl import logging

from official_bench.config import ExperimentConfig
from official_bench.contracts.log_tree import result_file_name
from official_bench.contracts.result_json import write_run_record
from official_bench.host.write_errors import writing


def task_files(model_dir: Optional[str], tag: str, is_chief: bool
               ) -> Tuple[Optional[str], Optional[str]]:
    """(params.yaml or None, result file or None) of this process."""
    if not model_dir:
        return None, None
    result = os.path.join(model_dir, result_file_name(tag, is_chief))
    if is_chief:
        return os.path.join(model_dir, "params.yaml"), result
    return None, result


def model_summary(model) -> Dict[str, Any]:
    """Name, size and a digest of the trainable weights.

    `parameters` counts every weight, BN's moving statistics too (ResNet-50
    at 1000 classes: 25,610,152); `trainable_parameters` only what the
    optimizer updates (25,557,032, the figure torchvision and papers give).
    Every replica must agree on the digest. BN moving statistics are left
    out: under Horovod each rank keeps its own, as in every Horovod program.
    """
    digest = hashlib.sha256()
    trainable = 0
    for w in model.trainable_weights:
        digest.update(np.asarray(w).tobytes())
        trainable += int(np.prod(tuple(w.shape)))
    return {"name": model.name, "parameters": int(model.count_params()),
            "trainable_parameters": trainable,
            "trainable_weights_sha256": digest.hexdigest()}


def write_result(path: str, cfg: ExperimentConfig, *, stats, environment,
                 history, evaluation, model: Dict[str, Any],
                 task: Dict[str, Any], extra: Optional[Dict] = None
                 ) -> Dict[str, Any]:
    """Writes result.json at `path` (atomically; a full disk is one
    NotWritable line) and returns the record, for the run history."""
    record = dict({
        "config": cfg.as_dict(),
        "stats": stats.as_dict() if stats else None,
        "environment": environment, "history": history,
        "evaluation": evaluation, "model": model, "task": task},
        **(extra or {}))
    with writing(path, "the run's result"):
        write_run_record(path, record)
    logging.info("official_bench: result written to %s", path)
    return record
