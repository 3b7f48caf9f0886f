"""Issue 40's battery: two train shards, one cut in half, 30 steps. The
answer no longer depends on whether the reader reached the cut, or its
report came out of the shuffle buffer, before the run ended: the framing
check (data/records/file_check.py) gives it in every run. Here the cut
lies beyond what 30 steps read, so only the check can find it."""

import logging
import os
import re

import pytest

from official_bench.config import DatasetConfig
from official_bench.data.build.example_proto import classic_example
from official_bench.data.records import file_check, pipeline
from official_bench.runtime.keras_setup import tf
from support.records import train_on_records

RECORDS = 64  # per shard; the cut one has CUT_RECORDS, cut after half
CUT_RECORDS = 512
STEPS, BATCH, SHUFFLE = 30, 4, 64  # ~180 records read, ~90 of each shard


def battery(root):
    """Two classic train shards (and one validation shard); the second
    train shard cut in half, inside a record."""
    os.makedirs(root, exist_ok=True)
    image = tf.io.encode_jpeg(tf.zeros([8, 8, 3], tf.uint8)).numpy()
    for name, count in (("train-00000-of-00002", RECORDS),
                        ("train-00001-of-00002", CUT_RECORDS),
                        ("validation-00000-of-00001", RECORDS)):
        with tf.io.TFRecordWriter(os.path.join(root, name)) as writer:
            for i in range(count):
                writer.write(classic_example(image, 1 + i % 2, 8, 8))
    cut = os.path.join(root, "train-00001-of-00002")
    with open(cut, "r+b") as f:
        f.truncate(os.path.getsize(cut) // 2 + 7)
    return cut


def dataset_config(root, skip):
    return DatasetConfig(builder="records", data_dir=str(root), split="train",
                         image_size=8,
                         num_classes=2, batch_size=BATCH, one_hot=False,
                         skip_bad_records=skip, shuffle_buffer_size=SHUFFLE)


def one_run(ds):
    """30 training batches of the real pipeline, then the check's answer:
    the first error, or None."""
    check = file_check.start(ds, is_training=True)
    data = pipeline.records_dataset(ds, tf.distribute.InputContext(), BATCH,
                                    True, seed=0)
    try:
        for _ in data.take(STEPS):
            pass
        file_check.finish(check, ds)
    except Exception as e:  # noqa: BLE001 - the answer under test
        # TensorFlow wraps the pipeline's line in node names that vary.
        return re.search(r"official_bench:[^\]\n]*", str(e)).group(0)
    return None


def test_strict_every_run_names_the_cut_file(tmp_path):
    cut = battery(tmp_path)
    answers = {one_run(dataset_config(tmp_path, skip=False))
               for _ in range(4)}
    assert len(answers) == 1, answers
    (answer,) = answers
    assert answer is not None and "bad record " in answer and cut in answer
    assert "corrupt or truncated TFRecord data" in answer


def test_skip_counts_the_cut_file_once_every_run(tmp_path, caplog):
    battery(tmp_path)
    counts = []
    for _ in range(3):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert one_run(dataset_config(tmp_path, skip=True)) is None
        counts.append([r.getMessage() for r in caplog.records
                       if "record file(s) truncated or corrupt" in
                       r.getMessage()])
    assert counts == [["official_bench: 1 of 2 record file(s) truncated or "
                       "corrupt in train; their records after the damage "
                       "were not read"]] * 3


def test_builders_without_record_files_are_not_checked():
    assert file_check.start(DatasetConfig(builder="synthetic"), True) is None


@pytest.mark.slow
def test_trainer_ends_on_the_cut_file_with_exit_1(tmp_path):
    cut = battery(tmp_path)
    proc = train_on_records(tmp_path, tmp_path / "model", BATCH,
                            STEPS * BATCH, SHUFFLE)
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: official_bench: bad record ") and \
        cut in last, last
    assert not os.path.exists(tmp_path / "model" / "result.json")
