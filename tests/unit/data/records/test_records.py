"""builder: records — finding files, layouts, labels, sharding, shuffling,
cache."""

import os

import numpy as np
import pytest

from official_bench.config import ConfigError, DatasetConfig
from official_bench.data import factory
from official_bench.data.build.example_proto import (
    classic_example,
    example_bytes,
)
from official_bench.data.records import pipeline, record_files, record_reader
from official_bench.runtime.keras_setup import tf

CTX = tf.distribute.InputContext()


def jpeg(value=0, height=8, width=8):
    return tf.io.encode_jpeg(tf.fill([height, width, 3],
                                     tf.constant(value, tf.uint8))).numpy()


def write(path, items):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for item in items:
            writer.write(item)
    return str(path)


def classic_tree(root, split="train", files=4, per_file=6, classes=5):
    """Labels encode (file, record): label = 1 + (file*per_file + i) % classes;
    image/filename holds 'f{file}r{i}' so the order can be read back."""
    os.makedirs(root, exist_ok=True)
    for f in range(files):
        write(os.path.join(root, f"{split}-{f:05d}-of-{files:05d}"), [
            classic_example(jpeg(10 * i), 1 + (f * per_file + i) % classes,
                            8, 8, filename=f"f{f}r{i}")
            for i in range(per_file)])
    return str(root)


def cfg(data_dir, **kw):
    base = dict(data_dir=str(data_dir), split="train", image_size=8,
                num_classes=5, batch_size=2, shuffle_buffer_size=1,
                file_shuffle_buffer_size=1, one_hot=False)
    base.update(kw)
    return DatasetConfig(**base)


def order(ds, files, count, ctx=CTX, seed=0, training=True):
    """(file basename, record index) of the first `count` raw records."""
    sizes = record_files.file_sizes(files)
    raw = record_reader.record_dataset(files, sizes, ds, ctx, training, seed)
    return [(os.path.basename(f.decode()), int(i))
            for f, i, *_ in raw.take(count).as_numpy_iterator()]


# ---------------------------------------------------------------- files


def test_missing_data_dir_errors_name_the_key_and_dir(tmp_path):
    with pytest.raises(ConfigError,
                       match=r"train_dataset\.data_dir is not set"):
        record_files.find_files(cfg(""), True)
    with pytest.raises(ConfigError,
                       match=r"validation_dataset\.data_dir .*nope"
                             r".* does not exist"):
        record_files.find_files(cfg(tmp_path / "nope", split="validation"),
                                False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match=r"data_dir .*empty.* is empty"):
        record_files.find_files(cfg(empty), True)


def test_no_files_for_split_lists_what_was_looked_for(tmp_path):
    classic_tree(tmp_path, split="train")
    with pytest.raises(ConfigError, match=r"no files for split 'validation'.*"
                                          r"validation-\*.*tfrecord"):
        record_files.find_files(cfg(tmp_path, split="validation"), False)


def test_filenames_key_and_missing_file(tmp_path):
    classic_tree(tmp_path, files=2)
    ds = cfg(tmp_path, filenames=["train-00001-of-00002"])
    files, layout = record_files.find_files(ds, True)
    assert files == [str(tmp_path / "train-00001-of-00002")]
    assert layout.name == "classic"
    with pytest.raises(ConfigError,
                       match=r"filenames: .*gone.* does not exist"):
        record_files.find_files(cfg(tmp_path, filenames=["gone"]), True)


def test_hidden_temporary_shards_are_ignored(tmp_path):
    classic_tree(tmp_path, files=2)
    write(tmp_path / ".train-00002-of-00003.abc.tmp", [b"half"])
    files, _ = record_files.find_files(cfg(tmp_path), True)
    assert [os.path.basename(f) for f in files] == [
        "train-00000-of-00002", "train-00001-of-00002"]


def test_tfds_layout_detected_directly_and_under_name_version(tmp_path):
    def tfds_files(directory):
        os.makedirs(directory, exist_ok=True)
        for s in range(2):
            write(os.path.join(directory,
                               f"imagenet2012-train.tfrecord-{s:05d}-of-00002"),
                  [example_bytes({"image": jpeg(), "label": 4})])
    tfds_files(tmp_path / "flat")
    files, layout = record_files.find_files(cfg(tmp_path / "flat"), True)
    assert layout.name == "tfds" and len(files) == 2
    # A TFDS data_dir root: <root>/imagenet2012/<version>/, newest wins.
    tfds_files(tmp_path / "root" / "imagenet2012" / "5.1.0")
    os.makedirs(tmp_path / "root" / "imagenet2012" / "5.0.0")
    files, layout = record_files.find_files(
        cfg(tmp_path / "root", name="imagenet2012"), True)
    assert layout.name == "tfds"
    assert all("/5.1.0/" in f for f in files)
    # Explicit layout: classic finds nothing here.
    with pytest.raises(ConfigError, match="classic"):
        record_files.find_files(cfg(tmp_path / "flat", layout="classic"), True)


