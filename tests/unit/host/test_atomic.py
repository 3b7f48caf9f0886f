"""host/atomic.py: the one temp-file-and-rename recipe, replacing or
exclusive (the launcher's result copy), never leaving its temporary."""

import pytest

from official_bench.host import atomic


def test_replacing_write_overwrites_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    atomic.write_text_atomic(str(path), "new")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_exclusive_write_creates_a_new_file(tmp_path):
    path = tmp_path / "r.json"
    atomic.write_text_atomic(str(path), "whole", exclusive=True)
    assert path.read_text() == "whole"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_exclusive_write_never_overwrites(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("first")
    with pytest.raises(FileExistsError):
        atomic.write_text_atomic(str(path), "second", exclusive=True)
    assert path.read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
