"""Utilisation sampled while a run trains, TensorFlow-free.

A daemon thread reads, every `period` seconds, from outside the framework
(host/probes.py): every GPU's utilisation and memory used (NVML, else
nvidia-smi, else none), this process's CPU time, resident memory and thread
count (/proc), and, where the backend gives one, its allocator's peak
memory per device; the machine's load average at the start and the end.
The summary (mean, p10, p90 of each;
contracts/utilisation.py) goes into the summary line and result.json. Both
backends use it: measure/utilisation.py wraps it as a tf-keras callback.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Dict, List, Optional

from absl import logging

from official_bench.contracts import utilisation as contract
from official_bench.host import probes

MIB = float(2 ** 20)


class ProcessReader:
    """CPU (fraction of the usable cores since the previous read), RSS in
    MiB and threads of one process; the first read sets the CPU baseline."""

    def __init__(self, pid: int, cores: int,
                 clock: Callable[[], float] = time.monotonic,
                 proc: str = "/proc"):
        self.pid, self.cores, self._clock, self._proc = pid, cores, clock, proc
        self._last = (clock(), probes.cpu_seconds(pid, proc))

    def __call__(self) -> Dict[str, Optional[float]]:
        now, cpu = self._clock(), probes.cpu_seconds(self.pid, self._proc)
        then, before = self._last
        self._last = (now, cpu)
        fraction = None
        # CPU time counts in clock ticks (10 ms): a shorter interval (the
        # thread's first read) says nothing and is left out.
        if cpu is not None and before is not None and now - then >= 0.1:
            fraction = (cpu - before) / (now - then) / self.cores
        rss = probes.rss_bytes(self.pid, self._proc)
        return {"cpu": fraction,
                "rss_mib": rss / MIB if rss is not None else None,
                "threads": probes.thread_count(self.pid, self._proc)}


class Sampler:
    """Samples GPUs and this process in a thread while a run trains; owns
    the thread and its samples. `summary()` gives result.json's field.

    `peak_reader` reads the framework allocator's peak memory per device
    (MiB), or is None; `allocator` names it in result.json ("tf", "xla").
    Driven through Keras' callback names (on_train_begin/end): the TensorFlow
    backend's UtilisationSampler is this sampler as a callback, the JAX loop
    calls them itself."""

    def __init__(self, period: float, gpu_devices: List[str],
                 gpu_reader=None, gpu_note: Optional[str] = None,
                 pid: Optional[int] = None, peak_reader=None,
                 allocator: str = "tf"):
        self.period = period
        self.allocator = allocator
        self.gpu_devices = list(gpu_devices)
        self.cores = probes.usable_cores()
        self._gpu, self._gpu_note = gpu_reader, gpu_note
        self._gpu_source = getattr(gpu_reader, "name", None)
        self._process = ProcessReader(pid or os.getpid(), self.cores)
        self._peak = peak_reader
        self._thread: Optional[probes.PeriodicSampler] = None
        self._load: List[Optional[float]] = [None, None]  # start, end

    def read(self) -> Dict:
        sample = self._process()
        sample["gpus"] = [tuple(g) for g in self._gpu()] if self._gpu \
            else None
        sample["tf_peak"] = self._peak() if self._peak else None
        return sample

    def on_train_begin(self, logs=None):
        self._load = [contract.load_now(), None]
        self._process = ProcessReader(self._process.pid, self.cores)
        self._thread = probes.PeriodicSampler(
            self.read, self.period, name="utilisation-sampler")
        self._thread.start()

    def on_train_end(self, logs=None):
        if self._thread is not None:
            self._thread.stop()
            self._load[1] = contract.load_now()

    def summary(self) -> Optional[Dict]:
        if self._thread is None:
            return None
        samples = [v for _, v in self._thread.samples]
        out = contract.summarise(self.period, samples, self._gpu_source,
                                 self._gpu_note, self.cores,
                                 max(1, len(self.gpu_devices)),
                                 self.allocator)
        out[contract.LOAD_KEY] = contract.load_record(*self._load)
        if self._thread.error:
            out["error"] = self._thread.error
            logging.warning("official_bench: utilisation sampler: a read "
                            "failed (%s); the other samples are kept",
                            self._thread.error)
        if self.gpu_devices and out["gpu"] == contract.NO_GPU:
            logging.warning(
                "official_bench: the run uses %d GPU(s) but their "
                "utilisation was not sampled: %s", len(self.gpu_devices),
                self._gpu_note or "no reading")
        return out
