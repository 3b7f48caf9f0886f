"""The masked CRC-32C (data/records/checksum.py) is TFRecord's: it
matches the frames TensorFlow writes, for lengths and data, and the
compiled CRC is the one in use here (the `test` extra installs it)."""

import os
import struct

from official_bench.data.records import checksum
from official_bench.runtime.keras_setup import tf


def test_the_compiled_crc_is_in_use():
    import google_crc32c
    assert checksum.COMPILED
    assert checksum.crc32c is google_crc32c.value


def test_crc32c_check_value_both_ways():
    # The CRC-32C (Castagnoli) check value of "123456789".
    assert checksum.crc32c(b"123456789") == 0xE3069283
    assert checksum.python_crc32c(b"123456789") == 0xE3069283


def test_masked_crcs_match_the_frames_tensorflow_writes(tmp_path):
    path = str(tmp_path / "f")
    payloads = [b"", b"x", os.urandom(300), os.urandom(70000)]
    with tf.io.TFRecordWriter(path) as writer:
        for p in payloads:
            writer.write(p)
    data, offset = open(path, "rb").read(), 0
    for p in payloads:
        length, length_crc = struct.unpack_from("<QI", data, offset)
        assert length == len(p)
        assert checksum.masked_crc32c(data[offset:offset + 8]) == length_crc
        (data_crc,) = struct.unpack_from("<I", data, offset + 12 + length)
        assert checksum.masked_crc32c(p) == data_crc
        assert checksum.mask(checksum.python_crc32c(p)) == data_crc
        offset += 16 + length
    assert offset == len(data)


def test_frames_are_what_tensorflows_writer_writes(tmp_path):
    from official_bench.data.records.framing import frame
    path = str(tmp_path / "f")
    payloads = [b"", b"abc", os.urandom(5000)]
    with tf.io.TFRecordWriter(path) as writer:
        for p in payloads:
            writer.write(p)
    assert b"".join(frame(p) for p in payloads) == open(path, "rb").read()
