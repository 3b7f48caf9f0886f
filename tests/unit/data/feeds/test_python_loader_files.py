"""The image-folder loader names the file it cannot decode (an empty or
cut-short JPEG), also from its worker processes."""

import numpy as np
import pytest

from official_bench.data.feeds import python_loader

Image = pytest.importorskip("PIL.Image")


def _folder(tmp_path, bad_name, bad_bytes):
    folder = tmp_path / "train" / "a"
    folder.mkdir(parents=True)
    for i in range(3):
        Image.fromarray(np.full((6, 6, 3), 40 * i, np.uint8)).save(
            folder / f"{i}.jpg")
    bad = folder / bad_name
    bad.write_bytes(bad_bytes)
    return str(tmp_path), str(bad)


@pytest.mark.parametrize("name, data, words", [
    ("empty.jpg", b"", "(0 bytes): cannot decode it"),
    ("cut.jpg", b"\xff\xd8\xff\xe0" + b"x" * 40, "(44 bytes): cannot decode"),
])
@pytest.mark.parametrize("workers", [0, 1])
def test_a_bad_image_is_named(tmp_path, name, data, words, workers):
    root, bad = _folder(tmp_path, name, data)
    batches = python_loader.folder_batches(root, "train", 4, 4, 3, "uint8",
                                           False, 0, workers=workers)
    with pytest.raises(ValueError) as e:
        list(batches)
    assert f"image {bad} {words}" in str(e.value)
