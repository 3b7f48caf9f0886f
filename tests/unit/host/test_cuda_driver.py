"""host/cuda_driver.py against a stand-in for the CUDA driver's C API (no
GPU here): the calls in order with their arguments, the flags read back,
the streams made and waited for on the primary context (retained once),
and each way it cannot as one line. On a machine with a GPU the last
tests call the driver for real."""

import ctypes
import os
import subprocess
import sys

import pytest

from official_bench.host import cuda_driver
from support.helpers import REPO, cli_env

ON_GPU = os.path.exists("/dev/nvidiactl")


@pytest.fixture(autouse=True)
def no_context_yet(monkeypatch):
    monkeypatch.setattr(cuda_driver, "_PRIMARY", {})


class Driver:
    """libcuda's entry points, recording calls; `fail` maps a call's name
    to the CUresult it returns; GetState reads back `kept` flags where
    set, else what SetFlags set."""

    def __init__(self, fail=None, kept=None, v2=True):
        self.calls, self.fail, self.kept, self.flags = [], fail or {}, kept, 0
        self.streams = 0
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

    def cuDevicePrimaryCtxRetain(self, ref, dev):
        ref._obj.value = 0xC0
        return self._code("Retain", dev.value)

    def cuCtxPushCurrent_v2(self, context):
        return self._code("Push", context.value)

    def cuStreamCreate(self, ref, flags):
        self.streams += 1
        ref._obj.value = 0x500 + self.streams
        return self._code("StreamCreate", flags)

    def cuCtxPopCurrent_v2(self, ref):
        return self._code("Pop")

    def cuStreamSynchronize(self, stream):
        return self._code("Sync", stream.value)

    def cuGetErrorName(self, code, ref):
        ref._obj.value = {100: b"CUDA_ERROR_NO_DEVICE"}.get(code)
        return 0 if ref._obj.value else 1


def test_it_sets_blocking_sync_on_the_devices_primary_context():
    for v2 in (True, False):
        cuda = Driver(v2=v2)
        assert cuda_driver.block_waits(1, lambda: cuda) is None
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
    assert cuda_driver.block_waits(0, lambda: cuda) == line
    assert cuda.calls[-1][0] == (list(fail)[0])  # nothing after it


def test_flags_that_did_not_change_are_said():
    assert cuda_driver.block_waits(0, lambda: Driver(kept=0x01)) == (
        "GPU 0's primary context kept its scheduling flags (0x1; active: 0)")


def _missing():
    raise OSError("libcuda.so.1: cannot open shared object file")


def test_no_driver_library_is_one_line():
    line = ("no CUDA driver library (libcuda.so.1: libcuda.so.1: cannot "
            "open shared object file)")
    assert cuda_driver.block_waits(0, _missing) == line
    with pytest.raises(cuda_driver.CudaDriverError) as e:
        cuda_driver.new_streams(0, 2, _missing)
    assert str(e.value) == line


def test_streams_are_made_non_blocking_on_the_primary_context():
    cuda = Driver()
    assert cuda_driver.new_streams(2, 3, lambda: cuda) == [0x501, 0x502,
                                                          0x503]
    assert cuda.calls == [("cuInit", 0), ("cuDeviceGet", 2), ("Retain", 12),
                          ("Push", 0xC0)] + [("StreamCreate", 0x01)] * 3 + [
                              ("Pop",)]


def test_a_stream_is_waited_for_in_its_context_retained_once():
    cuda = Driver()
    cuda_driver.synchronize(1, 0x501, lambda: cuda)
    cuda_driver.synchronize(1, 0x502, lambda: cuda)
    assert cuda.calls == [("cuInit", 0), ("cuDeviceGet", 1), ("Retain", 11),
                          ("Push", 0xC0), ("Sync", 0x501), ("Pop",),
                          ("Push", 0xC0), ("Sync", 0x502), ("Pop",)]
    cuda.fail["Sync"] = 700
    with pytest.raises(cuda_driver.CudaDriverError) as e:
        cuda_driver.synchronize(1, 0x501, lambda: cuda)
    assert str(e.value) == "cuStreamSynchronize failed on GPU 1: CUresult 700"
    assert cuda.calls[-1] == ("Pop",)


class Without:
    """A driver lacking one entry point (an old one, say)."""

    def __init__(self, driver, name):
        self.driver, self.name = driver, name

    def __getattr__(self, symbol):
        if symbol.startswith(self.name):
            raise AttributeError(symbol)
        return getattr(self.driver, symbol)


def test_a_driver_without_an_entry_point_is_one_error():
    cuda = Driver()
    with pytest.raises(cuda_driver.CudaDriverError) as e:
        cuda_driver.synchronize(0, 0x501, lambda: Without(
            cuda, "cuStreamSynchronize"))
    assert str(e.value) == "the CUDA driver library has no cuStreamSynchronize"
    assert cuda.calls[-1] == ("Pop",)


def test_a_stream_that_cannot_be_made_is_one_error_and_pops_the_context():
    cuda = Driver(fail={"StreamCreate": 2})
    with pytest.raises(cuda_driver.CudaDriverError) as e:
        cuda_driver.new_streams(0, 3, lambda: cuda)
    assert str(e.value) == "cuStreamCreate failed on GPU 0: CUresult 2"
    assert cuda.calls[-2:] == [("StreamCreate", 0x01), ("Pop",)]


@pytest.mark.skipif(not ON_GPU, reason="no NVIDIA GPU here; the stand-in "
                                       "tests above cover the calls")
def test_on_a_gpu_the_driver_is_called_for_real():
    code = ("from official_bench.host import cuda_driver as c; "
            "w = c.block_waits(0); s = c.new_streams(0, 2); "
            "c.synchronize(0, s[1]); print(w, len(set(s)))")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                       env=cli_env(), capture_output=True, text=True,
                       timeout=60)
    assert p.stdout.strip() == "None 2", p.stdout + p.stderr


def test_the_real_driver_is_loaded_by_its_soname(monkeypatch):
    seen = []
    monkeypatch.setattr(ctypes, "CDLL", lambda name: seen.append(name) or
                        Driver())
    assert cuda_driver.block_waits(0) is None and seen == ["libcuda.so.1"]
