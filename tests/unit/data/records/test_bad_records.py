"""Section 6: bad data -> an error naming the file, or skipped and counted.

Every iteration runs in a daemon thread with a deadline, so a regression
that makes the pipeline hang fails the test instead of stalling the run.
"""

import json
import logging
import os
import re
import threading

import pytest

from official_bench.config import DatasetConfig
from official_bench.data.build.example_proto import classic_example
from official_bench.data.build.record_verify import check_records
from official_bench.data.records import bad_records, pipeline, record_reader
from official_bench.data.records.record_files import (
    CLASSIC_LAYOUT,
    classic_files,
)
from official_bench.runtime.keras_setup import tf
from support.records import train_on_records

CTX = tf.distribute.InputContext()
DEADLINE = 60


def jpeg(value=0):
    return tf.io.encode_jpeg(tf.fill([8, 8, 3], tf.constant(
        value, tf.uint8))).numpy()


def write(path, items):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for item in items:
            writer.write(item)
    return str(path)


def good(n, label=1):
    return [classic_example(jpeg(10 * i), label, 8, 8) for i in range(n)]


def collect(dataset):
    """All labels of a finite dataset, or the exception; fails on a hang."""
    out = {}

    def run():
        try:
            out["labels"] = [int(y) for _, ys in dataset.as_numpy_iterator()
                             for y in ys]
        except Exception as e:  # noqa: BLE001 - handed to the test
            out["error"] = e
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert not thread.is_alive(), "the input pipeline hangs"
    return out


def build(data_dir, skip, training=False, skipped=None, **kw):
    ds = DatasetConfig(data_dir=str(data_dir), split="train", image_size=8,
                       num_classes=3, batch_size=1, one_hot=False,
                       skip_bad_records=skip, shuffle_buffer_size=1, **kw)
    data = pipeline.records_dataset(ds, CTX, 1, training, 0, skipped=skipped)
    return data.take(200) if training else data


def bad_tree(root):
    """Three files: an undecodable image, a non-Example record and a label
    out of range in the first; a truncated second; a clean third."""
    os.makedirs(root, exist_ok=True)
    write(os.path.join(root, "train-00000-of-00003"), [
        classic_example(jpeg(), 1, 8, 8),
        classic_example(b"definitely not a jpeg", 2, 8, 8),
        b"not a tf.train.Example",
        classic_example(jpeg(), 9, 8, 8),
        classic_example(jpeg(), 3, 8, 8)])
    truncated = write(os.path.join(root, "train-00001-of-00003"), good(3))
    data = open(truncated, "rb").read()
    with open(truncated, "wb") as f:
        f.write(data[:-10])
    write(os.path.join(root, "train-00002-of-00003"), good(2, label=2))
    return str(root)


@pytest.mark.parametrize("make,where,why,hint", [
    (lambda: [classic_example(b"\xff\xd8garbage", 1, 8, 8)],
     "record 0", r"image/encoded \(9 bytes\) cannot be decoded", True),
    (lambda: [b"\x00\x01\x02"], "record 0",
     "not a tf.train.Example", True),
    (lambda: good(2) + [classic_example(jpeg(), 7, 8, 8)], "record 2",
     r"label 7 is outside 1\.\.3", True),
    # just outside: the offset is likely wrong (test_label_problems.py)
    (lambda: good(2) + [classic_example(jpeg(), 0, 8, 8)], "record 2",
     r"label 0 is outside 1\.\.3 .*set label_offset: 0", False),
])
def test_strict_error_names_file_record_and_reason(tmp_path, make, where,
                                                   why, hint):
    path = write(tmp_path / "train-00000-of-00001", make())
    out = collect(build(tmp_path, skip=False))
    assert "error" in out, out
    message = str(out["error"])
    assert f"bad {where} in {path}" in message
    assert re.search(why, message), message
    assert ("skip_bad_records: true" in message) == hint


