"""jax_backend/keras3.py: what is missing, a Keras 3 already running
another backend, the CPU device count asked of XLA. All in this process,
without importing JAX or Keras 3 here (each case stops before that)."""

import builtins
import importlib.machinery
import sys
import types

import pytest

from official_bench.jax_backend import keras3


def _no_import(monkeypatch):
    """Fails the test if load() goes on to import JAX or Keras 3 here."""
    real_import = builtins.__import__

    def guarded(name, *args, **kwargs):
        if name.split(".")[0] in ("jax", "keras") and \
                name.split(".")[0] not in sys.modules:
            raise AssertionError(f"load() imported {name} before refusing")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr("builtins.__import__", guarded)


def test_nothing_is_missing_here():
    assert keras3.missing_modules() == {}


def test_a_missing_module_is_named_with_its_pip_package(monkeypatch):
    real = keras3.importlib.util.find_spec
    monkeypatch.setattr(keras3.importlib.util, "find_spec",
                        lambda m, *a: None if m == "keras" else real(m, *a))
    assert keras3.missing_modules() == {"keras": "keras"}
    _no_import(monkeypatch)
    with pytest.raises(keras3.BackendError) as e:
        keras3.load(0, environ={})
    text = str(e.value)
    assert "runtime.backend jax needs keras (pip keras)" in text
    assert "jax (pip" not in text
    assert "pip install -e '.[jax]'" in text


def _keras_running(backend):
    """A stand-in for an imported Keras 3 that runs `backend`."""
    keras = types.ModuleType("keras")
    keras.__spec__ = importlib.machinery.ModuleSpec("keras", None)
    keras.backend = types.SimpleNamespace(backend=lambda: backend)
    return keras


def test_keras_already_on_another_backend_is_one_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "keras", _keras_running("tensorflow"))
    _no_import(monkeypatch)
    environ = {}
    with pytest.raises(keras3.BackendError) as e:
        keras3.load(0, environ=environ)
    text = str(e.value)
    assert "already imported with the 'tensorflow' backend" in text
    assert "fresh process" in text and "KERAS_BACKEND=jax" in text
    assert "KERAS_BACKEND" not in environ  # refused before changing it


def test_keras_backend_variable_for_another_backend_is_refused(monkeypatch):
    """Keras imported on jax but KERAS_BACKEND now says otherwise: a
    process that would build on two backends is refused, by name."""
    monkeypatch.setitem(sys.modules, "keras", _keras_running("jax"))
    with pytest.raises(keras3.BackendError,
                       match="KERAS_BACKEND is 'torch' in this process"):
        keras3.load(0, environ={"KERAS_BACKEND": "torch"})


def test_cpu_device_count_goes_into_xla_flags():
    environ = {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}
    keras3._set_cpu_device_count(environ, 4)
    assert environ["XLA_FLAGS"] == (
        "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=4")
    # A count already there wins (the process may have started JAX with it).
    keras3._set_cpu_device_count(environ, 2)
    assert environ["XLA_FLAGS"].count("device_count") == 1
    fresh = {}
    keras3._set_cpu_device_count(fresh, 2)
    assert fresh == {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
