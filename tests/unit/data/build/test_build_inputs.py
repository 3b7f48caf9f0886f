"""The TFRecord builder's checks of its arguments and inputs: each bad one
is one error line (exit 2) before anything is written, so a corrected
re-run into the same --output_dir is not refused by a manifest the failed
run left behind."""

import os

import numpy as np
import pytest

from official_bench.data.build import build_records as br, builder

PIL = pytest.importorskip("PIL", reason="Pillow (the builder extra) is needed")
from PIL import Image  # noqa: E402


def tree(root, classes=("a", "b"), per_class=2, empty=()):
    for split in ("train", "validation"):
        for c, name in enumerate(classes):
            folder = os.path.join(root, split, name)
            os.makedirs(folder, exist_ok=True)
            for i in range(per_class):
                pixels = np.full((6, 8, 3), 40 * c + i, np.uint8)
                Image.fromarray(pixels).save(os.path.join(folder, f"{i}.jpg"))
        for name in empty:
            os.makedirs(os.path.join(root, split, name), exist_ok=True)
    return str(root)


@pytest.mark.parametrize("flag", ["--train_shards=0", "--train_shards=-1",
                                  "--train_shards=9"])
def test_a_bad_shard_count_writes_nothing_and_the_fix_builds(
        tmp_path, capsys, flag):
    """--train_shards=0 used to become 1024 in silence; a count above the
    images wrote build_records.json first, so the corrected command was
    refused ('split train was started with ... shards 9')."""
    src, out = tree(tmp_path / "src"), str(tmp_path / "out")
    base = [f"--input_dir={src}", f"--output_dir={out}", "--num_workers=1",
            "--validation_shards=1"]
    assert br.main(base + [flag], log=lambda m: None) == 2
    shards = flag.split("=")[1]
    assert (f"error: --train_shards {shards}: must be 1..4 (the number of "
            "train images)") in capsys.readouterr().err
    assert not os.path.exists(out)
    assert br.main(base + ["--train_shards=2"], log=lambda m: None) == 0
    assert sorted(n for n in os.listdir(out) if n.startswith("train-")) == [
        "train-00000-of-00002", "train-00001-of-00002"]


def test_the_shard_count_is_checked_once_per_split(tmp_path, monkeypatch):
    """builder.py checks it before anything is written; build_split
    checked it again."""
    from official_bench.data.build import shards
    calls, check = [], shards.check_shard_count

    def counted(split, images, num_shards):
        calls.append(split)
        return check(split, images, num_shards)
    monkeypatch.setattr(builder, "check_shard_count", counted)
    monkeypatch.setattr(shards, "check_shard_count", counted)
    src = tree(tmp_path / "src")
    assert br.main([f"--input_dir={src}", f"--output_dir={tmp_path}/o",
                    "--train_shards=1", "--validation_shards=1",
                    "--num_workers=1"], log=lambda m: None) == 0
    assert sorted(calls) == ["train", "validation"]


def test_an_output_dir_inside_a_split_folder_is_refused(tmp_path, capsys):
    """It used to be created first, then listed as a class folder: a sixth
    class in labels.txt, and labels of the classes after it shifted."""
    src = tree(tmp_path / "src")
    out = os.path.join(src, "train", "0_records")
    assert br.main([f"--input_dir={src}", f"--output_dir={out}",
                    "--train_shards=1", "--validation_shards=1",
                    "--num_workers=1"], log=lambda m: None) == 2
    err = capsys.readouterr().err
    assert f"--output_dir {out} is inside the train folder" in err
    assert not os.path.exists(out)


def test_empty_class_folders_are_named(tmp_path):
    src, out = tree(tmp_path / "src", empty=("c",)), str(tmp_path / "out")
    lines = []
    builder.build(builder.BuildOptions(output_dir=out, input_dir=src,
                                       train_shards=1, validation_shards=1,
                                       num_workers=1), log=lines.append)
    assert ("WARNING: [train] 1 of 3 class(es) have no images (c); they keep "
            "their labels in labels.txt, so num_classes is 3") in lines


