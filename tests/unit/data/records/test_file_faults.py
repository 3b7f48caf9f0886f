"""Damaged record files named before the run reads them (walk_jaxrec F2,
F5): a truncated validation file is its bad-record line when the JAX
trainer counts the evaluation's records before training (it used to be
"set validation_dataset.num_examples=14", and the run then failed after
the training); a 0-byte file, and a file whose records differ from what
the builder wrote into it (.shards/<name>.json), are warnings naming the
file on both backends' framing check."""

import os

import pytest

from official_bench.config import ConfigError, DatasetConfig
from official_bench.data.build import shard_skips
from official_bench.data.records import (
    file_verdict,
    framing,
    host_examples,
    record_problems,
)

SKIP_HINT = record_problems.SKIP_HINT


def shard(root, name, records, built=None, cut=None):
    """`records` frames of 20 bytes in root/name; with `built` the
    builder's record of it (`built` records); `cut`: bytes kept."""
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, name)
    data = b"".join(framing.frame(bytes([i]) * 20) for i in range(records))
    with open(path, "wb") as f:
        f.write(data if cut is None else data[:cut])
    if built is not None:
        shard_skips.write_record(str(root), name, built, built, [])
    return path


def validation(root, skip=False):
    ds = DatasetConfig(builder="records", data_dir=str(root),
                       split="validation", skip_bad_records=skip)
    return host_examples.process_files(ds, 0, 1, False)


def test_a_cut_validation_file_is_named_before_the_eval_pass_advice(
        tmp_path):
    shard(tmp_path, "validation-00000-of-00002", 10)
    cut = shard(tmp_path, "validation-00001-of-00002", 10, cut=36 * 4 + 10)
    from official_bench.jax_backend import host_feed
    files = validation(tmp_path)
    with pytest.raises(file_verdict.BadRecordFile) as got:
        host_feed.check_eval_pass(files, 4, 5)  # 14 records: too few
    line = str(got.value)
    assert line == (
        f"official_bench: bad record 4 in {cut}: corrupt or truncated "
        "TFRecord data: only the first 4 record(s) (144 of 154 bytes) could "
        "be read" + SKIP_HINT)
    # The framing check's words for the same file (TensorFlow's too).
    check = framing.FileCheck([cut], [os.path.getsize(cut)])
    assert line == check.wait()[0].line() + SKIP_HINT


def test_a_cut_validation_file_skipped_is_a_warning_and_its_records_count(
        tmp_path, absl_messages):
    shard(tmp_path, "validation-00000-of-00002", 10)
    cut = shard(tmp_path, "validation-00001-of-00002", 10, cut=36 * 4 + 10)
    assert host_examples.records_of(validation(tmp_path, skip=True)) == 14
    assert [m for m in absl_messages if cut in m] == [
        f"official_bench: bad record 4 in {cut}: corrupt or truncated "
        "TFRecord data: only the first 4 record(s) (144 of 154 bytes) could "
        "be read; skipped (skip_bad_records: true)"]
    from official_bench.jax_backend import host_feed
    with pytest.raises(ConfigError, match="num_examples=14"):
        host_feed.check_eval_pass(validation(tmp_path, skip=True), 2, 8)


def test_an_unreadable_validation_file_is_named(tmp_path):
    path = shard(tmp_path, "validation-00000-of-00001", 3)
    files = validation(tmp_path)
    os.remove(path)
    with pytest.raises(file_verdict.BadRecordFile,
                       match=f"bad record 0 in {path}: the file cannot be "
                       "read"):
        host_examples.records_of(files)


def test_an_empty_training_file_is_a_warning_naming_it(tmp_path,
                                                       absl_messages):
    shard(tmp_path, "train-00000-of-00002", 4, built=4)
    empty = shard(tmp_path, "train-00001-of-00002", 0, built=4)
    ds = DatasetConfig(builder="records", data_dir=str(tmp_path),
                       split="train")
    check = file_verdict.start_local(ds, True)
    line = (f"official_bench: train_dataset: record file {empty} is empty "
            "(0 bytes): it holds no records (the build wrote 4 into it, "
            f"{tmp_path}/.shards/train-00001-of-00002.json); a copy onto a "
            "full disk?")
    assert absl_messages == [line]  # when the check starts
    file_verdict.finish(check, ds)
    assert absl_messages[1:] == [
        "train_dataset: 2 record file(s) checked: every one is whole (1 of "
        "them empty, 0 bytes)"]


def test_an_empty_file_on_tensorflow_too(tmp_path, absl_messages):
    empty = shard(tmp_path, "train-00000-of-00001", 0)
    from official_bench.data.records import file_check
    file_check.start(DatasetConfig(builder="records", data_dir=str(tmp_path),
                                   split="train"), True).wait()
    assert absl_messages == [
        f"official_bench: train_dataset: record file {empty} is empty (0 "
        "bytes): it holds no records; a copy onto a full disk?"]


def test_an_empty_shard_the_build_wrote_empty_is_no_warning(tmp_path,
                                                            absl_messages):
    shard(tmp_path, "train-00000-of-00001", 0, built=0)
    file_verdict.start_local(DatasetConfig(
        builder="records", data_dir=str(tmp_path), split="train"),
        True).wait()
    assert absl_messages == []


def test_a_file_short_of_the_builds_count_is_named_at_the_end(
        tmp_path, absl_messages):
    shard(tmp_path, "train-00000-of-00002", 6, built=6)
    short = shard(tmp_path, "train-00001-of-00002", 4, built=6)
    ds = DatasetConfig(builder="records", data_dir=str(tmp_path),
                       split="train")
    check = file_verdict.start_local(ds, True)
    assert absl_messages == []
    file_verdict.finish(check, ds)
    assert absl_messages == [
        f"official_bench: train_dataset: record file {short} holds 4 "
        "record(s) but the build wrote 6 into it "
        f"({tmp_path}/.shards/train-00001-of-00002.json): a copy that ended "
        "at a record's end, or a file of another build? copy it again or "
        "re-run official-bench-build-records",
        "train_dataset: 2 record file(s) checked: every one is whole"]


def test_validation_counts_against_the_build(tmp_path, absl_messages):
    shard(tmp_path, "validation-00000-of-00003", 5, built=5)
    short = shard(tmp_path, "validation-00001-of-00003", 3, built=5)
    empty = shard(tmp_path, "validation-00002-of-00003", 0)
    assert host_examples.records_of(validation(tmp_path)) == 8
    named = [m for m in absl_messages if " record file " in m]
    assert len(named) == 2
    assert named[0].startswith(f"official_bench: validation_dataset: record "
                               f"file {short} holds 3 record(s) but the "
                               "build wrote 5 into it")
    assert named[1] == (f"official_bench: validation_dataset: record file "
                        f"{empty} is empty (0 bytes): it holds no records; "
                        "a copy onto a full disk?")


def test_the_builders_own_shard_records_are_read(tmp_path, absl_messages):
    from support.natural_images import record_set
    out = record_set(str(tmp_path), train_shards=2, validation_shards=1,
                     classes=2, train=2, validation=1, width=32, height=24)
    path = os.path.join(out, "train-00001-of-00002")
    with open(path, "r+b") as f:
        f.truncate(0)
    file_verdict.start_local(DatasetConfig(builder="records", data_dir=out,
                                           split="train"), True).wait()
    assert absl_messages == [
        f"official_bench: train_dataset: record file {path} is empty (0 "
        "bytes): it holds no records (the build wrote 2 into it, "
        f"{out}/.shards/train-00001-of-00002.json); a copy onto a full "
        "disk?"]
