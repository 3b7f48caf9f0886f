"""A data_dir that holds an image folder (train/<class>/*.jpg), the input
of official-bench-build-records, instead of the records built from it: the
error line says to build them (found on both backends through
record_sets.find_files). It used to list the record file patterns only.
A missing validation split's line names the way to train without it."""

import pytest

from official_bench.config import ConfigError, DatasetConfig
from official_bench.data.records import record_sets


def _error(data_dir, split="train"):
    ds = DatasetConfig(data_dir=str(data_dir), split=split)
    with pytest.raises(ConfigError) as e:
        record_sets.find_files(ds, split == "train")
    return str(e.value)


def test_an_image_folder_is_named_with_the_build_command(tmp_path):
    (tmp_path / "train" / "n01").mkdir(parents=True)
    (tmp_path / "train" / "n01" / "a.jpg").write_bytes(b"\xff\xd8")
    (tmp_path / "validation").mkdir()
    message = _error(tmp_path)
    assert message == (
        f"train_dataset: no files for split 'train' in data_dir "
        f"'{tmp_path}'; looked for train-* (classic) and "
        "*-train.tfrecord-* (TFDS, also under <name>/<version>/); it holds "
        "an image folder (train/), not TFRecords: build records from it "
        f"(official-bench-build-records --input_dir={tmp_path} "
        "--output_dir=DIR) and set data_dir to DIR")
    assert "image folder (train/)" in _error(tmp_path, "validation")


def test_other_folders_keep_the_plain_line(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "imagenet2012").mkdir()  # a TFDS name without the files
    message = _error(tmp_path)
    assert message.endswith("(TFDS, also under <name>/<version>/)")
    assert record_sets.image_folder_hint(str(tmp_path)) == ""


def test_a_missing_validation_split_names_the_way_out(tmp_path):
    """A train-only set ended in the files looked for and nothing to do."""
    (tmp_path / "train-00000-of-00001").write_bytes(b"")
    message = _error(tmp_path, "validation")
    assert message.startswith("validation_dataset: no files for split "
                              "'validation'")
    assert message.endswith("; to train without evaluating, run "
                            "--mode=train or set evaluation.skip_eval: "
                            "true"), message
    only_validation = tmp_path / "v"
    only_validation.mkdir()
    (only_validation / "validation-00000-of-00001").write_bytes(b"")
    assert "skip_eval" not in _error(only_validation, "train")
