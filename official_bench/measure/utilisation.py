"""Per-run utilisation on the TensorFlow backend: the sampler as a callback.

A Keras callback that starts measure/sampling.py's thread at the start of
training and stops it at the end (runtime.sample_period_seconds, default
1 s; 0: off). The one TensorFlow call per sample is the allocator's
peak-memory query (tf.config.experimental.get_memory_info), made on GPU
devices only: it reads a counter and does not synchronise the device.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

from official_bench.host import probes
from official_bench.measure.sampling import MIB, Sampler
from official_bench.runtime.keras_setup import keras, tf


def tf_peak_reader(gpu_devices: List[str]) -> Optional[Callable]:
    """Reads TensorFlow's peak allocated memory (MiB) of each GPU device;
    None without GPU devices (the query is for GPUs only)."""
    if not gpu_devices:
        return None

    def read() -> Dict[str, float]:
        return {d: tf.config.experimental.get_memory_info(d)["peak"] / MIB
                for d in gpu_devices}
    return read


class UtilisationSampler(Sampler, keras.callbacks.Callback):
    """The sampler (measure/sampling.py) as a tf-keras callback of fit,
    with TensorFlow's peak-memory query on GPU devices."""

    def __init__(self, period: float, gpu_devices: List[str],
                 gpu_reader=None, gpu_note: Optional[str] = None,
                 pid: Optional[int] = None):
        keras.callbacks.Callback.__init__(self)
        Sampler.__init__(self, period, gpu_devices, gpu_reader, gpu_note, pid,
                         peak_reader=tf_peak_reader(list(gpu_devices)))
        self._supports_tf_logs = True


def build(period: float) -> Optional[UtilisationSampler]:
    """The sampler for runtime.sample_period_seconds (None when 0)."""
    if not period:
        return None
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    reader, note = (probes.make_gpu_reader() if gpus
                    else (None, "TensorFlow sees no GPU"))
    return UtilisationSampler(period, gpus, reader, note)