def test_both_layouts_prefer_classic_unless_told(tmp_path):
    classic_tree(tmp_path, files=1)
    write(tmp_path / "x-train.tfrecord-00000-of-00001",
          [example_bytes({"image": jpeg(), "label": 0})])
    assert record_files.find_files(cfg(tmp_path), True)[1].name == "classic"
    assert record_files.find_files(cfg(tmp_path, layout="tfds"),
                              True)[1].name == "tfds"


# ---------------------------------------------------------------- labels


def _labels(ds, training=False):
    data = pipeline.records_dataset(ds, CTX, ds.batch_size, training, 0)
    return np.concatenate([y for _, y in data.as_numpy_iterator()])


def test_classic_labels_are_one_based_and_mapped_to_zero(tmp_path):
    root = tmp_path / "c"
    os.makedirs(root)
    write(root / "validation-00000-of-00001",
          [classic_example(jpeg(), label, 8, 8) for label in (1, 2, 3, 4)])
    ds = cfg(root, split="validation", num_classes=4, batch_size=4)
    assert sorted(_labels(ds)) == [0, 1, 2, 3]
    # 1001-class mode: keep the stored labels (0 = background).
    keep = cfg(root, split="validation", num_classes=1001, batch_size=4,
               label_offset=0)
    assert sorted(_labels(keep)) == [1, 2, 3, 4]


def test_tfds_labels_are_zero_based_and_one_hot(tmp_path):
    write(tmp_path / "d-validation.tfrecord-00000-of-00001",
          [example_bytes({"image": jpeg(), "label": label})
           for label in (0, 1, 2, 3)])
    ds = cfg(tmp_path, split="validation", num_classes=4, batch_size=4,
             one_hot=True)
    onehot = _labels(ds)
    assert onehot.shape == (4, 4)
    assert sorted(onehot.argmax(-1)) == [0, 1, 2, 3]
    assert onehot.sum() == 4


def test_images_have_the_configured_shape_dtype_and_range(tmp_path):
    classic_tree(tmp_path, files=2, per_file=4)
    for dtype in ("float32", "float16", "bfloat16"):
        ds = cfg(tmp_path, dtype=dtype, image_size=6, batch_size=3)
        images, labels = next(iter(factory.per_replica_dataset(
            ds, CTX, 3, True)))
        assert images.shape == (3, 6, 6, 3) and images.dtype.name == dtype
        assert labels.dtype == tf.int32
    ds = cfg(tmp_path, transfer_uint8=True, image_size=6, batch_size=3)
    images, _ = next(iter(pipeline.records_dataset(ds, CTX, 3, True)))
    assert images.dtype == tf.uint8


def test_factory_registers_records_and_tfds():
    assert factory.BUILDERS["records"] is pipeline.records_dataset
    assert (factory.BUILDERS["tfds"].__module__
            == "official_bench.data.records.tfds")


# ---------------------------------------------------------------- sharding


def test_shard_by_file_when_enough_files(tmp_path):
    files, _ = record_files.find_files(cfg(classic_tree(tmp_path, files=4)),
                                       True)
    ds = cfg(tmp_path)
    seen = []
    for pid in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2,
                                         input_pipeline_id=pid)
        got = order(ds, files, 12, ctx, training=False)
        assert len(got) == 12
        seen.append({f for f, _ in got})
    assert seen[0] == {"train-00000-of-00004", "train-00002-of-00004"}
    assert seen[1] == {"train-00001-of-00004", "train-00003-of-00004"}


def test_shard_by_record_when_fewer_files_than_pipelines(tmp_path):
    files, _ = record_files.find_files(
        cfg(classic_tree(tmp_path, files=1, per_file=9)), True)
    ds = cfg(tmp_path)
    parts = []
    for pid in range(3):
        ctx = tf.distribute.InputContext(num_input_pipelines=3,
                                         input_pipeline_id=pid)
        parts.append(order(ds, files, 100, ctx, training=False))
    assert [len(p) for p in parts] == [3, 3, 3]
    together = sorted(r for p in parts for r in p)
    assert together == [("train-00000-of-00001", i) for i in range(9)]


# ---------------------------------------------------------------- shuffling


