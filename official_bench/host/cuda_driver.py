"""The few CUDA driver calls the suite makes itself, through libcuda by
ctypes (nothing to install): waits that block, and streams of its own.

`block_waits`: CUDA's default (CU_CTX_SCHED_AUTO) spins while a thread
waits for the GPU unless the process has more contexts than the machine
has logical CPUs; an input worker with one nvImageCodec decoder has one,
so each of its waits (the previous batch's event, every window's copy to
the host) holds a core busy. It sets CU_CTX_SCHED_BLOCKING_SYNC on a
device's primary context, the one the CUDA runtime (and so nvImageCodec)
uses. Call it before the process's first CUDA call, as the flags of an
active context may not change on every driver. Not for a process where
JAX runs: XLA sets an inactive primary context's flags itself when it
makes its context, from TF_CUDA_PLATFORM_GPU_DEVICE_SCHEDULE (spin,
yield, blocking_sync; unset: CUDA's default), and only logs an active
one's that differ (openxla/xla, stream_executor/cuda/cuda_context.cc).

`new_streams`: non-blocking streams on a device's primary context, for
nvImageCodec calls that must not queue behind each other (its decode
makes the caller's stream wait for the decode, and Image.cpu() copies on
that stream and waits for all of it: one shared stream chains every
batch's copies to the next batch's decode). `synchronize`: one thread
waits for such a stream, so that the threads copying its windows after
it do not each wait (each spinning a core) for the decode itself.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Dict, List, Optional, Tuple

CU_CTX_SCHED_BLOCKING_SYNC = 0x04
CU_STREAM_NON_BLOCKING = 0x01
_SCHED_MASK = 0x07
LIBRARY = "libcuda.so.1"
# device: (driver, its primary context), retained once for the process
_PRIMARY: Dict[int, Tuple[Any, ctypes.c_void_p]] = {}


class CudaDriverError(RuntimeError):
    """A driver call failed, or there is no driver library."""


def _driver() -> Any:
    return ctypes.CDLL(LIBRARY)


def _load(load: Callable[[], Any]) -> Any:
    try:
        return load()
    except OSError as e:
        raise CudaDriverError(f"no CUDA driver library ({LIBRARY}: {e})"
                              ) from e


def _name(cuda: Any, code: int) -> str:
    """CUDA_ERROR_... for a CUresult, else the number."""
    text = ctypes.c_char_p()
    try:
        if cuda.cuGetErrorName(code, ctypes.byref(text)) == 0 and text.value:
            return text.value.decode()
    except AttributeError:
        pass
    return f"CUresult {code}"


def _entry(cuda: Any, name: str) -> Callable[..., int]:
    """A driver entry point by its cuda.h name (its _v2 symbol where the
    header maps it to one); CudaDriverError where the library has
    neither."""
    for symbol in (name + "_v2", name):
        try:
            return getattr(cuda, symbol)
        except AttributeError:
            pass
    raise CudaDriverError(f"the CUDA driver library has no {name}")


def _call(cuda: Any, device: int, name: str, *args) -> None:
    try:
        code = _entry(cuda, name)(*args)
    except ctypes.ArgumentError as e:
        raise CudaDriverError(f"{name} on GPU {device}: {e}") from e
    if code != 0:
        raise CudaDriverError(f"{name} failed on GPU {device}: "
                              f"{_name(cuda, code)}")


def _device(cuda: Any, device: int) -> ctypes.c_int:
    dev = ctypes.c_int()
    _call(cuda, device, "cuInit", 0)
    _call(cuda, device, "cuDeviceGet", ctypes.byref(dev), device)
    return dev


def block_waits(device: int, load: Callable[[], Any] = _driver
                ) -> Optional[str]:
    """Sets blocking-sync waits on GPU `device`'s primary context: None
    when set (and read back), else why not, in a line."""
    flags, active = ctypes.c_uint(), ctypes.c_int()
    try:
        cuda = _load(load)
        dev = _device(cuda, device)
        _call(cuda, device, "cuDevicePrimaryCtxSetFlags", dev,
              CU_CTX_SCHED_BLOCKING_SYNC)
        _call(cuda, device, "cuDevicePrimaryCtxGetState", dev,
              ctypes.byref(flags), ctypes.byref(active))
    except CudaDriverError as e:
        return str(e)
    if flags.value & _SCHED_MASK != CU_CTX_SCHED_BLOCKING_SYNC:
        return (f"GPU {device}'s primary context kept its scheduling flags "
                f"({flags.value & _SCHED_MASK:#x}; active: {active.value})")
    return None


def _primary(device: int, load: Callable[[], Any]
             ) -> Tuple[Any, ctypes.c_void_p]:
    """The driver and GPU `device`'s primary context, retained once (for
    the process's life, as the runtime's own is)."""
    if device not in _PRIMARY:
        cuda = _load(load)
        dev, context = _device(cuda, device), ctypes.c_void_p()
        _call(cuda, device, "cuDevicePrimaryCtxRetain",
              ctypes.byref(context), dev)
        _PRIMARY[device] = (cuda, context)
    return _PRIMARY[device]


def _in_context(device: int, load: Callable[[], Any],
                work: Callable[[Any], Any]) -> Any:
    """work(driver) with `device`'s primary context current on this
    thread, popped after."""
    cuda, context = _primary(device, load)
    _call(cuda, device, "cuCtxPushCurrent", context)
    try:
        return work(cuda)
    finally:
        _call(cuda, device, "cuCtxPopCurrent",
              ctypes.byref(ctypes.c_void_p()))


def new_streams(device: int, count: int,
                load: Callable[[], Any] = _driver) -> List[int]:
    """`count` non-blocking streams on GPU `device`'s primary context (kept
    for the process's life, as the context is), as the integers
    nvImageCodec's cuda_stream takes. Raises CudaDriverError."""
    def make(cuda) -> List[int]:
        streams = []
        for _ in range(count):
            stream = ctypes.c_void_p()
            _call(cuda, device, "cuStreamCreate", ctypes.byref(stream),
                  CU_STREAM_NON_BLOCKING)
            streams.append(stream.value)
        return streams
    return _in_context(device, load, make)


def synchronize(device: int, stream: int,
                load: Callable[[], Any] = _driver) -> None:
    """Waits (the GIL released, as ctypes does) for all work on `stream`
    of GPU `device`. Raises CudaDriverError."""
    _in_context(device, load, lambda cuda: _call(
        cuda, device, "cuStreamSynchronize", ctypes.c_void_p(stream)))