@pytest.mark.parametrize("args, words", [
    (["--quality=101"], "--quality 101: must be 0..100"),
    (["--splits=,"], "--splits ',' names no split"),
])
def test_bad_options_are_one_line(tmp_path, capsys, args, words):
    src = tree(tmp_path / "src")
    assert br.main([f"--input_dir={src}", f"--output_dir={tmp_path}/o",
                    "--num_workers=1"] + args, log=lambda m: None) == 2
    assert words in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "o")


def test_a_split_without_images_names_its_folder(tmp_path, capsys):
    src = tree(tmp_path / "src", per_class=0)
    assert br.main([f"--input_dir={src}", f"--output_dir={tmp_path}/o",
                    "--num_workers=1"], log=lambda m: None) == 2
    assert (f"split train: no images found in {src}/train/<class> (looked "
            "for .jpg") in capsys.readouterr().err


def test_file_names_that_are_not_utf8_are_stored_as_on_disk(tmp_path,
                                                             capsys):
    """A worker used to die on them (UnicodeEncodeError, a traceback);
    the record keeps the name's bytes, skipped_images.txt the path's."""
    src = tree(tmp_path / "src", per_class=1)
    folder = os.fsencode(os.path.join(src, "train", "a"))
    Image.fromarray(np.zeros((6, 8, 3), np.uint8)).save(
        os.fsdecode(folder + b"/caf\xe9.jpg"), "JPEG")
    open(folder + b"/bad\xe9.jpg", "wb").close()
    out = str(tmp_path / "out")
    lines = []
    assert br.main([f"--input_dir={src}", f"--output_dir={out}",
                    "--splits=train", "--train_shards=1", "--num_workers=1"],
                   log=lines.append) == 0
    assert any(line.endswith("/bad\\xe9.jpg: not an image format Pillow "
                             "can read") for line in lines)
    with open(os.path.join(out, "skipped_images.txt"), "rb") as f:
        assert f.read().startswith(folder + b"/bad\xe9.jpg\t")
    with open(os.path.join(out, "train-00000-of-00001"), "rb") as f:
        assert b"caf\xe9.jpg" in f.read()
    os.makedirs(os.fsencode(os.path.join(src, "train")) + b"/cl\xe9")
    assert br.main([f"--input_dir={src}", f"--output_dir={tmp_path}/o2",
                    "--splits=train", "--train_shards=1", "--num_workers=1"],
                   log=lines.append) == 2
    assert ("train/cl\\xe9: a class folder name must be UTF-8"
            in capsys.readouterr().err)


def test_a_broken_symlink_named_as_an_image_is_skipped_and_named(tmp_path):
    """It was left out of the listing in silence (os.path.isfile is False
    for it), so the image went missing with no count and no line."""
    src = tree(tmp_path / "src")
    dead = os.path.join(src, "train", "a", "dead.jpg")
    os.symlink(str(tmp_path / "gone.jpg"), dead)
    out, lines = str(tmp_path / "out"), []
    assert br.main([f"--input_dir={src}", f"--output_dir={out}",
                    "--splits=train", "--train_shards=1", "--num_workers=1"],
                   log=lines.append) == 0
    assert (f"  skipped {dead}: a broken symbolic link (to "
            f"{tmp_path / 'gone.jpg'})") in lines
    assert any("1 unreadable image(s) were skipped" in line
               for line in lines)
    with open(os.path.join(out, "skipped_images.txt")) as f:
        assert f.read().startswith(f"{dead}\t")


def test_verify_names_an_output_dir_that_does_not_exist(tmp_path, capsys):
    """It said 'no shards in ...' for each split, as if the folder were
    there and empty (a mistyped path looked like a failed build)."""
    missing = str(tmp_path / "nowhere")
    assert br.main([f"--output_dir={missing}", "--verify"],
                   log=lambda m: None) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --verify: --output_dir {missing} does not exist; give the "
        "folder the shards were built in")
    assert not os.path.exists(missing)
