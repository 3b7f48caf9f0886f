"""What a run uses, read from outside TensorFlow: GPUs and this process.

TensorFlow-free, shared by the doctor (which samples trainer subprocesses)
and the per-run utilisation sampler (measure/utilisation.py, which samples
its own process):

- GPU utilisation and memory used: NVML through pynvml (the nvidia-ml-py
  package; no process per sample) if importable and a driver answers, else
  one `nvidia-smi --query-gpu` call per sample (about 50 ms; run by
  host/gpus.py), else none;
- a process's thread count, resident memory and CPU time, from
  /proc/<pid>/status and /proc/<pid>/stat (Linux; None elsewhere);
- PeriodicSampler: a daemon thread calling a read function every period.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from typing import Any, Callable, List, NamedTuple, Optional, Tuple

from official_bench.host import gpus as host_gpus

SMI_UTIL_QUERY = "index,utilization.gpu,memory.used"


class GpuSample(NamedTuple):
    """One GPU in one nvidia-smi sample: its index, utilisation and
    memory in use."""
    index: int
    utilisation: float  # percent of the last sample period a kernel ran
    memory_used_mib: float


def parse_smi_utilisation(text: str) -> List[GpuSample]:
    """Parses `nvidia-smi --query-gpu=index,utilization.gpu,memory.used
    --format=csv,noheader,nounits`; "[N/A]" utilisation raises ValueError
    (that GPU cannot be judged)."""
    samples = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3:
            raise ValueError(f"unexpected nvidia-smi line {line!r}: want "
                             f"'{SMI_UTIL_QUERY}' without units")
        try:
            samples.append(GpuSample(int(fields[0]), float(fields[1]),
                                     float(fields[2])))
        except ValueError:
            raise ValueError(f"nvidia-smi reports no utilisation: {line!r}")
    return samples


class SmiReader:
    """One nvidia-smi call per sample (about 50 ms each)."""
    name = "nvidia-smi"

    def __init__(self, run: Callable = subprocess.run):
        self._run = run

    def __call__(self) -> List[GpuSample]:
        p = host_gpus.run_nvidia_smi([f"--query-gpu={SMI_UTIL_QUERY}",
                                      "--format=csv,noheader,nounits"],
                                     10, self._run)
        if p.error is not None:
            raise p.error  # the sampler records it; sampling goes on
        if p.returncode != 0:
            raise RuntimeError(f"nvidia-smi exit {p.returncode}: "
                               f"{(p.stdout + p.stderr).strip()[:200]}")
        return parse_smi_utilisation(p.stdout)


class NvmlReader:
    """NVML through pynvml (package nvidia-ml-py): no process per sample."""
    name = "NVML (pynvml)"

    def __init__(self, nvml):
        self._nvml = nvml
        nvml.nvmlInit()
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i)
                         for i in range(nvml.nvmlDeviceGetCount())]

    def __call__(self) -> List[GpuSample]:
        out = []
        for i, h in enumerate(self._handles):
            util = self._nvml.nvmlDeviceGetUtilizationRates(h).gpu
            mem = self._nvml.nvmlDeviceGetMemoryInfo(h).used / 2 ** 20
            out.append(GpuSample(i, float(util), float(mem)))
        return out


def _import_nvml():
    import pynvml
    return pynvml


def make_gpu_reader(which: Callable = shutil.which,
                    import_nvml: Callable = _import_nvml
                    ) -> Tuple[Optional[Callable], str]:
    """(reader, description); reader None with the reason when neither NVML
    nor nvidia-smi is available."""
    try:
        return NvmlReader(import_nvml()), NvmlReader.name
    except Exception as e:  # ImportError, or NVML without a driver
        nvml_error = f"{type(e).__name__}: {e}"
    if which(host_gpus.NVIDIA_SMI):
        return SmiReader(), SmiReader.name
    return None, ("no GPU sampler: pynvml (pip install nvidia-ml-py) "
                  f"unusable ({nvml_error}) and nvidia-smi not on PATH")


# --------------------------------------------------------------------------
# A process, from /proc
# --------------------------------------------------------------------------


def _status_field(pid: int, key: str, proc: str) -> Optional[List[str]]:
    """The words after `key:` in /proc/<pid>/status; None once the process
    is gone (or where /proc does not exist)."""
    try:
        with open(f"{proc}/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split()[1:]
    except OSError:
        return None
    return None


def thread_count(pid: int, proc: str = "/proc") -> Optional[int]:
    """The Threads: line of /proc/<pid>/status, None if unreadable."""
    words = _status_field(pid, "Threads", proc)
    try:
        return int(words[0]) if words else None
    except ValueError:
        return None


def rss_bytes(pid: int, proc: str = "/proc") -> Optional[int]:
    """Resident memory (VmRSS, reported in kB) of the process."""
    words = _status_field(pid, "VmRSS", proc)
    try:
        return int(words[0]) * 1024 if words else None
    except ValueError:
        return None


def cpu_seconds(pid: int, proc: str = "/proc",
                ticks: Optional[int] = None) -> Optional[float]:
    """User + system CPU time of all the process's threads so far.

    /proc/<pid>/stat fields 14 and 15 (utime, stime) in clock ticks; the
    command name (field 2) may hold spaces, so fields count from its ')'.
    """
    try:
        with open(f"{proc}/{pid}/stat") as f:
            text = f.read()
        rest = text[text.rindex(")") + 2:].split()
        utime, stime = int(rest[11]), int(rest[12])
    except (OSError, ValueError, IndexError):
        return None
    hz = ticks or os.sysconf("SC_CLK_TCK")
    return (utime + stime) / hz


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask; cpu_count where
    the mask cannot be read)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# --------------------------------------------------------------------------
# The sampling thread
# --------------------------------------------------------------------------


class PeriodicSampler:
    """Calls `read()` every `period` seconds in a daemon thread until stopped.

    A read that raises is recorded (the first error is kept for the report)
    and sampling goes on: one failed nvidia-smi call must not end the series.
    """

    def __init__(self, read: Callable[[], Any], period: float,
                 clock: Callable[[], float] = time.monotonic,
                 name: str = "sampler"):
        self._read = read
        self._period = period
        self._clock = clock
        self._name = name
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.samples: List[Tuple[float, Any]] = []
        self.error: Optional[str] = None

    def start(self) -> "PeriodicSampler":
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=self._name)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                value = self._read()
            except Exception as e:  # reported, sampling continues
                if self.error is None:
                    self.error = f"{type(e).__name__}: {e}"
            else:
                if value is not None:
                    self.samples.append((self._clock(), value))
            self._stop.wait(self._period)

    def between(self, start: Optional[float],
                end: Optional[float] = None) -> List[Any]:
        """The values sampled in [start, end] (None: unbounded)."""
        return [v for t, v in list(self.samples)
                if (start is None or t >= start) and (end is None or t <= end)]
