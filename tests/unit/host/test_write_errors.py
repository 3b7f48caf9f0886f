"""host/write_errors: which OSErrors become one user-facing line."""

import errno
import os

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


def test_a_broken_link_on_the_way_is_one_line(tmp_path):
    """A real makedirs under a dangling link (ENOENT, e.g. a scratch link
    whose target is not mounted) names the link, as the launcher does; a
    plain ENOENT stays as it was (above)."""
    link = tmp_path / "scratch"
    link.symlink_to(tmp_path / "not-mounted")
    target = link / "run" / "params.yaml"
    with pytest.raises(write_errors.NotWritable) as info:
        with write_errors.writing(str(target), "the run's configuration"):
            os.makedirs(target.parent, exist_ok=True)
    assert str(info.value) == (
        f"cannot write the run's configuration to {target}: {link} is a "
        f"broken symbolic link (to {tmp_path / 'not-mounted'})")
    assert info.value.errno == errno.ENOENT


def test_check_folder_finds_a_broken_link_or_a_file_without_writing(
        tmp_path):
    link = tmp_path / "scratch"
    link.symlink_to(tmp_path / "gone")
    blocker = tmp_path / "afile"
    blocker.write_text("")
    for folder, cause in ((link / "md", f"{link} is a broken symbolic link "
                                        f"(to {tmp_path / 'gone'})"),
                          (link, f"{link} is a broken symbolic link "
                                 f"(to {tmp_path / 'gone'})"),
                          (blocker / "md",
                           "a part of the path is a file, not a folder")):
        with pytest.raises(write_errors.NotWritable) as info:
            write_errors.check_folder(str(folder), "the run's files")
        assert str(info.value) == \
            f"cannot write the run's files to {folder}: {cause}"
    write_errors.check_folder(str(tmp_path / "new" / "md"), "the run's files")
    assert sorted(os.listdir(tmp_path)) == ["afile", "scratch"]


PROC = pytest.mark.skipif(not os.path.isfile(write_errors.MOUNTS),
                          reason="no /proc mount table (not Linux)")


@PROC
def test_proc_takes_no_folder_and_says_so(tmp_path):
    """/proc answers mkdir with ENOENT (and /sys with EPERM): a real
    makedirs there is one line naming the kernel file system, and
    check_folder finds it without writing."""
    target = "/proc/x/run/params.yaml"
    with pytest.raises(write_errors.NotWritable) as info:
        with write_errors.writing(target, "the run's configuration"):
            os.makedirs(os.path.dirname(target), exist_ok=True)
    assert str(info.value) == (
        f"cannot write the run's configuration to {target}: /proc is on the "
        "kernel's proc file system, which takes no new files or folders")
    for folder, near, kind in (("/proc/x/run", "/proc", "proc"),
                               ("/proc/self/y", "/proc/self", "proc"),
                               ("/proc", "/proc", "proc"),
                               ("/sys/x", "/sys", "sysfs")):
        if not os.path.isdir(near):
            continue
        with pytest.raises(write_errors.NotWritable) as info:
            write_errors.check_folder(folder, "the run's files")
        assert str(info.value) == (
            f"cannot write the run's files to {folder}: {near} is on the "
            f"kernel's {kind} file system, which takes no new files or "
            "folders")
    assert write_errors.refuses_entries(str(tmp_path / "new")) is None


def test_file_system_type_reads_the_mount_table(tmp_path):
    """The longest mount point above the path, the later of two at one
    point, with the table's octal escapes undone; None without a table."""
    spaced = tmp_path / "a b"
    (spaced / "deep").mkdir(parents=True)
    mounts = tmp_path / "mounts"
    escaped = str(spaced).replace(" ", "\\040")
    mounts.write_text(f"rootfs / ext4 rw 0 0\n"
                      f"tmpfs {escaped} tmpfs rw 0 0\n"
                      f"proc {escaped} proc rw 0 0\n"
                      "short line\n")
    assert write_errors.file_system_type(str(spaced / "deep"),
                                         str(mounts)) == "proc"
    assert write_errors.file_system_type(str(tmp_path), str(mounts)) == \
        "ext4"
    assert write_errors.refuses_entries(str(spaced / "deep" / "x"),
                                        str(mounts)) == (
        f"{spaced / 'deep'} is on the kernel's proc file system, which "
        "takes no new files or folders")
    assert write_errors.file_system_type(
        str(tmp_path), str(tmp_path / "none")) is None
