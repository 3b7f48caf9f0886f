"""Which files of a TFRecord set count (contracts/record_names.py): the
classic and TFDS names of a split, hidden and directory entries never, and
the words an error uses for what was looked for."""

from official_bench.contracts import record_names as rn


def _touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return str(path)


def test_classic_files_of_the_split_only(tmp_path):
    a = _touch(tmp_path / "train-00001-of-00002")
    b = _touch(tmp_path / "train-00000-of-00002")
    _touch(tmp_path / "validation-00000-of-00001")
    _touch(tmp_path / ".train-00002-of-00002.tmp")  # a builder's unfinished
    (tmp_path / "train-dir").mkdir()
    assert rn.find(str(tmp_path), "train") == [b, a]
    assert rn.find(str(tmp_path), "test") == []


def test_tfds_files_directly_or_under_name_and_version(tmp_path):
    nested = _touch(tmp_path / "imagenet2012" / "5.1.0" /
                    "imagenet2012-train.tfrecord-00000-of-00001")
    assert rn.find(str(tmp_path), "train") == [nested]
    assert rn.find(str(tmp_path), "train", name="other") == []
    assert rn.find(str(tmp_path), "train", layout="classic") == []
    direct = _touch(tmp_path / "x-train.tfrecord-00000-of-00001")
    assert rn.find(str(tmp_path), "train", layout="tfds") == [direct]


def test_a_directory_name_with_glob_characters(tmp_path):
    folder = tmp_path / "data[1]"
    f = _touch(folder / "train-00000-of-00001")
    assert rn.find(str(folder), "train") == [f]


def test_looked_for_names_the_patterns_of_the_layout():
    assert rn.looked_for("train") == (
        "train-* (classic) and *-train.tfrecord-* (TFDS, also under "
        "<name>/<version>/)")
    assert rn.looked_for("validation", "classic") == \
        "validation-* (classic)"


def test_the_latest_tfds_version_wins_as_the_trainer_reads_it(tmp_path):
    """Version folders compare as numbers (5.10.0 after 5.9.0), latest
    first: the launcher looks at the files the trainer's pipeline reads
    (data/records/record_files.py calls this with TensorFlow's glob)."""
    for older in ("4.0.0", "5.9.0"):  # first by name, last by name
        _touch(tmp_path / "imagenet2012" / older /
               "imagenet2012-train.tfrecord-00000-of-00001")
    latest = _touch(tmp_path / "imagenet2012" / "5.10.0" /
                    "imagenet2012-train.tfrecord-00000-of-00001")
    assert rn.find(str(tmp_path), "train") == [latest]


def test_span_names_one_file_once_and_a_set_by_its_ends():
    assert rn.span(["/d/train-00000-of-00001"]) == "(train-00000-of-00001)"
    assert rn.span(["/d/train-00000-of-00002", "/d/train-00001-of-00002"]) \
        == "(train-00000-of-00002 ... train-00001-of-00002)"
    assert rn.span([]) == "(none)"