def test_strict_corrupt_record_names_the_file(tmp_path):
    path = write(tmp_path / "train-00000-of-00001", good(4))
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF  # inside record 1 or 2: its CRC fails
    with open(path, "wb") as f:
        f.write(bytes(data))
    out = collect(build(tmp_path, skip=False))
    message = str(out.get("error"))
    assert path in message and "corrupt or truncated TFRecord" in message
    assert "could be read" in message


def test_strict_training_pipeline_also_stops(tmp_path):
    bad_tree(tmp_path)
    out = collect(build(tmp_path, skip=False, training=True))
    assert "error" in out
    assert "official_bench: bad record" in str(out["error"])
    assert str(tmp_path) in str(out["error"])


def test_skip_drops_and_counts_every_kind(tmp_path, caplog):
    bad_tree(tmp_path)
    skipped = bad_records.SkippedRecords()
    caplog.set_level(logging.WARNING)
    out = collect(build(tmp_path, skip=True, skipped=skipped))
    assert "error" not in out, out.get("error")
    # Good: 2 in file 0 (labels 1, 3), 2 read from the truncated file, 2.
    assert sorted(out["labels"]) == [0, 0, 0, 1, 1, 2]
    assert skipped.count("train") == 4 and skipped.count() == 4
    text = caplog.text
    assert text.count("skipped (skip_bad_records: true)") == 4
    assert "4 bad record(s) skipped in train so far" in text
    for why in ("cannot be decoded", "not a tf.train.Example",
                "label 9 is outside", "corrupt or truncated"):
        assert why in text
    assert "train-00001-of-00003" in text


def test_skip_in_training_keeps_going_without_hanging(tmp_path):
    bad_tree(tmp_path)
    skipped = bad_records.SkippedRecords()
    out = collect(build(tmp_path, skip=True, training=True, skipped=skipped))
    assert len(out["labels"]) == 200
    assert skipped.count("train") >= 4  # each epoch counts again


def test_each_pipeline_counts_its_own_skips(tmp_path, caplog):
    """The count belongs to the pipeline: a second pipeline in the same
    process (a second run in a notebook) starts from zero."""
    bad_tree(tmp_path)
    caplog.set_level(logging.WARNING)
    first, second = bad_records.SkippedRecords(), bad_records.SkippedRecords()
    collect(build(tmp_path, skip=True, skipped=first))
    caplog.clear()
    collect(build(tmp_path, skip=True, skipped=second))
    assert first.count("train") == 4 and second.count("train") == 4
    assert "4 bad record(s) skipped in train so far" in caplog.text
    assert "8 bad record(s)" not in caplog.text


def test_all_records_bad_skip_ends_instead_of_hanging(tmp_path):
    write(tmp_path / "train-00000-of-00001",
          [classic_example(b"x", 1, 8, 8)] * 3)
    out = collect(build(tmp_path, skip=True))
    assert out["labels"] == []


@pytest.mark.parametrize("skip", [True, False])
def test_a_file_gone_since_it_was_listed_is_a_bad_file(tmp_path, skip):
    """Its size could not be read (tf.io.gfile.stat), which stopped the
    run with TensorFlow's NotFoundError even with skip_bad_records."""
    path = write(tmp_path / "train-00000-of-00002", good(2, label=2))
    gone = str(tmp_path / "train-00001-of-00002")
    ds = DatasetConfig(data_dir=str(tmp_path), split="train", image_size=8,
                       num_classes=3, one_hot=False, skip_bad_records=skip,
                       shuffle_buffer_size=1)
    skipped = bad_records.SkippedRecords()
    out = collect(pipeline.build_dataset(
        [path, gone], CLASSIC_LAYOUT, ds, CTX, 1, False, 0,
        skipped=skipped))
    line = (f"official_bench: bad record 0 in {gone}: the file cannot be "
            "read (listed, then gone when its size was read)")
    if skip:
        assert out.get("labels") == [1, 1] and skipped.count("train") == 1
    else:
        assert line in str(out.get("error")), out


