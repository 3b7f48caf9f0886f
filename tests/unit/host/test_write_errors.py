"""host/write_errors: which OSErrors become one user-facing line."""

import errno

import pytest

from official_bench.host import write_errors


def test_full_disk_names_path_what_and_free_space(tmp_path):
    target = str(tmp_path / "out" / "result.json")
    with pytest.raises(write_errors.NotWritable) as info:
        with write_errors.writing(target, "the result JSON"):
            raise OSError(errno.ENOSPC, "No space left on device")
    message = str(info.value)
    assert message.startswith(f"cannot write the result JSON to {target}: "
                              "no space left on the device (")
    assert "free there)" in message
    assert info.value.errno == errno.ENOSPC


def test_a_file_in_a_folders_place_is_one_line(tmp_path):
    """A real open() under a file (ENOTDIR) and onto a folder (EISDIR):
    the line names the path and the cause, no free space."""
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the log folder goes")
    for target, cause in (
            (blocker / "run1" / "train.log",
             "a part of the path is a file, not a folder"),
            (tmp_path, "a folder is in the file's place")):
        with pytest.raises(write_errors.NotWritable) as info:
            with write_errors.writing(str(target), "the log"):
                open(target, "w").close()
        assert str(info.value) == f"cannot write the log to {target}: {cause}"


def test_other_errors_pass_through_unchanged(tmp_path):
    original = OSError(errno.ENOENT, "gone")
    with pytest.raises(OSError) as info:
        with write_errors.writing(str(tmp_path), "a log"):
            raise original
    assert info.value is original


def test_human_bytes():
    assert write_errors.human_bytes(512) == "512 B"
    assert write_errors.human_bytes(3 * 1024 ** 2) == "3.0 MiB"
