"""Checking record files completely (build_records --verify, tests).

Every record is read by the byte-checked reader and its whole image
decoded inside the guard; `check_records` yields each one's verdict and
never raises on bad data.
"""

from __future__ import annotations

from typing import Optional, Sequence

from official_bench.config import DatasetConfig
from official_bench.data.records.bad_records import parse_message
from official_bench.data.records.record_files import (
    CLASSIC_LAYOUT, Layout, file_sizes)
from official_bench.data.records.record_guard import GUARD_BLOCK, Decoder
from official_bench.data.records.record_reader import (
    BLOCK_FAILED, END_OK, read_file)
from official_bench.runtime.keras_setup import tf


class _Verifier(Decoder):
    """Decodes every whole image (no crop) and checks the label only."""

    @property
    def image_shape(self):
        return [1, 1, 3]

    @property
    def image_dtype(self):
        return tf.uint8

    def _image(self, parsed, seed):
        image = tf.io.decode_image(parsed[self.layout.image_key], channels=3,
                                   expand_animations=False)
        # Depend on the decoded pixels, so the decode cannot be pruned.
        return tf.zeros(self.image_shape, tf.uint8) * tf.reduce_min(
            image[:1, :1])


def check_records(files: Sequence[str], layout: Layout = CLASSIC_LAYOUT,
                  num_classes: Optional[int] = None,
                  label_offset: Optional[int] = None):
    """Yields (filename, index, status, detail) for every record.

    Records come in file order, except that a bad record comes after the
    good ones of its block of GUARD_BLOCK.

    Decodes every image completely; status is OK or the reason it is bad
    (CORRUPT_FILE, BAD_EXAMPLE, BAD_IMAGE, BAD_LABEL). Never raises on bad
    data.
    """
    ds = DatasetConfig(num_classes=num_classes or 2 ** 31 - 1,
                       image_size=1, num_channels=3)
    offset = layout.label_offset if label_offset is None else label_offset
    checker = _Verifier(ds, layout, offset, False)
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.constant(list(files), tf.string),
         tf.constant(file_sizes(files), tf.int64)))
    dataset = dataset.interleave(read_file, cycle_length=1)
    dataset = tf.data.Dataset.zip((
        dataset.batch(GUARD_BLOCK),
        tf.data.Dataset.from_tensors(tf.zeros([2], tf.int64)).repeat()))
    dataset = dataset.interleave(checker.guarded_block,
                                 cycle_length=tf.data.AUTOTUNE,
                                 num_parallel_calls=tf.data.AUTOTUNE,
                                 deterministic=True)
    dataset = dataset.filter(lambda image, label, status, *_: tf.not_equal(
        status, END_OK))
    dataset = dataset.map(lambda image, label, status, f, i, d: (
        f, i, status, d))
    for filename, index, status, detail in dataset.as_numpy_iterator():
        if status == BLOCK_FAILED:
            for line in detail.decode("utf-8", "replace").splitlines():
                yield parse_message(line)
            continue
        yield (filename.decode("utf-8", "replace"), int(index), int(status),
               detail.decode("utf-8", "replace"))
