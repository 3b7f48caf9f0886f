"""runtime/tf_write_errors: which TensorFlow errors are a full disk (one
line) and which stay what they were; what a failed write leaves is removed."""

import errno
import os

import pytest

from official_bench.host.write_errors import NotWritable
from official_bench.runtime.keras_setup import tf
from official_bench.runtime.tf_write_errors import op_error_errno, tf_writing


def _exhausted(message):
    return tf.errors.ResourceExhaustedError(None, None, message)


def test_full_disk_from_tensorflow_is_one_line(tmp_path):
    target = str(tmp_path / "model.ckpt-0001")
    with pytest.raises(NotWritable) as info:
        with tf_writing(target, "a checkpoint"):
            raise _exhausted(f"{target}_temp/part-0; No space left on device")
    assert info.value.errno == errno.ENOSPC
    assert str(info.value).startswith(
        f"cannot write a checkpoint to {target}: no space left on the device")
    assert isinstance(info.value.__cause__, tf.errors.ResourceExhaustedError)


def test_out_of_memory_and_other_errors_pass_through(tmp_path):
    oom = _exhausted("OOM when allocating tensor with shape[64,2048]")
    with pytest.raises(tf.errors.ResourceExhaustedError) as info:
        with tf_writing(str(tmp_path), "a checkpoint"):
            raise oom
    assert info.value is oom
    gone = OSError(errno.ENOENT, "gone")
    with pytest.raises(OSError) as info:
        with tf_writing(str(tmp_path), "a checkpoint"):
            raise gone
    assert info.value is gone
    with pytest.raises(ValueError):
        with tf_writing(str(tmp_path), "a checkpoint"):
            raise ValueError("a bug")


def test_each_cause_is_read_from_the_message():
    assert op_error_errno(tf.errors.PermissionDeniedError(
        None, None, "/x/y; Permission denied")) == errno.EACCES
    assert op_error_errno(tf.errors.UnknownError(
        None, None, "/x/y; Read-only file system")) == errno.EROFS
    assert op_error_errno(_exhausted("OOM when allocating")) is None
    assert op_error_errno(OSError(errno.ENOSPC, "x")) is None


def test_oserror_from_a_python_write_too(tmp_path):
    with pytest.raises(NotWritable) as info:
        with tf_writing(str(tmp_path / "sm"), "the SavedModel"):
            raise OSError(errno.EROFS, "Read-only file system")
    assert "the file system is read-only" in str(info.value)


def test_failed_write_leaves_only_what_was_there(tmp_path):
    (tmp_path / "model.ckpt-0001.index").write_text("an earlier checkpoint")
    (tmp_path / "params.yaml").write_text("kept")
    with pytest.raises(NotWritable):
        with tf_writing(str(tmp_path), "a checkpoint",
                        cleanup_dir=str(tmp_path),
                        cleanup_prefixes=("model.ckpt-", "checkpoint")):
            os.makedirs(tmp_path / "model.ckpt-0002_temp")
            (tmp_path / "model.ckpt-0002_temp" / "part").write_text("x")
            (tmp_path / "checkpoint.tmp123").write_text("x")
            (tmp_path / "result.json").write_text("not ours to remove")
            raise _exhausted("No space left on device")
    assert sorted(os.listdir(tmp_path)) == [
        "model.ckpt-0001.index", "params.yaml", "result.json"]


def test_nothing_removed_on_success_or_on_another_error(tmp_path):
    with tf_writing(str(tmp_path), "x", cleanup_dir=str(tmp_path)):
        (tmp_path / "a").write_text("done")
    with pytest.raises(tf.errors.ResourceExhaustedError):
        with tf_writing(str(tmp_path), "x", cleanup_dir=str(tmp_path)):
            (tmp_path / "b").write_text("x")
            raise _exhausted("OOM when allocating")
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]
