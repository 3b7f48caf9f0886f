"""How many devices each case runs and which GPUs each trainer gets.

GPU_IDS, nvidia-smi and CUDA_VISIBLE_DEVICES (read through host/gpus.py)
give the GPUs a node has; GPUS / WORKERS_PER_NODE / the mode give the cases;
launchers sharing one machine (several node-list entries on it) each take
their slice. Decided before any node is contacted, so a bad count names its
knob first.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from typing import List, Optional, Tuple

from official_bench.contracts import exit_status as es
from official_bench.host import gpus as host_gpus
from official_bench.launch.errors import PlanError, dry_run_note
from official_bench.launch.horovodrun import Horovod
from official_bench.launch.nodes import NodeSet
from official_bench.launch.settings import Settings

SINGLE_NODE_GPUS = [1, 2, 4, 8]


@dataclasses.dataclass
class Devices:
    """What the runs have to train on: GPUs or CPU, how many are visible
    and how that was found, the device count of each case (and the
    counts skipped), the GPU ids, and the GPUs shared with other
    launchers."""
    kind: str  # gpu | cpu
    available: int  # GPUs visible (0 on CPU)
    how: str
    counts: List[int]  # devices per node, one case each
    skipped: List[str] = dataclasses.field(default_factory=list)
    ids: List[str] = dataclasses.field(default_factory=list)  # GPU ids
    # CUDA_VISIBLE_DEVICES of this launcher's trainers when it shares the
    # machine's GPUs with other launchers (see share_gpus).
    share: Optional[str] = None


def count_gpus(settings: Settings) -> Tuple[int, str]:
    """How many GPUs the trainer would see, without importing TensorFlow.
    GPU_IDS is checked against nvidia-smi -L where it answers, and said to
    be unchecked where it does not."""
    listing, how = _smi_listing()
    if settings.gpu_ids:
        return _checked_gpu_ids(settings, listing, how)
    found = len(_gpu_lines(listing))
    cvd = settings.cuda_visible_devices
    if cvd is not None and found:
        n = host_gpus.visible_count(cvd, found)
        return min(n, found), f"{how}; CUDA_VISIBLE_DEVICES={cvd!r}"
    return found, how


def _smi_listing() -> Tuple[Optional[str], str]:
    """(nvidia-smi -L's output, or None when it could not answer; how)."""
    smi = shutil.which(host_gpus.NVIDIA_SMI)
    if not smi:
        return None, "no nvidia-smi on PATH"
    out = host_gpus.run_nvidia_smi(["-L"], 30, program=smi)
    if out.error is not None:
        return None, f"nvidia-smi failed: {out.error}"
    if out.returncode != 0:
        tail = (out.stdout + out.stderr).strip().splitlines()
        return None, f"nvidia-smi -L failed (exit {out.returncode}" + \
            (f": {tail[-1][:200]})" if tail else ")")
    return out.stdout, f"nvidia-smi -L lists {len(_gpu_lines(out.stdout))}"


def _gpu_lines(listing: Optional[str]) -> List[str]:
    return [line for line in (listing or "").splitlines()
            if line.startswith("GPU ")]


def _checked_gpu_ids(settings: Settings, listing: Optional[str],
                     how: str) -> Tuple[int, str]:
    """GPU_IDS's count and how it was found; PlanError naming the ids that
    nvidia-smi -L does not list (an index past its GPUs, an unknown UUID)."""
    ids = settings.gpu_ids
    count = host_gpus.visible_count(ids)
    gpus = _gpu_lines(listing)
    if not gpus or not count:
        return count, f"GPU_IDS={ids}; not checked: {how}"
    uuids = re.findall(r"UUID: ([^)\s]+)", listing or "")
    unknown = [i for i in host_gpus.parse_visible(ids)
               if not _lists(i, len(gpus), uuids)]
    if unknown:
        raise PlanError(
            f"GPU_IDS={ids!r} ({settings.source('gpu_ids')}) names "
            f"{', '.join(unknown)}, which nvidia-smi -L does not list: it "
            f"lists {len(gpus)} GPU(s), indices 0-{len(gpus) - 1} (or "
            "their UUIDs, GPU-...)")
    return count, f"GPU_IDS={ids}, checked: {how}"


def _lists(gpu_id: str, gpus: int, uuids: List[str]) -> bool:
    """Whether nvidia-smi -L lists `gpu_id`: an index below `gpus`, or a
    UUID (or its prefix, as CUDA takes it)."""
    if gpu_id.isdigit():
        return int(gpu_id) < gpus
    return any(u.startswith(gpu_id) for u in uuids)


def gpu_id_list(settings: Settings, available: int) -> List[str]:
    """The node's GPU ids, as CUDA_VISIBLE_DEVICES values: GPU_IDS, else
    the inherited CUDA_VISIBLE_DEVICES, else 0..available-1."""
    for text in (settings.gpu_ids, settings.cuda_visible_devices):
        if text and host_gpus.visible_count(text):
            return host_gpus.gpu_ids(text, available)
    return host_gpus.gpu_ids(None, available)


def choose_devices(settings: Settings,
                   notes: Optional[List[str]] = None) -> Devices:
    """The devices of the plan; PlanError when GPUs are asked for (DEVICE=
    gpu, GPUS) and none is visible. DEVICE=cpu ignores GPUS and GPU_IDS,
    with a note."""
    gpu_knobs = [f"{k.upper()}={v} ({settings.source(k)})" for k, v in (
        ("gpus", ",".join(map(str, settings.gpus or []))),
        ("gpu_ids", settings.gpu_ids)) if settings.source(k) != "default"]
    if settings.device == "cpu":
        available, how = 0, "DEVICE=cpu"
        if gpu_knobs and notes is not None:
            notes.append(f"DEVICE=cpu: {' and '.join(gpu_knobs)} not used "
                         "(CPU_DEVICES sets the CPU cases)")
    else:
        available, how = count_gpus(settings)
    problem = _no_gpu_problem(settings, available, how)
    if problem and not settings.dry_run:
        raise PlanError(problem)
    if problem:
        # The plan preview of a GPU node, from a login node or a laptop.
        available = max(settings.gpus or [settings.workers_per_node,
                                          SINGLE_NODE_GPUS[-1]])
        how = "assumed by this dry run: none is visible here"
        if notes is not None:
            notes.append(dry_run_note(
                f"{problem}; this dry run plans as if {available} GPU(s) "
                "were visible", es.CONFIG))
    if settings.workers_per_node > 1:
        return _one_device_per_worker(settings, available, how)
    if available == 0:
        return Devices("cpu", 0, how, list(settings.cpu_devices))
    if settings.gpus is not None:
        too_many = [g for g in settings.gpus if g > available]
        if too_many:
            raise PlanError(f"GPUS={settings.gpus} asks for {too_many} GPU(s) "
                            f"per node but {available} are visible ({how})")
        return Devices("gpu", available, how, list(settings.gpus))
    if settings.mode == "single":
        counts = [g for g in SINGLE_NODE_GPUS if g <= available]
        skipped = [f"{g} GPUs (only {available} visible)"
                   for g in SINGLE_NODE_GPUS if g > available]
        return Devices("gpu", available, how, counts, skipped)
    return Devices("gpu", available, how, [available])


def _no_gpu_problem(settings: Settings, available: int,
                    how: str) -> Optional[str]:
    """Why GPUs are asked for (DEVICE=gpu, GPUS) and none is visible; or
    None."""
    if available or settings.device == "cpu":
        return None
    if settings.device == "gpu":
        return f"DEVICE=gpu but no GPU is visible ({how})"
    if settings.gpus is not None:
        return (f"GPUS={','.join(map(str, settings.gpus))} "
                f"({settings.source('gpus')}) asks for GPUs, but no GPU is "
                f"visible ({how}); unset GPUS for a CPU run (CPU_DEVICES "
                "sets its cases), or set DEVICE=cpu")
    return None


def _one_device_per_worker(settings: Settings, available: int,
                           how: str) -> Devices:
    """WORKERS_PER_NODE=W > 1: one case, W devices per node, one each."""
    w = settings.workers_per_node
    knob = f"WORKERS_PER_NODE={w} ({settings.source('workers_per_node')})"
    if available == 0:
        if settings.source("cpu_devices") != "default" and \
                settings.cpu_devices != [w]:
            raise PlanError(
                f"{knob} runs {w} workers with one CPU device each (case "
                f"{w} devices per node), but CPU_DEVICES="
                f"{','.join(map(str, settings.cpu_devices))} asks for other "
                "cases; unset CPU_DEVICES")
        return Devices("cpu", 0, how, [w])
    if available < w:
        raise PlanError(f"{knob} runs one worker per GPU, but {available} "
                        f"GPU(s) are visible ({how})")
    if settings.gpus is not None and settings.gpus != [w]:
        raise PlanError(
            f"{knob} runs one worker per GPU, so each node runs {w} GPUs; "
            f"GPUS={','.join(map(str, settings.gpus))} asks for other cases; "
            f"unset GPUS (or set GPUS={w})")
    ids = gpu_id_list(settings, available)
    if len(set(ids[:w])) < w:
        raise PlanError(f"{knob}: the GPU ids {','.join(ids[:w])} (GPU_IDS "
                        "or CUDA_VISIBLE_DEVICES) repeat; each worker needs "
                        "its own GPU")
    return Devices("gpu", available, how, [w], ids=ids[:w])


def share_gpus(settings: Settings, devices: Devices,
               nodeset: Optional[NodeSet],
               horovod: Optional[Horovod], notes: List[str]) -> Devices:
    """Launchers that share a machine get their own GPUs.

    Several entries of the node list on one machine (srun
    --ntasks-per-node=t, or NODES naming a host twice) are t launchers that
    each see every GPU there; left alone, their trainers would all claim
    all of them. Each takes its slice of the visible ids, by its place
    among the entries on that machine, unless Slurm already bound GPUs to
    each task (SLURM_GPUS_PER_TASK), in which case what it sees is its own.
    """
    if devices.kind != "gpu" or nodeset is None or horovod is not None:
        return devices
    mates = [i for i in range(len(nodeset.nodes))
             if nodeset.same_machine(i, nodeset.index)]
    tasks = len(mates)
    if tasks == 1:
        return devices
    local = mates.index(nodeset.index)
    where = f"{tasks} entries of {nodeset.nodes_from} on this machine"
    if settings.slurm.get("SLURM_GPUS_PER_TASK"):
        notes.append(f"{where}: SLURM_GPUS_PER_TASK="
                     f"{settings.slurm['SLURM_GPUS_PER_TASK']}, so the "
                     f"{devices.available} GPU(s) this task sees are its own")
        return devices
    if settings.workers_per_node > 1:
        raise PlanError(f"{where} and WORKERS_PER_NODE="
                        f"{settings.workers_per_node}: give each machine one "
                        "entry (one launcher starts its workers)")
    share, rest = divmod(devices.available, tasks)
    if share == 0 or rest:
        raise PlanError(
            f"{where} share its {devices.available} visible GPU(s) "
            f"({devices.how}), which do not split evenly; bind GPUs per "
            "task (srun --gpus-per-task=G), or run one launcher per machine "
            "(srun --ntasks-per-node=1, with WORKERS_PER_NODE for one "
            "worker per GPU)")
    too_many = [g for g in devices.counts if g > share]
    if settings.gpus is not None and too_many:
        raise PlanError(f"GPUS={','.join(map(str, settings.gpus))} asks for "
                        f"{too_many} GPU(s) per launcher, but {where} share "
                        f"{devices.available}: {share} each")
    ids = host_gpus.split_ids(gpu_id_list(settings, devices.available),
                              tasks)[local]
    notes.append(f"{where}: this launcher (#{local}) uses GPU(s) "
                 f"{','.join(ids)} of the {devices.available} visible")
    return Devices("gpu", share, f"{devices.how}; share {local} of {tasks}",
                   devices.counts if settings.gpus is not None else [share],
                   devices.skipped, ids=ids, share=",".join(ids))
