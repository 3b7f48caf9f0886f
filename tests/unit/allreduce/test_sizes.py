"""official-bench-allreduce --sizes: 0 bytes and sizes that are not whole
elements of a dtype are bad usage (0 was timed as 4 bytes, 3 as 4), and a
buffer TensorFlow cannot make is one line naming its size."""

import types

import pytest

from official_bench.allreduce import bandwidth, bench
from official_bench.config import ConfigError


@pytest.mark.parametrize("text", ["0", "0K", "0M"])
def test_zero_bytes_is_refused(text):
    with pytest.raises(ValueError, match=f"size '{text}' is 0 bytes"):
        bandwidth.parse_size(text)


def test_a_size_must_be_whole_elements_of_every_dtype():
    bench.check_sizes([bench.MODEL, 4096, 6], ["float16"])
    with pytest.raises(ConfigError) as e:
        bench.check_sizes([4096, 6], ["float16", "float32"])
    assert str(e.value) == (
        "--sizes: 6 bytes is not a whole number of float32 elements (4 bytes "
        "each); use a multiple of 4")


@pytest.mark.parametrize("error", ["ResourceExhaustedError",
                                   "InvalidArgumentError"])
def test_a_buffer_tensorflow_cannot_make_is_one_line(monkeypatch, error):
    from official_bench.runtime.keras_setup import tf
    message = "Cannot parse tensor from proto" if "Invalid" in error else \
        "OOM when allocating"

    def fails(*args):
        raise getattr(tf.errors, error)(None, None, message)
    monkeypatch.setattr(bench, "measure", fails)
    dist = types.SimpleNamespace(placement=types.SimpleNamespace(
        devices=["/device:CPU:0"]))
    with pytest.raises(bench.OutOfMemory) as e:
        bench._measure(dist, 1 << 36, "float32", 1, 0)
    assert str(e.value).startswith(
        "official_bench: --sizes: a buffer of 68719476736 bytes float32 "
        f"cannot be made on /device:CPU:0 (TensorFlow: {error}: ")


def test_other_invalid_arguments_are_not_hidden(monkeypatch):
    from official_bench.runtime.keras_setup import tf

    def fails(*args):
        raise tf.errors.InvalidArgumentError(None, None, "a bug")
    monkeypatch.setattr(bench, "measure", fails)
    with pytest.raises(tf.errors.InvalidArgumentError):
        bench._measure(types.SimpleNamespace(placement=None), 4, "float32",
                       1, 0)


def test_a_size_given_twice_is_timed_once_and_said_once():
    said = []
    assert bench.plan_sizes("model,1M,model,1048576,64K", said.append) == \
        [bench.MODEL, 1 << 20, 64 << 10]
    assert said == ["official_bench: --sizes 'model,1M,model,1048576,64K' "
                    "repeats model, 1048576; each size is timed once"]
    said.clear()
    assert bench.plan_sizes("model,1M", said.append) == [bench.MODEL,
                                                         1 << 20]
    assert said == []


def test_a_buffers_bytes_are_one_rule():
    # measure's result and _measure's error both read them from buffer().
    assert bench.buffer(1 << 20, "float16") == ([1 << 19], 1 << 20)
    assert bench.buffer([3, 5], "float32") == ([3, 5], 32)
