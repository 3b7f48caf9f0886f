"""The trainer command lines a check runs (no TensorFlow, no processes).

Every run is a short synthetic one: on GPU ResNet-50 at 224x224 with a
small batch, on CPU the tiny resnet_cifar (depth 8, 16x16 images) so the
CPU subset finishes in a minute or two on a small machine. A jax run is
the same run with runtime.backend=jax, less the keys that only tune
TensorFlow (config/backends.py names them).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Sequence

from official_bench.config import strategies
from official_bench.contracts import dtypes, trainer_command
from official_bench.doctor.check_plan import RunSpec


@dataclasses.dataclass(frozen=True)
class Profile:
    """Model and run length of the doctor's runs on one kind of device."""
    model: str
    depth: Optional[int]
    image_size: int
    num_classes: int
    batch_size: int  # per replica
    steps: int
    log_steps: int  # the first interval is the warm-up the trainer leaves out


GPU_PROFILE = Profile("resnet", None, 224, 1000, 64, 100, 10)
CPU_PROFILE = Profile("resnet_cifar", 8, 16, 10, 8, 60, 5)


def overrides(run: RunSpec, profile: Profile, seed: int = 1,
              backend: str = "tensorflow") -> List[str]:
    """--params_override pairs for one run (dotted keys of
    config/schema.py)."""
    jax = backend == "jax"
    pairs = [f"runtime.backend={backend}"] if jax else []
    pairs += [
        f"runtime.distribution_strategy={run.strategy}",
        f"runtime.num_gpus={run.num_gpus}",
        f"runtime.enable_xla={'true' if run.xla else 'false'}",
        f"runtime.seed={seed}",
        f"model.name={profile.model}",
        f"model.model_params.data_format={run.data_format}",
        "train_dataset.builder=synthetic",
        f"train_dataset.image_size={profile.image_size}",
        f"train_dataset.num_classes={profile.num_classes}",
        f"train_dataset.batch_size={profile.batch_size}",
        "train.epochs=1", f"train.steps={profile.steps}",
        f"train.time_history.log_steps={profile.log_steps}",
        "train.callbacks.enable_checkpoint_and_export=false",
        "evaluation.skip_eval=true",
    ]
    if profile.depth is not None:
        pairs.append(f"model.model_params.depth={profile.depth}")
    if run.dtype != "fp32":
        pairs.append("runtime.mixed_precision_dtype="
                     f"{dtypes.tf_name(run.dtype)}")
    if run.cpu_devices > 1:
        pairs.append(f"runtime.cpu_devices={run.cpu_devices}")
    if strategies.traits(run.strategy).peer_workers and run.num_gpus == 0 \
            and not jax:
        pairs.append("runtime.all_reduce_alg=ring")  # CPU collectives
    return pairs


def worker_overrides(hosts: Sequence[str], index: int,
                     peer_timeout: float) -> List[str]:
    """Cluster keys for worker `index` of a multi_worker_mirrored run."""
    return [f"runtime.worker_hosts='{','.join(hosts)}'",
            f"runtime.task_index={index}",
            f"runtime.peer_timeout_seconds={int(peer_timeout)}"]


def trainer_argv(python: str, model_dir: str, pairs: Sequence[str]
                 ) -> List[str]:
    """A training run of the trainer with these --params_override pairs."""
    return trainer_command.trainer_argv(
        python, mode="train", model_dir=model_dir,
        params_override=",".join(pairs))


def horovod_argv(venv: str, ranks: int, model_dir: str,
                 pairs: Sequence[str]) -> List[str]:
    """horovodrun from the venv, one local process per rank, Gloo control."""
    bin_dir = os.path.join(venv, "bin")
    return [os.path.join(bin_dir, "horovodrun"), "-np", str(ranks), "-H",
            f"localhost:{ranks}", "--gloo"] + trainer_argv(
                os.path.join(bin_dir, "python"), model_dir, pairs)


def child_env(base: Dict[str, str], extra: Optional[Dict[str, str]] = None
              ) -> Dict[str, str]:
    """The environment for a trainer process: the doctor's own, without a
    TF_CONFIG that would turn every run into someone else's cluster."""
    env = dict(base)
    env.pop("TF_CONFIG", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env
