"""The TensorFlow-free reader (data/records/host_reader.py) yields the
records tf.data.TFRecordDataset yields, and ends a damaged file where the
TensorFlow pipeline's reader (record_reader.read_file) ends it, with the
same words: cut frames, a failed length or data checksum, a file that is
gone."""

import os

import pytest

from official_bench.data.records import host_reader, record_reader
from official_bench.data.records.framing import Problem
from official_bench.runtime.keras_setup import tf


def write(path, payloads):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for p in payloads:
            writer.write(p)
    return str(path)


PAYLOADS = [bytes([i]) * (1 + 37 * i) for i in range(6)]


def ours(path, size=None):
    size = os.path.getsize(path) if size is None else size
    return list(host_reader.read_file(path, size))


def tensorflows(path, size):
    """(records, the CORRUPT_FILE detail or None) of the TF pipeline's
    reader."""
    records, detail = [], None
    for _, index, record, status, why in record_reader.read_file(
            tf.constant(path), tf.constant(size, tf.int64)
            ).as_numpy_iterator():
        if status == record_reader.OK:
            records.append(record)
        else:
            detail = (int(index), why.decode())
    return records, detail


def split(items):
    """(records, (index, detail) of the Problem or None)."""
    records = [i[2] for i in items if not isinstance(i, Problem)]
    problems = [(p.index, p.detail) for p in items if isinstance(p, Problem)]
    return records, (problems[0] if problems else None)


def test_a_whole_file_reads_as_tensorflow_reads_it(tmp_path):
    path = write(tmp_path / "f", PAYLOADS)
    items = ours(path)
    assert [(f, i) for f, i, _ in items] == [(path, i) for i in range(6)]
    assert split(items) == (PAYLOADS, None)
    assert split(items) == tensorflows(path, os.path.getsize(path))


def test_an_empty_file_has_no_records_and_no_problem(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert ours(str(path)) == []


def damage(path, how):
    data = bytearray(open(path, "rb").read())
    if how == "cut in the last data":
        data = data[:-10]
    elif how == "cut in a header":
        data = data[:sum(16 + len(p) for p in PAYLOADS[:3]) + 5]
    elif how == "data checksum":
        data[sum(16 + len(p) for p in PAYLOADS[:2]) + 12] ^= 0x40
    elif how == "length checksum":
        data[sum(16 + len(p) for p in PAYLOADS[:4]) + 9] ^= 0x01
    elif how == "first record's data":
        data[13] ^= 0x01
    elif how == "not a TFRecord":
        data = bytearray(b"PK\x03\x04" + bytes(200))
    with open(path, "wb") as f:
        f.write(bytes(data))


@pytest.mark.parametrize("how,index", [
    ("cut in the last data", 5), ("cut in a header", 3),
    ("data checksum", 2), ("length checksum", 4),
    ("first record's data", 0), ("not a TFRecord", 0)])
def test_a_damaged_file_ends_where_and_as_tensorflow_ends_it(tmp_path, how,
                                                             index):
    path = write(tmp_path / "train-00000-of-00001", PAYLOADS)
    damage(path, how)
    size = os.path.getsize(path)
    records, problem = split(ours(path, size))
    assert records == PAYLOADS[:index]
    assert problem[0] == index
    assert (records, problem) == tensorflows(path, size)
    assert ("could be read" if index else "cannot be read") in problem[1]


def test_a_file_gone_since_its_size_was_taken(tmp_path):
    path = write(tmp_path / "f", PAYLOADS)
    size = os.path.getsize(path)
    os.remove(path)
    [problem] = ours(path, size)
    assert problem == Problem(path, 0, (
        "the file cannot be read (missing, unreadable, or not TFRecord data "
        f"from its first record; {size} bytes expected)"))
    assert split([problem]) == tensorflows(path, size)


def test_interleave_takes_one_from_each_file_in_turn(tmp_path):
    files = [write(tmp_path / f"f{n}", [b"%d-%d" % (n, i)
                                        for i in range(n + 1)])
             for n in range(4)]
    sizes = [os.path.getsize(f) for f in files]
    got = [data.decode() for _, _, data in
           host_reader.interleave(files, sizes, cycle=2)]
    # f0 (1 record) and f1 first; f2 takes f0's place, then f3 f1's.
    assert got == ["0-0", "1-0", "2-0", "1-1", "2-1", "3-0", "2-2", "3-1",
                   "3-2", "3-3"]
    assert sorted(got) == sorted(data.decode() for _, _, data in
                                 host_reader.interleave(files, sizes))