def test_check_records_reports_everything_in_file_order(tmp_path):
    root = bad_tree(tmp_path)
    got = list(check_records(classic_files(root, "train"), num_classes=3))
    bad = {(os.path.basename(f), i): s for f, i, s, _ in got
           if s != record_reader.OK}
    assert bad == {
        ("train-00000-of-00003", 1): record_reader.BAD_IMAGE,
        ("train-00000-of-00003", 2): record_reader.BAD_EXAMPLE,
        ("train-00000-of-00003", 3): record_reader.BAD_LABEL,
        ("train-00001-of-00003", 2): record_reader.CORRUPT_FILE,
    }
    assert sum(1 for *_, s, _ in got if s == record_reader.OK) == 6


def test_training_cli_stops_at_the_named_bad_record(tmp_path):
    """Through the trainer: a short run (fewer records than one guard block)
    must still fail on the bad record, naming it."""
    for split in ("train", "validation"):
        write(tmp_path / f"{split}-00000-of-00001", [
            classic_example(b"junk" if (split == "train" and i == 7)
                            else jpeg(), 1 + i % 2, 8, 8) for i in range(20)])
    proc = train_on_records(tmp_path, tmp_path / "model", batch=4,
                            examples=20, shuffle=1)
    assert proc.returncode == 1
    assert (f"official_bench: bad record 7 in {tmp_path}/train-00000-of-00001"
            ": image/encoded (4 bytes) cannot be decoded") in proc.stderr
    # The CLI ends with that line, not only inside TensorFlow's traceback.
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: official_bench: bad record 7 in ")


def test_a_training_run_that_skips_says_how_many_in_result_json(tmp_path):
    """Through the trainer with skip_bad_records: the run trains on, and
    result.json's records_skipped holds a count the log's "so far" lines
    gave (the pipeline may read ahead and skip more after the count is
    taken), with a warning for the extractor. A block's bad records are
    reported at the block's end (32 records): 40 images in a fixed order
    pass the first block's end, whose record 0 is bad."""
    for split in ("train", "validation"):
        write(tmp_path / f"{split}-00000-of-00001", [
            classic_example(b"junk" if (split == "train" and i == 0)
                            else jpeg(), 1 + i % 2, 8, 8) for i in range(40)])
    proc = train_on_records(tmp_path, tmp_path / "model", batch=4,
                            examples=40, shuffle=1, skip_bad_records=True,
                            deterministic=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    so_far = [int(n) for n in re.findall(
        r"official_bench: (\d+) bad record\(s\) skipped in train so far",
        proc.stderr)]
    record = json.loads((tmp_path / "model" / "result.json").read_text())
    count = record["records_skipped"]["train"]
    assert count >= 1 and count in so_far, (count, so_far)
    assert record["warnings"] == [
        f"{count} bad record(s) skipped in train (skip_bad_records: "
        "true): the run read the rest"]


@pytest.mark.parametrize("records", [
    lambda: [classic_example(b"x", 1, 8, 8)] * 3,  # undecodable images
    lambda: [classic_example(jpeg(), 9, 8, 8)] * 40,  # labels out of range
])
def test_all_records_bad_skip_stops_a_training_pipeline(tmp_path, records):
    """A training pipeline repeats: skipping every record went on forever.
    It stops once it has skipped all of its share with no good record."""
    path = write(tmp_path / "train-00000-of-00001", records())
    out = collect(build(tmp_path, skip=True, training=True))
    message = str(out.get("error"))
    count = len(records())
    assert (f"official_bench: train_dataset: the input pipeline skipped all "
            f"{count} record(s) of its share as bad (skip_bad_records: true)"
            " and can make no batch; the last: official_bench: bad record "
            ) in message, out
    assert path in message


def test_bad_run_needs_every_record_of_the_share():
    counted = []
    run = bad_records.BadRun("train_dataset", lambda: counted.append(1) or 3)
    assert run.skipped([("f", 0), ("f", 1)], "l") == ""
    assert not counted  # short runs are not counted
    run.good(1)  # a good record ends the run
    assert run.skipped([("f", 1), ("f", 2)], "l") == ""
    assert run.skipped([("f", 1)], "l") == ""  # seen again: counted
    assert counted == [1]
    assert "skipped all 3 record(s)" in run.skipped([("f", 0)], "last")
    assert bad_records.share_records([], 1, 0) == 0
