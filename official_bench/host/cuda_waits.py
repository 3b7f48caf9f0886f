"""How a process's CUDA threads wait for the GPU: block on a primitive
instead of spinning a core.

CUDA's default (CU_CTX_SCHED_AUTO) spins while a thread waits for the
GPU unless the process has more contexts than the machine has logical
CPUs; an input worker with one nvImageCodec decoder has one, so each of
its waits (the previous batch's event, every window's copy to the host)
holds a core busy. `block_waits` sets CU_CTX_SCHED_BLOCKING_SYNC on a
device's primary context, the one the CUDA runtime (and so nvImageCodec)
uses, through the driver library by ctypes: nothing to install. Call it
before the process's first CUDA call, as the flags of an active context
may not change on every driver. Not for a process where JAX runs: XLA
sets an inactive primary context's flags itself when it makes its
context, from TF_CUDA_PLATFORM_GPU_DEVICE_SCHEDULE (spin, yield,
blocking_sync; unset: CUDA's default), and only logs an active one's
that differ (openxla/xla, stream_executor/cuda/cuda_context.cc).
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Optional

CU_CTX_SCHED_BLOCKING_SYNC = 0x04
_SCHED_MASK = 0x07
LIBRARY = "libcuda.so.1"


def _driver() -> Any:
    return ctypes.CDLL(LIBRARY)


def _name(cuda: Any, code: int) -> str:
    """CUDA_ERROR_... for a CUresult, else the number."""
    text = ctypes.c_char_p()
    try:
        if cuda.cuGetErrorName(code, ctypes.byref(text)) == 0 and text.value:
            return text.value.decode()
    except AttributeError:
        pass
    return f"CUresult {code}"


def _set_flags(cuda: Any) -> Callable[..., int]:
    """The primary-context flags setter (its _v2 name since CUDA 11)."""
    try:
        return cuda.cuDevicePrimaryCtxSetFlags_v2
    except AttributeError:
        return cuda.cuDevicePrimaryCtxSetFlags


def block_waits(device: int, load: Callable[[], Any] = _driver
                ) -> Optional[str]:
    """Sets blocking-sync waits on GPU `device`'s primary context: None
    when set (and read back), else why not, in a line."""
    try:
        cuda = load()
    except OSError as e:
        return f"no CUDA driver library ({LIBRARY}: {e})"
    dev, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
    for what, call in (
            ("cuInit", lambda: cuda.cuInit(0)),
            ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(dev),
                                                     device)),
            ("cuDevicePrimaryCtxSetFlags", lambda: _set_flags(cuda)(
                dev, CU_CTX_SCHED_BLOCKING_SYNC)),
            ("cuDevicePrimaryCtxGetState", lambda: cuda
             .cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags),
                                         ctypes.byref(active)))):
        code = call()
        if code != 0:
            return (f"{what} failed on GPU {device}: {_name(cuda, code)}")
    if flags.value & _SCHED_MASK != CU_CTX_SCHED_BLOCKING_SYNC:
        return (f"GPU {device}'s primary context kept its scheduling flags "
                f"({flags.value & _SCHED_MASK:#x}; active: {active.value})")
    return None
