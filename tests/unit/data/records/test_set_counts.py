"""num_examples and num_classes against the build_records.json beside the
shards: a num_examples that disagrees is one warning naming both numbers
(it was silent: num_examples 1281167 on a 31-image set made an epoch of
320,000 steps); a num_classes too small is an error before training."""

import json
import logging

import pytest

from official_bench.config import ConfigError, DatasetConfig
from official_bench.data.records import set_counts
from official_bench.data.records.record_sets import Once


def manifest(tmp_path, records=31, classes=5):
    (tmp_path / "build_records.json").write_text(json.dumps({
        "classes": [f"c{i}" for i in range(classes)],
        "splits": {"train": {"images": 34, "shards": 3, "records": records},
                   "validation": {"images": 9, "shards": 1}}}))
    return str(tmp_path)


def test_counts_come_from_the_manifest(tmp_path):
    d = manifest(tmp_path)
    assert set_counts.read_counts(d, "train") == (31, 5)
    assert set_counts.read_counts(d, "validation") == (None, 5)  # unfinished
    assert set_counts.read_counts(str(tmp_path / "none"), "train") == (
        None, None)


def test_a_num_examples_that_disagrees_is_named(tmp_path):
    ds = DatasetConfig(data_dir=manifest(tmp_path), split="train",
                       num_examples=1281167, num_classes=5)
    assert set_counts.mismatches(ds, "train_dataset", 31, 5, 1) == [
        f"train_dataset.num_examples is 1281167 but data_dir {tmp_path} "
        "(build_records.json) holds 31 train records; num_examples sets the "
        "steps of an epoch (or of an evaluation): set "
        "train_dataset.num_examples=31"]


@pytest.mark.parametrize("num_classes, offset, warned", [
    (5, 1, False), (1000, 1, False), (4, 1, True), (5, 0, True),
    (6, 0, False)])
def test_num_classes_must_hold_every_label(num_classes, offset, warned):
    ds = DatasetConfig(data_dir="/d", split="train", num_examples=31,
                       num_classes=num_classes)
    lines = set_counts.mismatches(ds, "train_dataset", 31, 5, offset)
    assert bool(lines) == warned
    if warned:
        assert lines[0].startswith(f"train_dataset.num_classes is "
                                   f"{num_classes} but data_dir /d")
        assert lines[0].endswith(
            f"set train_dataset.num_classes={6 - offset}")


