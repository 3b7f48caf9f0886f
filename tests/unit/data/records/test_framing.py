"""The framing walk (data/records/framing.py) on files TensorFlow wrote:
whole files pass (so the CRC-32C is TFRecord's), every cut or damaged
header is found with the reader's words, and FileCheck checks a set of
files in its thread."""

import os
import threading

import pytest

from official_bench.data.records import framing
from official_bench.runtime.keras_setup import tf


def write(path, sizes):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i, n in enumerate(sizes):
            writer.write(bytes([i % 251]) * n)
    return str(path)


def check(path):
    return framing.check_file(path, os.path.getsize(path))


def test_masked_crc_matches_tensorflow_frames(tmp_path):
    path = write(tmp_path / "f", [0, 1, 300, 70000])
    data = open(path, "rb").read()
    length = data[:8]
    assert framing.masked_crc32c(length) == int.from_bytes(data[8:12],
                                                           "little")
    assert check(path) is None
    assert framing.count_records(path) == 4


def test_an_empty_file_is_whole(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert check(str(path)) is None


@pytest.mark.parametrize("cut,index", [
    (1, 3),        # the last data CRC cut (frames: 26, 26, 26, 21 bytes)
    (10, 3),       # inside the last record's data
    (16, 3),       # inside the last record's header
    (21 + 10, 2),  # inside the third record
])
def test_a_cut_names_the_first_incomplete_record(tmp_path, cut, index):
    path = write(tmp_path / "train-00000-of-00001", [10, 10, 10, 5])
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:len(data) - cut])
    problem = check(path)
    assert framing.count_records(path) == index  # the whole ones
    whole = 26 * index
    assert problem == framing.Problem(
        path, index, "corrupt or truncated TFRecord data: only the first "
        f"{index} record(s) ({whole} of {len(data) - cut} bytes) could be "
        "read")
    assert problem.line().startswith(f"official_bench: bad record {index} in "
                                     f"{path}: corrupt or truncated")


def test_a_damaged_length_fails_its_checksum(tmp_path):
    path = write(tmp_path / "f", [10, 10])
    data = bytearray(open(path, "rb").read())
    data[26] ^= 0x01  # the second record's length: 11 instead of 10
    open(path, "wb").write(bytes(data))
    problem = check(path)
    assert problem.index == 1
    assert problem.detail.endswith("the length of record 1 fails its "
                                   "checksum")


def test_file_check_reports_only_the_bad_files_and_waits(tmp_path):
    good = [write(tmp_path / f"g{i}", [50] * 20) for i in range(3)]
    bad = write(tmp_path / "bad", [50] * 20)
    with open(bad, "r+b") as f:
        f.truncate(os.path.getsize(bad) // 2 + 7)
    files = good[:2] + [bad, str(tmp_path / "gone")] + good[2:]
    sizes = [os.path.getsize(f) if os.path.exists(f) else 100 for f in files]
    check = framing.FileCheck(files, sizes)
    problems = check.wait()
    assert check.done and check.checked == len(files)
    assert [p.filename for p in problems] == [bad, str(tmp_path / "gone")]
    assert problems[0].index == 10  # 20 records of 66 bytes, cut at 667
    assert "cannot be read" in problems[1].detail


def test_file_check_names_a_file_gone_before_its_size_was_read(tmp_path):
    """record_sets.file_sizes gives GONE_SIZE for it: the check reports it
    in the readers' words."""
    from official_bench.data.records import record_sets
    gone = str(tmp_path / "train-00000-of-00001")
    check = framing.FileCheck([gone], record_sets.file_sizes([gone]))
    assert [p.line() for p in check.wait()] == [
        f"official_bench: bad record 0 in {gone}: the file cannot be read "
        "(listed, then gone when its size was read)"]


def test_wait_says_how_far_it_got_while_it_runs(tmp_path):
    path = write(tmp_path / "f", [10])
    release = threading.Event()
    lines = []

    def slow_open(p, mode):  # holds the thread until two lines were said
        release.wait(10)
        return open(p, mode)
    check = framing.FileCheck(["mem://" + path], [os.path.getsize(path)],
                              opener=lambda p, m: slow_open(p[6:], m))

    def progress(line):
        lines.append(line)
        if len(lines) == 2:
            release.set()
    assert check.wait(progress=progress, every=0.05) == []
    assert lines[0].startswith("checking record files: 0 of 1 checked")
