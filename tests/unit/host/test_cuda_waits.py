"""host/cuda_waits.py against a stand-in for the CUDA driver's C API (no
GPU here): the calls in order with their arguments, the flags read back,
and each way it cannot set them as one line. On a machine with a GPU the
last test sets them for real."""

import ctypes
import os
import subprocess
import sys

import pytest

from official_bench.host import cuda_waits
from support.helpers import REPO, cli_env


class Driver:
    """libcuda's five entry points, recording calls; `fail` maps a call's
    name to the CUresult it returns; GetState reads back `kept` flags
    where set, else what SetFlags set."""

    def __init__(self, fail=None, kept=None, v2=True):
        self.calls, self.fail, self.kept, self.flags = [], fail or {}, kept, 0
        if not v2:
            self.cuDevicePrimaryCtxSetFlags = self._set
        else:
            self.cuDevicePrimaryCtxSetFlags_v2 = self._set

    def _code(self, name, *args):
        self.calls.append((name,) + args)
        return self.fail.get(name, 0)

    def cuInit(self, flags):
        return self._code("cuInit", flags)

    def cuDeviceGet(self, ref, ordinal):
        ref._obj.value = 10 + ordinal  # a handle other than the ordinal
        return self._code("cuDeviceGet", ordinal)

    def _set(self, dev, flags):
        self.flags = flags
        return self._code("SetFlags", dev.value, flags)

    def cuDevicePrimaryCtxGetState(self, dev, flags, active):
        flags._obj.value = self.flags if self.kept is None else self.kept
        active._obj.value = 0
        return self._code("GetState", dev.value)

    def cuGetErrorName(self, code, ref):
        ref._obj.value = {100: b"CUDA_ERROR_NO_DEVICE"}.get(code)
        return 0 if ref._obj.value else 1


def test_it_sets_blocking_sync_on_the_devices_primary_context():
    for v2 in (True, False):
        cuda = Driver(v2=v2)
        assert cuda_waits.block_waits(1, lambda: cuda) is None
        assert cuda.calls == [("cuInit", 0), ("cuDeviceGet", 1),
                              ("SetFlags", 11, 0x04), ("GetState", 11)]


@pytest.mark.parametrize("fail, line", [
    ({"cuInit": 100}, "cuInit failed on GPU 0: CUDA_ERROR_NO_DEVICE"),
    ({"cuDeviceGet": 101}, "cuDeviceGet failed on GPU 0: CUresult 101"),
    ({"SetFlags": 708},
     "cuDevicePrimaryCtxSetFlags failed on GPU 0: CUresult 708"),
])
def test_a_failing_call_is_named_in_one_line(fail, line):
    cuda = Driver(fail=fail)
    assert cuda_waits.block_waits(0, lambda: cuda) == line
    assert cuda.calls[-1][0] == (list(fail)[0])  # nothing after it


def test_flags_that_did_not_change_are_said():
    assert cuda_waits.block_waits(0, lambda: Driver(kept=0x01)) == (
        "GPU 0's primary context kept its scheduling flags (0x1; active: 0)")


def test_no_driver_library_is_one_line():
    def missing():
        raise OSError("libcuda.so.1: cannot open shared object file")
    assert cuda_waits.block_waits(0, missing) == (
        "no CUDA driver library (libcuda.so.1: libcuda.so.1: cannot open "
        "shared object file)")


@pytest.mark.skipif(not os.path.exists("/dev/nvidiactl"),
                    reason="no NVIDIA GPU here; the stand-in tests above "
                           "cover the calls")
def test_on_a_gpu_the_flags_are_set_for_real():
    code = ("from official_bench.host import cuda_waits; "
            "print(cuda_waits.block_waits(0))")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                       env=cli_env(), capture_output=True, text=True,
                       timeout=60)
    assert p.stdout.strip() == "None", p.stdout + p.stderr


def test_the_real_driver_is_loaded_by_its_soname(monkeypatch):
    seen = []
    monkeypatch.setattr(ctypes, "CDLL", lambda name: seen.append(name) or
                        Driver())
    assert cuda_waits.block_waits(0) is None and seen == ["libcuda.so.1"]