def test_warned_once_per_directory_and_split(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(set_counts, "_warned", Once())
    caplog.set_level(logging.WARNING)
    ds = DatasetConfig(data_dir=manifest(tmp_path), split="train",
                       num_examples=100, num_classes=5)
    set_counts.check_counts(ds, "train_dataset", 1)
    set_counts.check_counts(ds, "train_dataset", 1)
    assert [r.getMessage()[:36] for r in caplog.records] == [
        "train_dataset.num_examples is 100 bu"]


def test_too_few_classes_stop_before_training_naming_both(tmp_path,
                                                          monkeypatch):
    """It was a warning: the run went on to stop at the first label past
    num_classes (or, skipping bad records, to drop those classes)."""
    monkeypatch.setattr(set_counts, "_warned", Once())
    ds = DatasetConfig(data_dir=manifest(tmp_path), split="train",
                       num_examples=31, num_classes=3)
    for _ in range(2):  # every time, not once
        with pytest.raises(ConfigError) as e:
            set_counts.check_counts(ds, "train_dataset", 1)
        assert str(e.value) == (
            f"train_dataset.num_classes is 3 but data_dir {tmp_path} "
            "(build_records.json) has 5 classes, labels up to 4 with "
            "label_offset 1: set train_dataset.num_classes=5")


def test_the_jax_reader_checks_the_counts_too(tmp_path, monkeypatch):
    """host_examples.process_files (the JAX backend's files) checked
    nothing: the first label past num_classes stopped the run."""
    from official_bench.data.records import host_examples
    monkeypatch.setattr(set_counts, "_warned", Once())
    manifest(tmp_path)
    (tmp_path / "train-00000-of-00001").write_bytes(b"")
    ds = DatasetConfig(builder="records", data_dir=str(tmp_path),
                       split="train", num_examples=31, num_classes=2)
    with pytest.raises(ConfigError, match="train_dataset.num_classes is 2 "
                       "but .* has 5 classes"):
        host_examples.process_files(ds, 0, 1, True)


def test_once_is_true_for_a_key_the_first_time_only():
    """The one warn-once helper of set_counts and record_sets."""
    once = Once()
    assert once("/d", "train") and once("/d", "validation")
    assert not once("/d", "train")


def test_too_many_classes_are_one_warning_naming_both(tmp_path, monkeypatch,
                                                      caplog):
    """It passed silently: --dataset=cifar10's 10 classes on a 5-class set
    trained a head with 5 outputs no label uses."""
    monkeypatch.setattr(set_counts, "_warned", Once())
    caplog.set_level(logging.WARNING)
    ds = DatasetConfig(data_dir=manifest(tmp_path), split="train",
                       num_examples=31, num_classes=10)
    set_counts.check_counts(ds, "train_dataset", 1)
    assert [r.getMessage() for r in caplog.records] == [
        f"train_dataset.num_classes is 10 but data_dir {tmp_path} "
        "(build_records.json) has 5 classes, labels up to 4 with "
        "label_offset 1: the model has 5 outputs no label trains; set "
        "train_dataset.num_classes=5"]


@pytest.mark.parametrize("num_classes, offset, surplus", [
    (5, 1, False), (6, 1, True), (6, 0, False), (7, 0, True)])
def test_the_exact_class_count_is_no_surplus(num_classes, offset, surplus):
    ds = DatasetConfig(data_dir="/d", num_classes=num_classes)
    assert bool(set_counts.surplus_classes(ds, "train_dataset", 5,
                                           offset)) == surplus
    assert set_counts.surplus_classes(ds, "train_dataset", None, 0) is None


def _validation(tmp_path, records=12, **kwargs):
    (tmp_path / "build_records.json").write_text(json.dumps({
        "classes": ["a", "b", "c"],
        "splits": {"validation": {"records": records}}}))
    return DatasetConfig(**dict(dict(
        builder="records", data_dir=str(tmp_path), split="validation"),
        **kwargs))


def test_an_evaluation_longer_than_the_records_is_refused(tmp_path):
    """TensorFlow ran out of data after 1 of 1250 batches and reported the
    accuracy of 8 images, exit 0 (JAX refused): now both refuse, in one
    set of words, naming the value to set."""
    ds = _validation(tmp_path)
    set_counts.check_eval_pass(ds, 8, 1)  # one whole batch of 8
    with pytest.raises(ConfigError) as e:
        set_counts.check_eval_pass(ds, 8, 1250)
    assert str(e.value) == (
        f"validation_dataset: one pass over data_dir {tmp_path} "
        "(build_records.json) gives at most 1 batches of 8 (12 records), the "
        "evaluation takes 1250 (evaluation.steps, else this dataset's "
        "num_examples / the global batch): set "
        "validation_dataset.num_examples=12 (and evaluation.steps, if set, "
        "to at most 1)")
    with pytest.raises(ConfigError, match="lower validation_dataset."
                       "batch_size .one global batch is more than the "
                       "records"):
        set_counts.check_eval_pass(ds, 16, 1)


def test_the_eval_pass_is_checked_only_where_the_manifest_counts(tmp_path):
    for ds in (_validation(tmp_path, builder="synthetic"),
               _validation(tmp_path, layout="tfds"),
               _validation(tmp_path, filenames=["x"]),
               DatasetConfig(builder="records", data_dir=str(tmp_path / "n"),
                             split="validation")):
        set_counts.check_eval_pass(ds, 8, 1250)  # nothing to compare
