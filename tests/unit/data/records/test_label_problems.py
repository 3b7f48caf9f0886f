"""A label outside the range that says a setting is wrong (the layout, the
label_offset) is named as such, with the value to set, and without the
skip_bad_records hint (skipping would train on a subset of the classes);
both backends say it in the same words."""

import threading

import pytest

from official_bench.config import DatasetConfig
from official_bench.data.build.example_proto import (
    classic_example,
    example_bytes,
)
from official_bench.data.records import (
    host_examples,
    pipeline,
    record_problems,
)
from official_bench.runtime.keras_setup import tf

CLASSIC_NAME = "train-00000-of-00001"
TFDS_NAME = "imagenet2012-train.tfrecord-00000-of-00001"


def jpeg():
    return tf.io.encode_jpeg(tf.zeros([8, 8, 3], tf.uint8)).numpy()


def tfds_example(label):
    return example_bytes({"image": jpeg(), "label": label})


CASES = [
    # classic records under TFDS names: no `label`, classic keys named
    (TFDS_NAME, lambda: classic_example(jpeg(), 2, 8, 8), {},
     "the record has no label (layout tfds reads image + label); it has "
     "image/encoded + image/class/label (layout classic): set layout: "
     "classic and list the files in filenames", False),
    # TFDS records (0-based) under classic names: the other way round
    (CLASSIC_NAME, lambda: tfds_example(1), {},
     "the record has no image/class/label (layout classic reads "
     "image/encoded + image/class/label); it has image + label (layout tfds): "
     "set layout: tfds and list the files in filenames",
     False),
    (CLASSIC_NAME, lambda: example_bytes({"other": 1}), {},
     "the record has no image/class/label (layout classic reads "
     "image/encoded + image/class/label)", False),
    # 0-based labels read with label_offset 1
    (TFDS_NAME, lambda: tfds_example(0), {"label_offset": 1},
     "label 0 is outside 1..3 (label_offset 1, num_classes 3): the labels "
     "likely start at 0, so label_offset is likely wrong (set "
     "label_offset: 0)", False),
    # 1-based labels read with label_offset 0
    (TFDS_NAME, lambda: tfds_example(3), {},
     "label 3 is outside 0..2 (label_offset 0, num_classes 3): one past the "
     "last label, so label_offset or num_classes is likely wrong (set "
     "label_offset: 1 if the labels start at 1, or num_classes: 4)", False),
    # far outside: a bad record
    (CLASSIC_NAME, lambda: classic_example(jpeg(), 9, 8, 8), {},
     "label 9 is outside 1..3 (label_offset 1, num_classes 3)", True),
]


def config(root, **kw):
    return DatasetConfig(builder="records", data_dir=str(root), split="train",
                         image_size=8, num_classes=3, batch_size=1,
                         one_hot=False, shuffle_buffer_size=1, **kw)


def tensorflow_error(ds) -> str:
    data = pipeline.records_dataset(ds, tf.distribute.InputContext(), 1,
                                    False)
    out = {}

    def run():
        try:
            list(data.as_numpy_iterator())
        except tf.errors.OpError as e:
            out["error"] = str(e)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the input pipeline hangs"
    return out.get("error", "")


def host_error(ds) -> str:
    files = host_examples.process_files(ds, 0, 1, False)
    with pytest.raises(host_examples.BadRecord) as bad:
        list(host_examples.worker_examples(ds, files, training=False, seed=0,
                                           worker_index=0, num_workers=1))
    return str(bad.value)


@pytest.mark.parametrize("name,record,settings,words,hint", CASES)
def test_both_backends_name_the_setting(tmp_path, name, record, settings,
                                        words, hint):
    path = str(tmp_path / name)
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(record())
    ds = config(tmp_path, **settings)
    line = record_problems.message_line(path, 0, words) + (
        record_problems.SKIP_HINT if hint else "")
    assert host_error(ds) == line
    error = tensorflow_error(ds)
    assert line in error, error
    assert ("skip_bad_records" in error) == hint, error


def test_label_problem_chooses_as_the_guard():
    problem = record_problems.label_problem
    assert problem(0, 1, 10) == (record_problems.LABEL_BELOW.format(
        0, 1, 10, 1, 10, 0, 0), True)
    assert problem(-1, 0, 10)[1] is False  # no offset below 0
    assert problem(11, 1, 10)[1] is True
    assert problem(12, 1, 10)[1] is False
    assert problem(-1, 1, 10, "no key") == ("no key", True)
