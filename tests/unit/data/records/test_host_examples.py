"""`builder: records` without TensorFlow (data/records/host_examples.py),
side by side with the TensorFlow pipeline on the same records: the same
files found and sharded, the same labels and (within EVAL_MAD) the same
eval images, workers and processes reading disjoint parts that cover
every record, a seeded training order reshuffled each epoch, and bad
records stopping or skipped with the TensorFlow path's lines."""

import os
import zlib

import numpy as np
import pytest

from official_bench.config import ConfigError, DatasetConfig
from official_bench.data.build.example_proto import (
    classic_example,
    example_bytes,
)
from official_bench.data.build.record_verify import check_records
from official_bench.data.records import (
    host_examples,
    pipeline,
    record_files,
    record_problems,
    record_sets,
)
from official_bench.runtime.keras_setup import tf
from support.natural_images import EVAL_MAD, natural_jpeg, record_set

CTX = tf.distribute.InputContext()


def write(path, items):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for item in items:
            writer.write(item)
    return str(path)


def tiny_jpeg(value):
    return tf.io.encode_jpeg(tf.fill([8, 8, 3], tf.constant(
        value % 256, tf.uint8))).numpy()


def numbered_tree(root, files=4, per_file=5, split="train"):
    """Classic records whose 1-based labels number them 1..files*per_file."""
    os.makedirs(root, exist_ok=True)
    for f in range(files):
        write(os.path.join(root, f"{split}-{f:05d}-of-{files:05d}"), [
            classic_example(tiny_jpeg(i), 1 + f * per_file + i, 8, 8)
            for i in range(per_file)])
    return str(root)


def numbered_cfg(root, files=4, per_file=5, **kw):
    base = dict(builder="records", data_dir=str(root), split="train",
                image_size=8, num_classes=files * per_file,
                shuffle_buffer_size=1, file_shuffle_buffer_size=1)
    base.update(kw)
    return DatasetConfig(**base)


def labels(ds, files, n=None, **kw):
    args = dict(training=False, seed=0, worker_index=0, num_workers=1)
    args.update(kw)
    out = host_examples.worker_examples(ds, files, **args)
    if n is None:
        return [label for _, label in out]
    return [next(out)[1] for _ in range(n)]


@pytest.fixture(scope="module")
def natural(tmp_path_factory):
    """Records of 160x120 natural JPEGs, built by the project's builder."""
    return record_set(str(tmp_path_factory.mktemp("natural")), classes=3,
                      train=6, validation=4, width=160, height=120)


@pytest.mark.parametrize("decoder", ["simplejpeg", "nvimgcodec_cpu"])
def test_eval_examples_are_the_tensorflow_pipelines(natural, decoder):
    ds = DatasetConfig(builder="records", data_dir=natural,
                       split="validation", image_size=64, num_classes=3)
    files = host_examples.process_files(ds, 0, 1, training=False)
    ours = list(host_examples.worker_examples(
        ds, files, training=False, seed=0, worker_index=0, num_workers=1,
        decoder=decoder))
    tf_ds = DatasetConfig(builder="records", data_dir=natural,
                          split="validation", image_size=64, num_classes=3,
                          transfer_uint8=True, one_hot=False,
                          deterministic=True)
    theirs = list(pipeline.records_dataset(tf_ds, CTX, 1, False)
                  .unbatch().as_numpy_iterator())
    assert len(ours) == len(theirs) == 12
    assert [label for _, label in ours] == [int(y) for _, y in theirs]
    assert sorted(set(label for _, label in ours)) == [0, 1, 2]
    for (image, _), (expected, _) in zip(ours, theirs):
        assert image.shape == (64, 64, 3) and image.dtype == np.uint8
        assert np.abs(image.astype(int) - expected).mean() < \
            EVAL_MAD[decoder]


