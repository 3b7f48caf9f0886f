"""The machine's GPUs as nvidia-smi and CUDA_VISIBLE_DEVICES show them.

The one place that runs nvidia-smi (the launcher counts GPUs with it, the
GPU diagnosis lists them, the utilisation sampler reads their load) and
reads CUDA_VISIBLE_DEVICES, and the one split of GPU ids among workers
(the launcher's launchers sharing a machine, the doctor's two workers).
Each caller words its own messages from what it gets here.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Callable, List, Mapping, NamedTuple, Optional, Sequence

NVIDIA_SMI = "nvidia-smi"
VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


class SmiRun(NamedTuple):
    """One nvidia-smi call: its output, or the exception that stopped it
    (OSError, subprocess.TimeoutExpired) with returncode None."""
    returncode: Optional[int]
    stdout: str = ""
    stderr: str = ""
    error: Optional[Exception] = None


def run_nvidia_smi(args: Sequence[str], timeout: float,
                   run: Callable = subprocess.run,
                   program: str = NVIDIA_SMI) -> SmiRun:
    """Runs `program args` (nvidia-smi, or the path `which` found for it)
    with a timeout; never raises for a call that could not run. `run` is
    injectable so tests can play a machine's answers."""
    try:
        p = run([program, *args], capture_output=True, text=True,
                timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return SmiRun(None, error=e)
    return SmiRun(p.returncode, p.stdout, p.stderr)


def cuda_visible_devices(environ: Optional[Mapping[str, str]] = None
                         ) -> Optional[str]:
    """CUDA_VISIBLE_DEVICES as set (None when unset; "" hides every GPU),
    from `environ` (default: this process's environment)."""
    return (os.environ if environ is None else environ).get(VISIBLE_DEVICES)


def parse_visible(text: str) -> List[str]:
    """'0, 2,3' -> ['0', '2', '3']: the entries of a CUDA_VISIBLE_DEVICES
    style list (indices or UUIDs), blanks dropped."""
    return [x.strip() for x in text.split(",") if x.strip()]


def _cuda_id(entry: str) -> bool:
    """Whether CUDA takes `entry` as a device: an index >= 0 or a UUID
    (GPU-..., MIG-...)."""
    return re.fullmatch("[0-9]+", entry) is not None or \
        entry.startswith(("GPU-", "MIG-"))


def visible_ids(text: str, n_gpus: Optional[int] = None) -> List[str]:
    """The devices CUDA sees under a CUDA_VISIBLE_DEVICES style list: its
    entries up to the first one CUDA does not take, as CUDA reads it
    ("-1", or Slurm's "NoDevFiles" in a job without GPUs, hide every GPU;
    "0,1,-1,3" shows 0 and 1). With `n_gpus` (the GPUs nvidia-smi lists)
    an index past the last GPU stops the list too."""
    ids = parse_visible(text)
    bad = next((i for i, entry in enumerate(ids) if not _cuda_id(entry)
                or (n_gpus is not None and entry.isdigit()
                    and int(entry) >= n_gpus)), len(ids))
    return ids[:bad]


def hides_all(visible: Optional[str], n_gpus: Optional[int] = None) -> bool:
    """Whether CUDA_VISIBLE_DEVICES (None: unset) leaves CUDA no GPU: "",
    "-1", "NoDevFiles", or (with `n_gpus` known) "7" on a 2-GPU machine."""
    return visible is not None and not visible_ids(visible, n_gpus)


def visible_count(text: str, n_gpus: Optional[int] = None) -> int:
    """How many GPUs a CUDA_VISIBLE_DEVICES style list shows CUDA (see
    visible_ids: "", "-1" and "NoDevFiles" show none)."""
    return len(visible_ids(text, n_gpus))


def gpu_ids(visible: Optional[str], count: int) -> List[str]:
    """The ids to hand out in CUDA_VISIBLE_DEVICES for `count` GPUs.

    With CUDA_VISIBLE_DEVICES=2,3 the process's GPU 0 is physical GPU 2,
    so the ids are "2" and "3"; unset (or naming fewer than `count`), the
    order is 0..count-1.
    """
    if visible:
        ids = visible_ids(visible)
        if len(ids) >= count:
            return ids[:count]
    return [str(i) for i in range(count)]


def split_ids(ids: Sequence[str], workers: int) -> List[List[str]]:
    """`ids` in `workers` equal, disjoint, consecutive shares.

    Every worker gets the same number of GPUs (multi_worker_mirrored needs
    the same replicas on each), so an odd GPU is left out (3 ids, 2
    workers: ["0"] and ["1"]). ValueError when there are fewer ids than
    workers.
    """
    per = len(ids) // workers
    if per == 0:
        raise ValueError(f"{workers} workers need at least {workers} GPUs; "
                         f"{len(ids)} visible")
    return [list(ids[w * per:(w + 1) * per]) for w in range(workers)]
