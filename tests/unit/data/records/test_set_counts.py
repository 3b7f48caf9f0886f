"""num_examples and num_classes against the build_records.json beside the
shards: a disagreement is one warning naming both numbers (it was silent:
num_examples 1281167 on a 31-image set made an epoch of 320,000 steps)."""

import json
import logging

import pytest

from official_bench.config import DatasetConfig
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
    set_counts.warn_mismatches(ds, "train_dataset", 1)
    set_counts.warn_mismatches(ds, "train_dataset", 1)
    assert [r.getMessage()[:36] for r in caplog.records] == [
        "train_dataset.num_examples is 100 bu"]


def test_once_is_true_for_a_key_the_first_time_only():
    """The one warn-once helper of set_counts and record_sets."""
    once = Once()
    assert once("/d", "train") and once("/d", "validation")
    assert not once("/d", "train")