def test_a_gpu_decoders_workers_draw_the_same_crops_and_labels(natural):
    """decode: gpu's path (here on nvImageCodec's CPU decoder) takes the
    same records, windows and flips as simplejpeg's: the same labels in
    the same order, images within the decoders' difference (at a size
    where simplejpeg never scales in the DCT, which nvImageCodec does not
    do: crops of 160x120 images to 128)."""
    ds = DatasetConfig(builder="records", data_dir=natural, split="train",
                       image_size=128, num_classes=3, shuffle_buffer_size=8)
    files = host_examples.process_files(ds, 0, 1, training=True)

    def first(decoder, n=24):
        stream = host_examples.worker_examples(
            ds, files, training=True, seed=3, worker_index=1, num_workers=2,
            decoder=decoder, decode_devices=(5, 7))
        return [next(stream) for _ in range(n)]
    ours, theirs = first("nvimgcodec_cpu"), first("simplejpeg")
    assert [y for _, y in ours] == [y for _, y in theirs]
    mads = [np.abs(a.astype(int) - b).mean()
            for (a, _), (b, _) in zip(ours, theirs)]
    assert max(mads) < 2 * EVAL_MAD["nvimgcodec_cpu"], mads
    assert min(mads) > 0.5, mads  # another decoder did decode them


def test_train_examples_are_crops_of_the_right_size_and_labels(natural):
    ds = DatasetConfig(builder="records", data_dir=natural, split="train",
                       image_size=32, num_classes=3, shuffle_buffer_size=8)
    files = host_examples.process_files(ds, 0, 1, training=True)
    stream = host_examples.worker_examples(
        ds, files, training=True, seed=3, worker_index=0, num_workers=1)
    examples = [next(stream) for _ in range(40)]  # 18 records: 2+ epochs
    assert all(i.shape == (32, 32, 3) and i.dtype == np.uint8
               for i, _ in examples)
    assert sorted(set(label for _, label in examples)) == [0, 1, 2]
    # Random crops: the same record's two epochs look different.
    assert len({zlib.crc32(i.tobytes()) for i, _ in examples}) == 40


def test_files_are_found_as_the_tensorflow_path_finds_them(tmp_path):
    numbered_tree(tmp_path / "classic", files=3)
    flat = tmp_path / "tfds"
    nested = tmp_path / "root" / "imagenet2012" / "5.1.0"
    for directory in (flat, nested):
        os.makedirs(directory)
        for s in range(2):
            write(directory / f"imagenet2012-train.tfrecord-{s:05d}-of-00002",
                  [example_bytes({"image": tiny_jpeg(0), "label": 4})])
    os.makedirs(tmp_path / "empty")
    cases = [dict(data_dir=str(tmp_path / "classic")),
             dict(data_dir=str(flat)),
             dict(data_dir=str(tmp_path / "root"), name="imagenet2012"),
             dict(data_dir=str(flat), layout="classic"),
             dict(data_dir=str(tmp_path / "classic"),
                  filenames=["train-00001-of-00003", "gone"]),
             dict(data_dir=str(tmp_path / "empty")),
             dict(data_dir=str(tmp_path / "missing")), dict()]
    for case in cases:
        ds = DatasetConfig(builder="records", split="train", **case)
        try:
            expected = record_files.find_files(ds, True)
        except ConfigError as e:
            with pytest.raises(ConfigError) as got:
                record_sets.find_files(ds, True)
            assert str(got.value) == str(e)
        else:
            assert record_sets.find_files(ds, True) == expected
            assert record_sets.file_sizes(expected[0]) == \
                record_files.file_sizes(expected[0])


@pytest.mark.parametrize("files,processes", [(6, 4), (4, 4), (3, 4),
                                             (1, 2)])
def test_processes_get_the_files_tensorflow_gives_them(tmp_path, files,
                                                       processes):
    numbered_tree(tmp_path, files=files)
    ds = numbered_cfg(tmp_path, files=files)
    every = record_files.find_files(ds, True)[0]
    for p in range(processes):
        mine = host_examples.process_files(ds, p, processes, True)
        if files >= processes:  # TF: dataset.shard(processes, p) on files
            assert mine == every[p::processes]
            assert mine.record_shard == (0, 1)
        else:  # TF: every file, dataset.shard on the records
            assert mine == every and mine.record_shard == (p, processes)


@pytest.mark.parametrize("files,processes,workers", [
    (4, 1, 3), (4, 2, 2), (4, 2, 3), (4, 1, 8), (2, 4, 2), (5, 3, 1)])
