"""The framing check's answers without TensorFlow (data/records/
file_verdict.py), as a JAX loop calls them: started on this machine's
files, `stop_if_bad` between steps raises the cut file's line (what the
TensorFlow backend's StopOnBadFile raises during fit), `finish` waits and
raises it or logs it as skipped; the same lines as the TensorFlow path."""

import os

import pytest

from official_bench.config import DatasetConfig
from official_bench.data.records import file_check, file_verdict
from official_bench.runtime.keras_setup import tf


def shards(root, cut=True):
    os.makedirs(root, exist_ok=True)
    paths = []
    for n in range(2):
        path = os.path.join(root, f"train-{n:05d}-of-00002")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(50):
                writer.write(bytes([i]) * 300)
        paths.append(path)
    if cut:
        with open(paths[1], "r+b") as f:
            f.truncate(os.path.getsize(paths[1]) // 2 + 7)
    return paths


def config(root, skip=False, builder="records"):
    return DatasetConfig(builder=builder, data_dir=str(root), split="train",
                         skip_bad_records=skip)


def test_stop_if_bad_raises_the_cut_files_line_between_steps(tmp_path):
    _, cut = shards(tmp_path)
    ds = config(tmp_path)
    check = file_verdict.start_local(ds, True)
    assert check.files == sorted(check.files) and len(check.files) == 2
    check.wait()
    with pytest.raises(file_verdict.BadRecordFile) as got:
        file_verdict.stop_if_bad(check, ds)
    line = str(got.value)
    assert line.startswith("official_bench: bad record 25 in " + cut)
    assert "corrupt or truncated TFRecord data" in line
    assert line.endswith("skip_bad_records: true in the dataset config to "
                         "skip bad records")
    # The TensorFlow backend's callback says the same.
    tf_check = file_check.start(ds, True)
    tf_check.wait()
    callback = file_check.callbacks(tf_check, ds)[0]
    with pytest.raises(file_verdict.BadRecordFile) as tf_got:
        callback.on_train_batch_end(0)
    assert str(tf_got.value) == line
    with pytest.raises(file_verdict.BadRecordFile, match="bad record 25"):
        file_verdict.finish(check, ds)


def test_whole_files_and_skipping_never_stop(tmp_path, absl_messages):
    shards(tmp_path / "whole", cut=False)
    ds = config(tmp_path / "whole")
    check = file_verdict.start_local(ds, True)
    check.wait()
    file_verdict.stop_if_bad(check, ds)
    file_verdict.finish(check, ds)
    assert "train_dataset: 2 record file(s) checked: every one is whole" \
        in absl_messages
    shards(tmp_path / "cut")
    ds = config(tmp_path / "cut", skip=True)
    check = file_verdict.start_local(ds, True)
    check.wait()
    file_verdict.stop_if_bad(check, ds)
    file_verdict.finish(check, ds)
    assert ("official_bench: 1 of 2 record file(s) truncated or corrupt in "
            "train; their records after the damage were not read"
            ) in absl_messages


def test_no_check_without_record_files():
    assert file_verdict.start_local(DatasetConfig(builder="synthetic"),
                                    True) is None
    file_verdict.stop_if_bad(None, DatasetConfig())
    file_verdict.finish(None, DatasetConfig())