def test_file_order_changes_with_shuffle_and_is_fixed_with_seed(tmp_path):
    files, _ = record_files.find_files(cfg(classic_tree(tmp_path, files=8,
                                                   per_file=2)), True)
    plain = cfg(tmp_path, file_shuffle_buffer_size=1, shuffle_buffer_size=1,
                deterministic=True)
    shuffled = cfg(tmp_path, file_shuffle_buffer_size=64,
                   shuffle_buffer_size=1, deterministic=True)

    def first_files(ds, seed):
        got = order(ds, files, 16, seed=seed)
        return [f for f, i in got if i == 0]  # first record of each file

    unshuffled = first_files(plain, 0)
    assert unshuffled == sorted(unshuffled)
    a, b = first_files(shuffled, 7), first_files(shuffled, 7)
    assert a == b, "deterministic + seed must fix the file order"
    assert sorted(a) == unshuffled and a != unshuffled
    assert first_files(shuffled, 8) != a


def test_record_order_changes_with_shuffle_and_is_fixed_with_seed(tmp_path):
    files, _ = record_files.find_files(cfg(classic_tree(tmp_path, files=1,
                                                   per_file=30)), True)
    plain = cfg(tmp_path, shuffle_buffer_size=1, deterministic=True)
    shuffled = cfg(tmp_path, shuffle_buffer_size=100, deterministic=True)
    in_order = [i for _, i in order(plain, files, 30, seed=3)]
    assert in_order == list(range(30))
    a = [i for _, i in order(shuffled, files, 30, seed=3)]
    b = [i for _, i in order(shuffled, files, 30, seed=3)]
    # Training repeats before the record shuffle, so epochs mix a little.
    assert a == b and a != in_order and set(a) <= set(in_order)
    assert [i for _, i in order(shuffled, files, 30, seed=4)] != a
    # Not deterministic: no seed is used, so two builds differ (30! orders).
    free = cfg(tmp_path, shuffle_buffer_size=100, deterministic=False)
    runs = {tuple(i for _, i in order(free, files, 30, seed=None))
            for _ in range(2)}
    assert len(runs) == 2


def test_whole_pipeline_is_reproducible_with_deterministic_and_seed(tmp_path):
    classic_tree(tmp_path, files=3, per_file=4)
    ds = cfg(tmp_path, deterministic=True, shuffle_buffer_size=8,
             file_shuffle_buffer_size=3, image_size=6, batch_size=4,
             crop_area_range=[0.3, 1.0])

    def batches(seed):
        data = pipeline.records_dataset(ds, CTX, 4, True, seed)
        return [(x.copy(), y.copy()) for x, y in
                data.take(4).as_numpy_iterator()]
    a, b, c = batches(5), batches(5), batches(6)
    for (xa, ya), (xb, yb) in zip(a, b):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    assert any(not np.array_equal(xa, xc) for (xa, _), (xc, _) in zip(a, c))


def test_training_repeats_and_eval_does_not(tmp_path):
    classic_tree(tmp_path, files=2, per_file=3)
    train = pipeline.records_dataset(cfg(tmp_path, batch_size=2), CTX, 2, True)
    assert len(list(train.take(20))) == 20  # 6 records, repeated
    val = pipeline.records_dataset(cfg(tmp_path, batch_size=2), CTX, 2, False)
    assert len(list(val)) == 3  # 6 records / 2, no repeat


def test_cache_keeps_records_in_memory(tmp_path):
    root = classic_tree(tmp_path / "d", files=2, per_file=3)
    ds = cfg(root, cache=True, batch_size=3)
    val = pipeline.records_dataset(ds, CTX, 3, False)
    first = [y.tolist() for _, y in val.as_numpy_iterator()]
    for name in os.listdir(root):
        os.remove(os.path.join(root, name))
    second = [y.tolist() for _, y in val.as_numpy_iterator()]
    assert second == first and len(first) == 2
    # Without the cache a second pass reads the (now deleted) files again.
    root2 = classic_tree(tmp_path / "e", files=2, per_file=3)
    nocache = pipeline.records_dataset(cfg(root2, batch_size=3), CTX, 3, False)
    list(nocache)
    for name in os.listdir(root2):
        os.remove(os.path.join(root2, name))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="train-0000.-of-00002: the file cannot be read"):
        list(nocache)


def test_private_threads_and_options(tmp_path):
    classic_tree(tmp_path, files=1, per_file=4)
    ds = cfg(tmp_path, deterministic=True)
    data = pipeline.records_dataset(ds, CTX, 2, True)
    assert data.options().deterministic is True
    assert pipeline.records_dataset(cfg(tmp_path), CTX, 2,
                                   True).options().deterministic is False
    pooled = factory.per_replica_dataset(ds, CTX, 2, True,
                                         num_private_threads=3)
    assert pooled.options().threading.private_threadpool_size == 3
    assert factory.per_replica_dataset(
        ds, CTX, 2, True).options().threading.private_threadpool_size in (
            None, 0)
    assert len(list(pooled.take(3))) == 3