def test_parts_are_disjoint_and_cover_every_record(tmp_path, files,
                                                   processes, workers):
    numbered_tree(tmp_path, files=files)
    ds = numbered_cfg(tmp_path, files=files)
    seen = []
    for p in range(processes):
        mine = host_examples.process_files(ds, p, processes, False)
        for w in range(workers):
            seen += labels(ds, mine, worker_index=w, num_workers=workers)
    assert sorted(seen) == list(range(files * 5))
    # The share survives a copy of the list when it is passed on its own.
    if files < processes:
        shares = [labels(ds, list(host_examples.process_files(
            ds, p, processes, False)), record_shard=(p, processes))
            for p in range(processes)]
        assert sorted(sum(shares, [])) == list(range(files * 5))


def test_labels_follow_the_offset(tmp_path):
    numbered_tree(tmp_path, files=1, per_file=3)
    ds = numbered_cfg(tmp_path, files=1, per_file=3)
    files = host_examples.process_files(ds, 0, 1, False)
    assert labels(ds, files) == [0, 1, 2]
    kept = numbered_cfg(tmp_path, files=1, per_file=4, label_offset=0)
    assert labels(kept, files) == [1, 2, 3]
    tfds = tmp_path / "tfds"
    os.makedirs(tfds)
    write(tfds / "x-train.tfrecord-00000-of-00001",
          [example_bytes({"image": tiny_jpeg(0), "label": v})
           for v in (0, 2)])
    ds = numbered_cfg(tfds, files=1, per_file=3)
    assert labels(ds, host_examples.process_files(ds, 0, 1, False)) == [0, 2]


