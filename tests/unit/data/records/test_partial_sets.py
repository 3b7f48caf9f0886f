"""A classic record set whose file names say it is incomplete, or that two
builds share the directory, is named in a warning when the files are found
(both backends find them through record_sets.find_files); it used to be
read in silence: a third of the images after an interrupted build, or the
images of two builds mixed."""

import logging

import pytest

from official_bench.config import DatasetConfig
from official_bench.data.records import record_sets


@pytest.fixture
def warnings(monkeypatch, caplog):
    monkeypatch.setattr(record_sets, "_warned", record_sets.Once())
    caplog.set_level(logging.WARNING)
    return lambda: [r.getMessage() for r in caplog.records
                    if r.levelno == logging.WARNING]


def find(tmp_path, names, split="train"):
    for name in names:
        (tmp_path / name).write_bytes(b"")
    ds = DatasetConfig(data_dir=str(tmp_path), split=split)
    return record_sets.find_files(ds, split == "train")[0]


def test_an_unfinished_set_is_named(tmp_path, warnings):
    files = find(tmp_path, ["train-00000-of-00004", "train-00002-of-00004"])
    assert len(files) == 2
    assert warnings() == [
        f"train_dataset.data_dir {tmp_path} holds 2 of the 4 files "
        "train-*-of-00004 (2 missing, first train-00001-of-00004): reading "
        "the 2 there (an unfinished build? re-run it)"]
    find(tmp_path, [])
    assert len(warnings()) == 1  # once per directory and split


def test_two_sets_in_one_directory_are_named(tmp_path, warnings):
    find(tmp_path, ["validation-00000-of-00001", "validation-00000-of-00002",
                    "validation-00001-of-00002"], split="validation")
    (line,) = warnings()
    assert line.startswith(f"validation_dataset.data_dir {tmp_path} holds "
                           "validation files of 2 sets (1 of validation-*-"
                           "of-00001, 2 of validation-*-of-00002)")


@pytest.mark.parametrize("names", [
    ["train-00000-of-00002", "train-00001-of-00002"],
    ["train-a", "train-00000-of-00002"],  # names not all of the pattern
])
def test_whole_sets_and_other_names_are_not_warned_about(tmp_path, warnings,
                                                        names):
    find(tmp_path, names)
    assert warnings() == []


def test_a_directory_named_like_a_shard_is_called_one(tmp_path, warnings):
    (tmp_path / "train-00001-of-00003").mkdir()
    files = find(tmp_path, ["train-00000-of-00003", "train-00002-of-00003"])
    assert len(files) == 2
    assert warnings() == [
        f"train_dataset.data_dir {tmp_path} holds 2 of the 3 files "
        "train-*-of-00003 (1 missing, first train-00001-of-00003, a "
        "directory by that name, not a file): reading the 2 there (an "
        "unfinished build? re-run it)"]


def test_mixed_layouts_are_named_once(tmp_path, warnings):
    names = ["train-00000-of-00001", "imagenet2012-train.tfrecord-00000-of-"
             "00001"]
    find(tmp_path, names)
    find(tmp_path, [])  # the feed finds them again
    assert warnings() == [
        f"train_dataset.data_dir {tmp_path} holds both classic (train-*) and "
        "TFDS (*-train.tfrecord-*) files; reading the classic ones (set "
        "layout: tfds for the others)"]
