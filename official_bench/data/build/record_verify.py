"""Checking record files completely (build_records --verify, tests).

Every record is read by the byte-checked reader and its whole image
decoded inside the guard; `check_records` yields each one's verdict and
never raises on bad data. `verify` checks a build's output directory with
it: every shard there, every record good, the counts the manifest expects.
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Sequence

from official_bench.config import DatasetConfig
from official_bench.data.build.manifest import MANIFEST
from official_bench.data.build.shards import shard_name
from official_bench.data.records.record_files import (
    CLASSIC_LAYOUT,
    Layout,
    classic_files,
    file_sizes,
)
from official_bench.data.records.record_guard import GUARD_BLOCK, Decoder
from official_bench.data.records.record_problems import parse_message
from official_bench.data.records.record_reader import (
    BLOCK_FAILED,
    END_OK,
    OK,
    read_file,
)
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


def verify(output_dir: str, splits: Sequence[str], num_classes: Optional[int],
           expected: Optional[Dict[str, int]] = None,
           log=print, expected_shards: Optional[Dict[str, int]] = None) -> int:
    """Counts records, decodes every image, checks labels; returns #problems.

    `expected` holds record counts per split, `expected_shards` shard counts
    (an interrupted build leaves some missing).
    """
    problems = 0
    for split in splits:
        files = classic_files(output_dir, split)
        if not files:
            log(f"verify [{split}]: no shards in {output_dir}")
            problems += 1
            continue
        total, bad = 0, []
        for filename, index, status, detail in check_records(
                files, CLASSIC_LAYOUT, num_classes):
            if status == OK:
                total += 1
            else:
                bad.append(f"{filename} record {index}: {detail}")
        log(f"verify [{split}]: {len(files)} shard(s), {total} good "
            f"record(s), {len(bad)} bad")
        for line in bad:
            log(f"  BAD {line}")
        problems += len(bad)
        want_shards = (expected_shards or {}).get(split)
        if want_shards is not None:
            missing = [shard_name(split, i, want_shards)
                       for i in range(want_shards)
                       if not os.path.exists(os.path.join(
                           output_dir, shard_name(split, i, want_shards)))]
            if missing:
                log(f"verify [{split}]: {len(missing)} of {want_shards} "
                    f"shard(s) missing (first: {missing[0]}); the build did "
                    "not finish: re-run the build command")
                problems += 1
        want = (expected or {}).get(split)
        if want is not None and want != total:
            log(f"verify [{split}]: expected {want} records "
                f"({MANIFEST}), found {total}")
            problems += 1
    return problems