def test_training_is_seeded_endless_and_reshuffled_each_epoch(tmp_path):
    numbered_tree(tmp_path, files=4, per_file=3)
    ds = numbered_cfg(tmp_path, files=4, per_file=3,
                      file_shuffle_buffer_size=4)
    files = host_examples.process_files(ds, 0, 1, True)
    run = labels(ds, files, 60, training=True, seed=5)
    epochs = [run[i:i + 12] for i in range(0, 60, 12)]
    assert all(sorted(e) == list(range(12)) for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1  # the file order changes
    assert labels(ds, files, 60, training=True, seed=5) == run
    assert labels(ds, files, 60, training=True, seed=6) != run
    later = labels(ds, files, 12, training=True, seed=5, epoch_offset=1)
    assert later == epochs[1]
    # The record buffer (spanning epochs) mixes the order further.
    mixed = labels(numbered_cfg(tmp_path, files=4, per_file=3,
                                file_shuffle_buffer_size=4,
                                shuffle_buffer_size=6), files, 12,
                   training=True, seed=5)
    assert mixed != epochs[0] and len(set(mixed)) >= 8


@pytest.mark.parametrize("files,processes", [(4, 2), (3, 2), (1, 2), (2, 3)])
def test_records_of_counts_what_each_process_reads(tmp_path, files,
                                                   processes):
    """The JAX trainer sizes a multi-process evaluation pass by it."""
    numbered_tree(tmp_path, files=files)
    ds = numbered_cfg(tmp_path, files=files)
    for p in range(processes):
        mine = host_examples.process_files(ds, p, processes, False)
        assert host_examples.records_of(mine) == len(labels(ds, mine))


def test_processes_sharing_every_file_draw_their_own_crops(tmp_path):
    """Fewer files than processes: each process reads every file and a
    share of its records. With one seed they must still draw their own
    crops and flips (every record holds the same image here, so equal
    pixels would mean equal draws)."""
    pattern = tf.reshape(tf.range(32 * 32 * 3) % 251, [32, 32, 3])
    image = tf.io.encode_jpeg(tf.cast(pattern, tf.uint8)).numpy()
    write(tmp_path / "train-00000-of-00001",
          [classic_example(image, 1 + i, 32, 32) for i in range(8)])
    ds = numbered_cfg(tmp_path, files=1, per_file=8)
    drawn = []
    for p in range(2):
        files = host_examples.process_files(ds, p, 2, True)
        assert files.record_shard == (p, 2)
        out = host_examples.worker_examples(ds, files, training=True,
                                            seed=3, worker_index=0,
                                            num_workers=1)
        drawn.append([next(out)[0] for _ in range(4)])
    assert not all(np.array_equal(a, b) for a, b in zip(*drawn))


def bad_tree(root):
    """As tests/unit/data/records/test_bad_records.py's: an undecodable
    image, a non-Example and a label out of range in the first file, a
    truncated second, a third whose data checksum fails, a clean fourth."""
    os.makedirs(root, exist_ok=True)
    good = classic_example(tiny_jpeg(0), 1, 8, 8)
    write(os.path.join(root, "train-00000-of-00004"), [
        good, classic_example(b"definitely not a jpeg", 2, 8, 8),
        b"not a tf.train.Example", classic_example(tiny_jpeg(0), 9, 8, 8),
        classic_example(tiny_jpeg(0), 3, 8, 8)])
    cut = write(os.path.join(root, "train-00001-of-00004"), [good] * 3)
    with open(cut, "r+b") as f:
        f.truncate(os.path.getsize(cut) - 10)
    damaged = write(os.path.join(root, "train-00002-of-00004"), [good] * 3)
    with open(damaged, "r+b") as f:
        f.seek(len(good) + 16 + 20)
        f.write(b"\x00")
    write(os.path.join(root, "train-00003-of-00004"), [good] * 2)
    return str(root)


def tensorflow_lines(root):
    """The TF path's message line for each bad record (record_verify)."""
    return {record_problems.message_line(f, i, why)
            for f, i, status, why in check_records(
                record_files.classic_files(root, "train"), num_classes=3)
            if status != record_problems.OK}


def test_bad_records_stop_with_the_tensorflow_paths_line(tmp_path):
    root = bad_tree(tmp_path)
    expected = tensorflow_lines(root)
    assert len(expected) == 5
    ds = DatasetConfig(builder="records", data_dir=root, split="train",
                       image_size=8, num_classes=3)
    files = host_examples.process_files(ds, 0, 1, False)
    seen = []
    for w in range(4):  # a file each: each of the first three stops its own
        try:
            labels(ds, files, worker_index=w, num_workers=4)
        except host_examples.BadRecord as bad:
            line = str(bad)
            assert line.endswith(record_problems.SKIP_HINT)
            assert line[:-len(record_problems.SKIP_HINT)] in expected
            assert bad.filename == files[w] and files[w] in line
            seen.append(w)
    assert seen == [0, 1, 2]


@pytest.mark.parametrize("decoder", ["simplejpeg", "nvimgcodec_cpu"])
def test_bad_records_skipped_are_logged_as_on_tensorflow(tmp_path,
                                                         absl_messages,
                                                         decoder):
    root = bad_tree(tmp_path)
    ds = DatasetConfig(builder="records", data_dir=root, split="train",
                       image_size=8, num_classes=3, skip_bad_records=True)
    files = host_examples.process_files(ds, 0, 1, False)
    skipped = record_problems.SkippedRecords()
    got = list(host_examples.worker_examples(
        ds, files, training=False, seed=0, worker_index=0, num_workers=1,
        skipped=skipped, decoder=decoder))
    # good: 2 of file 0, 2 before the cut, 1 before the bad checksum, 2
    assert sorted(label for _, label in got) == [0] * 6 + [2]
    assert skipped.count("train") == 5
    lines = {m[:-len("; skipped (skip_bad_records: true)")]
             for m in absl_messages if m.endswith("(skip_bad_records: true)")}
    assert lines == tensorflow_lines(root)
    assert "official_bench: 5 bad record(s) skipped in train so far" in \
        absl_messages


def test_a_worker_with_nothing_to_read_says_so(tmp_path):
    numbered_tree(tmp_path, files=1, per_file=2)
    ds = numbered_cfg(tmp_path, files=1, per_file=2)
    files = host_examples.process_files(ds, 0, 1, True)
    with pytest.raises(ConfigError, match="no record to read.*fewer"):
        labels(ds, files, 1, training=True, worker_index=2, num_workers=3)


def test_a_worker_whose_files_cannot_be_read_is_not_told_fewer_workers(
        tmp_path):
    """Its files unreadable from the first record (skipped as bad), a
    training worker was told to use fewer loader workers, which cannot
    help."""
    numbered_tree(tmp_path, files=1, per_file=2)
    ds = numbered_cfg(tmp_path, files=1, per_file=2, skip_bad_records=True)
    files = host_examples.process_files(ds, 0, 1, True)
    with open(files[0], "wb") as f:
        f.write(b"not a record file")
    with pytest.raises(ConfigError) as e:
        labels(ds, files, 1, training=True)
    assert str(e.value) == (
        f"train_dataset: a loader worker has no record to read: its 1 "
        f"file(s) ({files[0]} ...) hold no record that can be read (each is "
        "truncated or corrupt from its first record): fix or rebuild those "
        "files, or leave them out (filenames)")


def test_a_file_gone_is_named(tmp_path):
    numbered_tree(tmp_path, files=2)
    ds = numbered_cfg(tmp_path, files=2)
    files = host_examples.process_files(ds, 0, 1, False)
    os.remove(files[1])
    with pytest.raises(host_examples.BadRecord,
                       match=f"bad record 0 in {files[1]}: the file cannot "
                       "be read"):
        labels(ds, files)


def test_a_file_gone_is_skipped_as_bad_with_skip_bad_records(
        tmp_path, absl_messages):
    """Its size could not be read, which stopped the run even with
    skip_bad_records: true; now it is a bad file like the others."""
    numbered_tree(tmp_path, files=2)
    ds = numbered_cfg(tmp_path, files=2, skip_bad_records=True)
    files = host_examples.process_files(ds, 0, 1, False)
    os.remove(files[1])
    skipped = record_problems.SkippedRecords()
    assert sorted(labels(ds, files, skipped=skipped)) == [0, 1, 2, 3, 4]
    assert skipped.count("train") == 1
    assert (f"official_bench: bad record 0 in {files[1]}: the file cannot "
            "be read (listed, then gone when its size was read); skipped "
            "(skip_bad_records: true)") in absl_messages


def test_only_builder_records(tmp_path):
    with pytest.raises(ConfigError, match="builder: records only"):
        host_examples.process_files(DatasetConfig(builder="tfds"), 0, 1,
                                    True)


def test_decoder_is_named_for_result_json():
    assert host_examples.DECODER == "simplejpeg"
    assert natural_jpeg(0, 16, 12)[:3] == b"\xff\xd8\xff"


class BoundedSkips(record_problems.SkippedRecords):
    """Fails a test whose worker would skip bad records forever."""

    def add(self, split, count):
        total = super().add(split, count)
        assert total < 100, "the worker skips bad records without end"
        return total


def test_a_worker_whose_every_record_is_bad_says_so(tmp_path):
    """skip_bad_records: true and a share of bad records only (here every
    label out of range): a training worker ends in one line instead of
    skipping them epoch after epoch until its stall timeout."""
    numbered_tree(tmp_path, files=2, per_file=3)
    ds = numbered_cfg(tmp_path, files=2, per_file=3, skip_bad_records=True,
                      label_offset=50, shuffle_buffer_size=4)
    files = host_examples.process_files(ds, 0, 1, True)
    with pytest.raises(ConfigError, match="train_dataset: a loader worker "
                       "skipped all 6 record"):
        labels(ds, files, 1, training=True, skipped=BoundedSkips())
    # One good record among them is enough to go on.
    one = numbered_cfg(tmp_path, files=2, per_file=3, skip_bad_records=True,
                       num_classes=1, shuffle_buffer_size=4)
    assert labels(one, files, 5, training=True, skipped=BoundedSkips()) \
        == [0] * 5


def header_only_jpeg(value):
    """A JPEG cut at its scan: its header reads, no decoder can decode it."""
    data = tiny_jpeg(value)
    return data[:data.index(b"\xff\xda")]


def test_a_gpu_decoder_takes_its_windows_a_group_a_call(natural, monkeypatch):
    """decode: gpu's path (nvImageCodec's CPU decoder here) decodes
    WINDOW_GROUP windows a call; the same examples in the same order as
    one a call, evaluation's last group included."""
    from official_bench.data.records import host_decode
    calls, real = [], host_decode.finish_crops

    def counted(pending, *args):
        calls.append(len(pending))
        return real(pending, *args)
    monkeypatch.setattr(host_decode, "finish_crops", counted)

    def run(group, training):
        monkeypatch.setattr(host_examples, "WINDOW_GROUP", group)
        split = "train" if training else "validation"
        ds = DatasetConfig(builder="records", data_dir=natural, split=split,
                           image_size=32, num_classes=3, shuffle_buffer_size=8)
        files = host_examples.process_files(ds, 0, 1, training)
        stream = host_examples.worker_examples(
            ds, files, training=training, seed=3, worker_index=0,
            num_workers=1, decoder="nvimgcodec_cpu")
        del calls[:]
        out = [next(stream) for _ in range(12)] if training else \
            list(stream)
        return out, list(calls)
    for training, groups in ((True, [5, 5, 5]), (False, [5, 5, 2])):
        grouped, seen = run(5, training)
        assert seen == groups, (training, seen)
        alone, seen = run(1, training)
        assert seen == [1] * 12
        assert [y for _, y in grouped] == [y for _, y in alone]
        for (a, _), (b, _) in zip(grouped, alone):
            assert (a == b).all()


@pytest.mark.parametrize("skip", [True, False])
def test_a_bad_image_in_a_group_is_that_records_line_in_order(
        tmp_path, monkeypatch, absl_messages, skip):
    monkeypatch.setattr(host_examples, "WINDOW_GROUP", 4)
    path = write(tmp_path / "train-00000-of-00001", [
        classic_example(header_only_jpeg(3) if i == 2 else tiny_jpeg(i),
                        1 + i, 8, 8) for i in range(6)])
    ds = numbered_cfg(tmp_path, files=1, per_file=6, skip_bad_records=skip)
    files = host_examples.process_files(ds, 0, 1, False)
    stream = host_examples.worker_examples(
        ds, files, training=False, seed=0, worker_index=0, num_workers=1,
        decoder="nvimgcodec_cpu")
    line = record_problems.message_line(path, 2, record_problems.undecodable(
        "image/encoded").format(len(header_only_jpeg(3))))
    if skip:
        assert [y for _, y in stream] == [0, 1, 3, 4, 5]
        assert line + "; skipped (skip_bad_records: true)" in absl_messages
    else:
        assert [next(stream)[1] for _ in range(2)] == [0, 1]
        with pytest.raises(host_examples.BadRecord) as bad:
            next(stream)
        assert str(bad.value) == line + record_problems.SKIP_HINT


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("decoder,module,wheel", [
    ("simplejpeg", "simplejpeg", "simplejpeg"),
    ("simplejpeg", "cv2", "opencv-python-headless"),
    ("nvimgcodec_cpu", "cv2", "opencv-python-headless")])
def test_a_missing_decoder_library_is_the_decoders_failure(
        tmp_path, monkeypatch, skip, decoder, module, wheel):
    """A decode library that cannot be imported was each record's
    'cannot be decoded as an image' (skipped one by one with
    skip_bad_records): it is the decoder's one error, naming it."""
    import sys

    from official_bench.data.records import host_decode
    numbered_tree(tmp_path, files=1, per_file=2)
    ds = numbered_cfg(tmp_path, files=1, per_file=2, skip_bad_records=skip)
    files = host_examples.process_files(ds, 0, 1, False)
    monkeypatch.setitem(sys.modules, module, None)  # import raises
    with pytest.raises(host_decode.DecoderUnavailable) as e:
        labels(ds, files, decoder=decoder)
    assert str(e.value).startswith(f"{module} is not importable ("), e.value
    assert str(e.value).endswith(
        f'; install {wheel} (pip install -e ".[jax]")'), e.value


def test_a_worker_stalled_opening_a_file_names_that_file(tmp_path):
    """Worker 1 of 2 reads files 1 and 3 a record from each in turn; file
    3 is a FIFO whose open() never returns (as on a dead mount): the line
    named file 1, the one /proc showed open, a healthy file."""
    import time

    from official_bench.data.feeds import shm_workers
    from official_bench.jax_backend import host_feed
    numbered_tree(tmp_path, files=4, per_file=2)
    ds = numbered_cfg(tmp_path, files=4, per_file=2)
    files = host_examples.process_files(ds, 0, 1, True)
    os.remove(files[3])
    os.mkfifo(files[3])
    pool = shm_workers.WorkerPool(
        host_feed.records_source(ds, files, True, 0),
        shm_workers.BatchShape(4, 8, 8, 3), 2)
    try:
        deadline = time.monotonic() + 60  # spawning, on a loaded machine
        while time.monotonic() < deadline and shm_workers.open_file_of(
                pool.pids[1], files) is None:
            time.sleep(0.05)
        pool.timeout = 2.0
        with pytest.raises(shm_workers.InputWorkerError) as e:
            for _ in range(4):
                pool.next().release()
    finally:
        pool.close()
    assert str(e.value) == (
        f"official_bench: train_dataset: input worker 1 of 2 (pid "
        f"{pool.pids[1]}) made no batch within 2 s (train_dataset."
        f"worker_timeout_seconds) while opening {files[3]}; is it blocked "
        "(a dead mount, a lock)?")
