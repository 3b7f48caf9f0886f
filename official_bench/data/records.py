"""`builder: records`: ImageNet-style TFRecord files -> batched tf.data.Dataset.

Two file layouts, chosen by `layout` (auto detects them):

- classic (`build_imagenet_data.py`, DLPerf): `{data_dir}/train-00000-of-01024`,
  `validation-00000-of-00128`; keys `image/encoded` (JPEG), `image/class/label`
  (int64, 1-based: mapped to 0..N-1; `label_offset: 0` with
  `num_classes: 1001` keeps the background class), optional
  `image/object/bbox/{xmin,ymin,xmax,ymax}` used as the train crop's boxes.
- tfds (a prepared tensorflow-datasets directory, read without TFDS):
  `imagenet2012-train.tfrecord-00000-of-01024` in `data_dir` or in
  `data_dir/<name>/<version>/`; keys `image`, `label` (0-based).

The pipeline, in order (each step assigns what tf.data returns):
files -> shard by file (when every input pipeline gets at least one file)
-> shuffle files -> repeat (training) -> interleave-read -> [shard by
record] -> [cache] -> shuffle records (training) -> [repeat] -> blocks of
GUARD_BLOCK records, each parsed + decoded + augmented inside an
error-catching inner dataset, blocks in parallel -> [skip filter] -> batch
(drop_remainder) -> one-hot -> options (deterministic, parallel batch).
Evaluation reads each record once per pass (no repeat, no shuffle).
Seeds: with `deterministic: true` the shuffles and the augmentation use the
run's seed (same order and crops every run); otherwise they are random.

Bad data: each file's reader checks that it read the whole file, and each
record is parsed and decoded inside a guard, so a corrupt file, a record
that is not a tf.train.Example, an undecodable image or a label out of
range is turned into a status instead of an anonymous TensorFlow error.
With `skip_bad_records: false` (default) the first one stops the input
with an error naming the file and the record; with `true` it is dropped
and logged with a running count (`bad_record_count()`).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from absl import logging

from official_bench.config import ConfigError, DatasetConfig
from official_bench.data import preprocessing
from official_bench.runtime.keras_setup import tf

CLASSIC = "classic"
TFDS = "tfds"
READ_BUFFER_BYTES = 8 * 1024 * 1024
INTERLEAVE_CYCLE = 10  # files read at once per pipeline (r2.3: 10)
GUARD_BLOCK = 32  # records per error-catching inner dataset (<= 62)
READ_CHUNK = 64  # records per step of the reader's byte count

# Record status codes carried through the pipeline.
OK, END_OK, CORRUPT_FILE, BAD_EXAMPLE, BAD_IMAGE, BAD_LABEL, BLOCK_FAILED = \
    range(7)


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a layout keeps the image and label, and how labels count."""
    name: str
    image_key: str
    label_key: str
    label_offset: int  # subtracted from stored labels
    has_boxes: bool


CLASSIC_LAYOUT = Layout(CLASSIC, "image/encoded", "image/class/label", 1,
                        True)
TFDS_LAYOUT = Layout(TFDS, "image", "label", 0, False)
LAYOUTS = {CLASSIC: CLASSIC_LAYOUT, TFDS: TFDS_LAYOUT}

_SHARD_NAME = re.compile(r"-\d{5}-of-\d{5}$")


# --------------------------------------------------------------------------
# Finding the files
# --------------------------------------------------------------------------


def _key(is_training: bool) -> str:
    return "train_dataset" if is_training else "validation_dataset"


def _visible(paths: Sequence[str]) -> List[str]:
    """Drops hidden files (the builder's .tmp shards) and directories."""
    return sorted(p for p in paths if not os.path.basename(p).startswith(".")
                  and not tf.io.gfile.isdir(p))


def _version_key(path: str) -> Tuple:
    parts = os.path.basename(path.rstrip("/")).split(".")
    return tuple(int(p) if p.isdigit() else -1 for p in parts)


def _tfds_candidates(data_dir: str, split: str,
                     name: Optional[str]) -> List[str]:
    direct = _visible(tf.io.gfile.glob(
        os.path.join(data_dir, f"*-{split}.tfrecord-*")))
    if direct:
        return direct
    # A TFDS data_dir root: <data_dir>/<name>/<version>/.
    names = [name] if name else ["*"]
    for n in names:
        versions = sorted(tf.io.gfile.glob(os.path.join(data_dir, n, "*")),
                          key=_version_key, reverse=True)
        for version_dir in versions:
            files = _visible(tf.io.gfile.glob(
                os.path.join(version_dir, f"*-{split}.tfrecord-*")))
            if files:
                return files
    return []


def find_files(ds: DatasetConfig, is_training: bool) -> Tuple[List[str],
                                                                 Layout]:
    """The sorted record files for `ds.split` and their layout.

    Raises ConfigError naming the key and the directory when data_dir is
    unset, missing or empty, or holds no files for the split.
    """
    key = _key(is_training)
    if ds.filenames:
        files = []
        for name in ds.filenames:
            path = name if (os.path.isabs(name) or not ds.data_dir or
                            "://" in name) else os.path.join(ds.data_dir, name)
            if not tf.io.gfile.exists(path):
                raise ConfigError(f"{key}.filenames: {path!r} does not exist")
            files.append(path)
        return files, _layout_for(ds, files, key)
    if not ds.data_dir:
        raise ConfigError(
            f"{key}.data_dir is not set: builder: records needs the directory "
            f"of the TFRecord files (--data_dir=...), or use builder: "
            "synthetic")
    data_dir = ds.data_dir
    if not tf.io.gfile.isdir(data_dir):
        raise ConfigError(f"{key}.data_dir {data_dir!r} does not exist or is "
                          "not a directory")
    if not tf.io.gfile.listdir(data_dir):
        raise ConfigError(f"{key}.data_dir {data_dir!r} is empty; write "
                          "TFRecords there first (python -m "
                          "official_bench.data.build_records)")
    classic = _visible(tf.io.gfile.glob(os.path.join(data_dir,
                                                     f"{ds.split}-*")))
    tfds = _tfds_candidates(data_dir, ds.split, ds.name)
    if ds.layout == CLASSIC or (ds.layout == "auto" and classic):
        if ds.layout == "auto" and tfds:
            logging.warning("%s.data_dir %s holds both classic (%s-*) and "
                            "TFDS (*-%s.tfrecord-*) files; reading the "
                            "classic ones (set layout: tfds for the others)",
                            key, data_dir, ds.split, ds.split)
        files, layout = classic, CLASSIC_LAYOUT
    elif ds.layout == TFDS or (ds.layout == "auto" and tfds):
        files, layout = tfds, TFDS_LAYOUT
    else:
        files, layout = [], None
    if not files:
        looked = {
            CLASSIC: f"{ds.split}-* (classic)",
            TFDS: f"*-{ds.split}.tfrecord-* (TFDS, also under <name>/"
                  "<version>/)",
        }
        wanted = [looked[ds.layout]] if ds.layout in looked else \
            list(looked.values())
        raise ConfigError(
            f"{key}: no files for split {ds.split!r} in data_dir "
            f"{data_dir!r}; looked for {' and '.join(wanted)}")
    return files, layout


def _layout_for(ds: DatasetConfig, files: Sequence[str], key: str) -> Layout:
    if ds.layout in LAYOUTS:
        return LAYOUTS[ds.layout]
    tfds_like = [".tfrecord-" in os.path.basename(f) for f in files]
    if all(tfds_like):
        return TFDS_LAYOUT
    if not any(tfds_like):
        return CLASSIC_LAYOUT
    raise ConfigError(f"{key}.filenames mixes classic and TFDS file names; "
                      "set layout: classic or tfds")


def file_sizes(files: Sequence[str]) -> List[int]:
    """Byte sizes, read once at build time (the reader checks it read all)."""
    return [tf.io.gfile.stat(f).length for f in files]


# --------------------------------------------------------------------------
# Reading records
# --------------------------------------------------------------------------


def read_file(filename: tf.Tensor, size: tf.Tensor) -> tf.data.Dataset:
    """One file's records as (filename, index, record, status, detail).

    Read errors end the file instead of raising; a final element with
    status CORRUPT_FILE says so when fewer than `size` bytes were read.
    The byte count runs on chunks of READ_CHUNK records (an empty chunk
    marks the end), so it costs one function call per chunk, not per
    record.
    """
    records = tf.data.TFRecordDataset(filename,
                                      buffer_size=READ_BUFFER_BYTES)
    # ignore_errors() retries a file that cannot be opened forever, so a
    # file that vanished is not opened at all (and reported below).
    exists = tf.size(tf.io.matching_files(filename)) > 0
    records = records.take(tf.where(exists, tf.constant(-1, tf.int64), 0))
    chunks = records.ignore_errors().batch(READ_CHUNK)
    chunks = chunks.concatenate(
        tf.data.Dataset.from_tensors(tf.zeros([0], tf.string)))

    def step(state, chunk):
        index, offset = state
        n = tf.shape(chunk, out_type=tf.int64)[0]
        framed = tf.reduce_sum(
            tf.cast(tf.strings.length(chunk), tf.int64) + 16)

        def records_out():
            return ((index + n, offset + framed),
                    (tf.fill([n], filename), index + tf.range(n), chunk,
                     tf.fill([n], OK), tf.fill([n], "")))

        def end_out():
            corrupt = tf.not_equal(offset, size)
            m = tf.cast(corrupt, tf.int64)
            detail = tf.cond(
                tf.equal(offset, 0),
                lambda: tf.strings.format(
                    "the file cannot be read (missing, unreadable, or not "
                    "TFRecord data from its first record; {} bytes "
                    "expected)", size),
                lambda: tf.strings.format(
                    "corrupt or truncated TFRecord data: only the first {} "
                    "record(s) ({} of {} bytes) could be read",
                    (index, offset, size)))
            return ((index, offset),
                    (tf.fill([m], filename), tf.fill([m], index),
                     tf.fill([m], ""), tf.fill([m], CORRUPT_FILE),
                     tf.fill([m], detail)))
        return tf.cond(n > 0, records_out, end_out)

    chunks = chunks.scan((tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
                         step)
    return chunks.unbatch()


def _seed(seed: Optional[int], *salt: int) -> Optional[int]:
    if seed is None:
        return None
    value = seed
    for s in salt:
        value = (value * 1000003 + s) % (2 ** 31 - 1)
    return value


def record_dataset(files: Sequence[str], sizes: Sequence[int],
                   ds: DatasetConfig, ctx: tf.distribute.InputContext,
                   is_training: bool, seed: Optional[int]) -> tf.data.Dataset:
    """Files -> raw records (filename, index, record, status, detail).

    Sharded for `ctx`, shuffled (files and records) and repeated when
    training. `seed` fixes both shuffles (None: a different order each run).
    """
    num_pipelines, pipeline_id = ctx.num_input_pipelines, ctx.input_pipeline_id
    by_file = len(files) >= num_pipelines
    deterministic = bool(ds.deterministic)
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.constant(list(files), tf.string),
         tf.constant([int(s) for s in sizes], tf.int64)))
    n_files = len(files)
    if num_pipelines > 1 and by_file:
        dataset = dataset.shard(num_pipelines, pipeline_id)
        n_files = len(range(pipeline_id, len(files), num_pipelines))
    if is_training and ds.file_shuffle_buffer_size > 1 and n_files > 1:
        # Sharding by record needs every pipeline to read the same order:
        # one seed for all of them (and never None).
        file_seed = _seed(seed, 1, pipeline_id) if by_file else \
            _seed(seed if seed is not None else 0, 1)
        dataset = dataset.shuffle(min(ds.file_shuffle_buffer_size, n_files),
                                  seed=file_seed,
                                  reshuffle_each_iteration=True)
    if is_training and not ds.cache:
        dataset = dataset.repeat()
    dataset = dataset.interleave(
        read_file, cycle_length=max(1, min(INTERLEAVE_CYCLE, n_files)),
        block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic or not by_file)
    if num_pipelines > 1 and not by_file:
        dataset = dataset.shard(num_pipelines, pipeline_id)
    if ds.cache:
        dataset = dataset.cache()
    if is_training and ds.shuffle_buffer_size > 1:
        dataset = dataset.shuffle(ds.shuffle_buffer_size,
                                  seed=_seed(seed, 2, pipeline_id),
                                  reshuffle_each_iteration=True)
    if is_training and ds.cache:
        dataset = dataset.repeat()
    return dataset


# --------------------------------------------------------------------------
# Parsing and decoding, guarded
# --------------------------------------------------------------------------


def _feature_spec(layout: Layout) -> Dict[str, object]:
    spec = {
        layout.image_key: tf.io.FixedLenFeature((), tf.string, b""),
        layout.label_key: tf.io.FixedLenFeature((), tf.int64, -1),
    }
    if layout.has_boxes:
        for side in ("ymin", "xmin", "ymax", "xmax"):
            spec[f"image/object/bbox/{side}"] = tf.io.VarLenFeature(
                tf.float32)
    return spec


def _boxes(parsed, layout: Layout) -> tf.Tensor:
    """[N, 4] boxes (ymin, xmin, ymax, xmax) clipped to 0..1; N may be 0."""
    if not layout.has_boxes:
        return tf.zeros([0, 4], tf.float32)
    sides = [tf.sparse.to_dense(parsed[f"image/object/bbox/{s}"])
             for s in ("ymin", "xmin", "ymax", "xmax")]
    n = tf.reduce_min([tf.size(s) for s in sides])
    boxes = tf.stack([s[:n] for s in sides], axis=1)
    boxes = tf.clip_by_value(boxes, 0.0, 1.0)
    valid = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    return tf.boolean_mask(boxes, valid)


# decode_fn(image_bytes, boxes, seed) -> one image as build_dataset emits it
DecodeFn = Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor]


@dataclasses.dataclass(frozen=True)
class _Decoder:
    """parse + decode + augment one record; the pieces of the guard.

    Elements out: (image, label, status, filename, index, detail).
    """
    ds: DatasetConfig
    layout: Layout
    label_offset: int
    is_training: bool
    decode_fn: Optional[DecodeFn] = None  # benchmarks swap the decode

    @property
    def image_shape(self):
        ds = self.ds
        return [ds.image_size, ds.image_size, ds.num_channels]

    @property
    def image_dtype(self):
        return tf.uint8 if self.ds.transfer_uint8 else tf.as_dtype(
            self.ds.dtype)

    def placeholder(self, status, filename, index, detail):
        return (tf.zeros(self.image_shape, self.image_dtype),
                tf.constant(-1, tf.int32), tf.cast(status, tf.int32),
                filename, index, detail)

    def decode(self, filename, index, record, status, detail, seed):
        """Runs inside the guard: any error here marks the record bad.

        Reader statuses (an empty record) parse as an empty Example, so
        one cond decides: decode the image, or a placeholder saying why not.
        """
        parsed = tf.io.parse_single_example(record,
                                            _feature_spec(self.layout))
        raw_label = parsed[self.layout.label_key]
        label = raw_label - self.label_offset
        in_range = (label >= 0) & (label < self.ds.num_classes)

        def image():
            return (self._image(parsed, seed), tf.cast(label, tf.int32),
                    tf.constant(OK, tf.int32), filename, index,
                    tf.constant(""))

        def bad():
            reader_ok = tf.equal(status, OK)
            why = tf.cond(reader_ok, lambda: tf.strings.format(
                "label {} is outside {}..{} (label_offset {}, num_classes {})",
                (raw_label, self.label_offset,
                 self.label_offset + self.ds.num_classes - 1,
                 self.label_offset, self.ds.num_classes)), lambda: detail)
            return self.placeholder(tf.where(reader_ok, BAD_LABEL, status),
                                    filename, index, why)
        return tf.cond(tf.equal(status, OK) & in_range, image, bad)

    def _image(self, parsed, seed):
        ds = self.ds
        image_bytes = parsed[self.layout.image_key]
        if self.decode_fn is not None:
            return self.decode_fn(image_bytes, _boxes(parsed, self.layout),
                                  seed)
        if self.is_training:
            return preprocessing.preprocess_for_train(
                image_bytes, _boxes(parsed, self.layout), seed,
                image_size=ds.image_size, channels=ds.num_channels,
                area_range=ds.crop_area_range,
                aspect_ratio_range=ds.crop_aspect_ratio_range,
                min_object_covered=ds.min_object_covered,
                random_flip=ds.random_flip, mean_subtract=ds.mean_subtract,
                standardize=ds.standardize, dtype=ds.dtype,
                transfer_uint8=ds.transfer_uint8)
        return preprocessing.preprocess_for_eval(
            image_bytes, image_size=ds.image_size, channels=ds.num_channels,
            crop_padding=ds.eval_crop_padding,
            mean_subtract=ds.mean_subtract, standardize=ds.standardize,
            dtype=ds.dtype, transfer_uint8=ds.transfer_uint8)

    def diagnose(self, filename, index, record, status, detail, seed):
        """Runs only when decode failed: can the record at least be parsed?"""
        parsed = tf.io.parse_single_example(record,
                                            _feature_spec(self.layout))
        size = tf.strings.length(parsed[self.layout.image_key])
        return self.placeholder(BAD_IMAGE, filename, index, tf.strings.format(
            self.layout.image_key + " ({} bytes) cannot be decoded as an "
            "image", size))

    def not_an_example(self, filename, index, record, status, detail, seed):
        return self.placeholder(BAD_EXAMPLE, filename, index, tf.strings.format(
            "the record ({} bytes) is not a tf.train.Example with "
            f"{self.layout.image_key} and {self.layout.label_key}",
            tf.strings.length(record)))

    def fallback(self, *element) -> tf.data.Dataset:
        """One failed record -> one placeholder saying why it failed.

        tf.data has no try/except: an inner dataset with ignore_errors()
        and alternatives tried in order does the job.
        """
        one = tf.data.Dataset.from_tensors(element)
        parse_only = one.map(self.diagnose).ignore_errors()
        last_resort = one.map(self.not_an_example)
        return parse_only.concatenate(last_resort).take(1)

    def guarded_block(self, block, block_seed,
                      strict: bool = False) -> tf.data.Dataset:
        """A block of records -> the decoded records, bad ones reported.

        `block` is (filename, index, record, status, detail), batched;
        `block_seed` two integers from which each record's augmentation
        seed derives. The records are decoded by an inner dataset with
        ignore_errors(), so a record whose parse or decode raised is simply
        missing; a scan notes which positions came out (a bit mask) and at
        the end of the block sends the missing ones through `fallback` to
        say why. Setting up the inner datasets costs about a millisecond,
        paid once per block of GUARD_BLOCK records.

        strict: the scan stops at the first bad record with an error naming
        it (a record that raised is noticed when the next one comes out, or
        at the end of the block), and emits only good records (one step
        behind, so that the end of the block can still raise). Otherwise bad records stay in the
        stream with their status, and the block ends with a marker: END_OK,
        or BLOCK_FAILED with the count in `label` and one message line per
        missing record in `detail` (see `_keep_or_log`).
        """
        n = tf.shape(block[0])[0]
        positions = tf.range(n, dtype=tf.int64)
        seeds = tf.stack([tf.fill([n], block_seed[0]),
                          block_seed[1] + positions], 1)
        block = (*block, seeds)
        items = tf.data.Dataset.from_tensor_slices((*block, positions))
        good = items.map(lambda *e: (*self.decode(*e[:-1]), e[-1]))
        good = good.ignore_errors()
        marker = self.placeholder(END_OK, tf.constant(""),
                                  tf.constant(-1, tf.int64), tf.constant(""))
        stream = good.concatenate(tf.data.Dataset.from_tensors(
            (*marker, tf.constant(-1, tf.int64))))

        def missing_of(mask):
            seen = tf.bitwise.bitwise_and(
                tf.bitwise.right_shift(mask, positions), 1)
            return tf.equal(seen, 0)

        def failure_lines(missing):
            where = tf.where(missing)[:, 0]
            failed = tf.data.Dataset.from_tensor_slices(
                tuple(tf.gather(t, where) for t in block))
            failed = failed.interleave(self.fallback, cycle_length=1)
            lines = failed.map(lambda image, label, status, filename, index,
                               detail: _message(filename, index, detail))
            text = lines.reduce(tf.constant(""), lambda a, b: tf.strings.join(
                [a, b], separator="\n"))
            return tf.size(where, tf.int32), tf.strings.strip(text)

        def seen(mask, position):
            return mask | tf.bitwise.left_shift(tf.constant(1, tf.int64),
                                                tf.maximum(position, 0))

        if strict:
            def strict_step(state, element):
                mask, previous = state
                *decoded, position = element
                status = decoded[2]
                is_end = position < 0
                bad_record = tf.logical_not(is_end) & tf.not_equal(status, OK)
                # Positions come in order: a gap below this one is a record
                # that failed, known now rather than at the end of the block.
                below = positions < tf.where(is_end, tf.cast(n, tf.int64),
                                             position)
                missing = missing_of(mask) & below
                failed = bad_record | tf.reduce_any(missing)

                def stop():
                    text = tf.cond(bad_record, lambda: _message(
                        decoded[3], decoded[4], decoded[5]),
                        lambda: tf.strings.split(
                            failure_lines(missing)[1], "\n")[0])
                    check = tf.debugging.Assert(tf.constant(False), [
                        tf.strings.join([text, _SKIP_HINT])])
                    with tf.control_dependencies([check]):
                        return tf.identity(mask)
                mask = tf.cond(failed, stop, lambda: mask)
                return (seen(mask, position), tuple(decoded)), previous

            initial = (tf.constant(0, tf.int64), marker)
            return stream.scan(initial, strict_step).skip(1)

        def step(mask, element):
            *decoded, position = element

            def finish():
                missing = missing_of(mask)

                def failed_marker():
                    count, text = failure_lines(missing)
                    image, _, _, filename, index, _ = marker
                    return (image, count, tf.constant(BLOCK_FAILED, tf.int32),
                            filename, index, text)
                return tf.cond(tf.reduce_any(missing), failed_marker,
                               lambda: tuple(decoded))
            out = tf.cond(position >= 0, lambda: tuple(decoded), finish)
            return seen(mask, position), out

        return stream.scan(tf.constant(0, tf.int64), step)


# --------------------------------------------------------------------------
# Bad records: stop with a named error, or skip and count
# --------------------------------------------------------------------------

_bad_lock = threading.Lock()
_bad_counts: Dict[str, int] = collections.Counter()


def bad_record_count(split: Optional[str] = None) -> int:
    """Records skipped so far in this process (all splits, or one)."""
    with _bad_lock:
        if split is None:
            return sum(_bad_counts.values())
        return _bad_counts.get(split, 0)


def reset_bad_record_count() -> None:
    with _bad_lock:
        _bad_counts.clear()


def _message(filename, index, detail) -> tf.Tensor:
    return tf.strings.join([
        "official_bench: bad record ", tf.strings.as_string(index), " in ",
        filename, ": ", detail])


_SKIP_HINT = ("; set skip_bad_records: true in the dataset config to skip "
              "bad records")


def _bad_lines(label, status, filename, index, detail):
    """(message lines, count) of a bad element; ('', 0) for OK / END_OK."""
    block = tf.equal(status, BLOCK_FAILED)
    single = tf.logical_not(block) & tf.not_equal(status, OK) & \
        tf.not_equal(status, END_OK)
    text = tf.where(block, detail, tf.where(
        single, _message(filename, index, detail), ""))
    count = tf.where(block, tf.cast(label, tf.int64),
                     tf.cast(single, tf.int64))
    return text, count


def _log_skipped(split: str):
    def log(text, count):
        lines = text.decode("utf-8", "replace").splitlines()
        with _bad_lock:
            _bad_counts[split] += int(count)
            total = _bad_counts[split]
        for line in lines:
            logging.warning("%s; skipped (skip_bad_records: true)", line)
        logging.warning("official_bench: %d bad record(s) skipped in %s so "
                        "far", total, split)
        return total
    return log


def _keep_or_log(split: str):
    log = _log_skipped(split)

    def keep(image, label, status, filename, index, detail):
        def report():
            text, count = _bad_lines(label, status, filename, index, detail)
            total = tf.numpy_function(log, [text, count], tf.int64,
                                      stateful=True)
            with tf.control_dependencies([total]):
                return tf.constant(False)
        ok = tf.equal(status, OK)
        return tf.cond(ok | tf.equal(status, END_OK), lambda: ok, report)
    return keep


# --------------------------------------------------------------------------
# Checking files (build_records --verify, tests)
# --------------------------------------------------------------------------


def classic_files(data_dir: str, split: str) -> List[str]:
    """The classic shards of `split` in `data_dir`, sorted."""
    return _visible(tf.io.gfile.glob(os.path.join(data_dir, f"{split}-*")))


class _Verifier(_Decoder):
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
                yield _parse_line(line)
            continue
        yield (filename.decode("utf-8", "replace"), int(index), int(status),
               detail.decode("utf-8", "replace"))


_LINE = re.compile(r"^official_bench: bad record (-?\d+) in (.*?): (.*)$")


def _parse_line(line: str):
    """A BLOCK_FAILED message line back into (filename, index, status, why)."""
    match = _LINE.match(line)
    if not match:
        return "", -1, BAD_EXAMPLE, line
    index, filename, detail = match.groups()
    status = BAD_IMAGE if "cannot be decoded" in detail else BAD_EXAMPLE
    return filename, int(index), status, detail


# --------------------------------------------------------------------------
# The whole pipeline
# --------------------------------------------------------------------------


def build_dataset(files: Sequence[str], layout: Layout, ds: DatasetConfig,
                  ctx: tf.distribute.InputContext, batch_size: int,
                  is_training: bool, seed: Optional[int],
                  sizes: Optional[Sequence[int]] = None,
                  decode_fn: Optional[DecodeFn] = None) -> tf.data.Dataset:
    """Record files -> batches of (images, labels) for one input pipeline.

    Images are [batch, size, size, channels] in `ds.dtype` (uint8 with
    transfer_uint8); labels are int32 class ids, or one-hot float32 with
    `ds.one_hot`. Shared by `builder: records` and `builder: tfds`.
    `decode_fn` replaces the per-image decode/crop/resize (benchmarks).
    """
    sizes = file_sizes(files) if sizes is None else sizes
    offset = ds.label_offset if ds.label_offset is not None else \
        layout.label_offset
    shuffle_seed = seed if ds.deterministic else None
    dataset = record_dataset(files, sizes, ds, ctx, is_training, shuffle_seed)
    # Blocks of records, each with a random seed pair: every record's
    # stateless augmentation seed derives from it (see guarded_block).
    block_seeds = tf.data.Dataset.random(
        seed=_seed(shuffle_seed, 3, ctx.input_pipeline_id)).batch(2)
    dataset = tf.data.Dataset.zip((dataset.batch(GUARD_BLOCK), block_seeds))
    decoder = _Decoder(ds, layout, offset, is_training, decode_fn)
    strict = not ds.skip_bad_records
    dataset = dataset.interleave(
        lambda block, block_seed: decoder.guarded_block(block, block_seed,
                                                        strict),
        cycle_length=tf.data.AUTOTUNE, block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=bool(ds.deterministic))
    if not strict:
        dataset = dataset.filter(_keep_or_log(ds.split))
    dataset = dataset.batch(batch_size, drop_remainder=True)

    def select(image, label, *_):
        if ds.one_hot:
            label = tf.one_hot(label, ds.num_classes)
        return image, label
    dataset = dataset.map(select)
    options = tf.data.Options()
    options.deterministic = bool(ds.deterministic)
    options.experimental_optimization.parallel_batch = True
    options.experimental_optimization.map_parallelization = True
    return dataset.with_options(options)


def records_dataset(ds: DatasetConfig, ctx: tf.distribute.InputContext,
                    batch_size: int, is_training: bool,
                    seed: int = 0) -> tf.data.Dataset:
    """The `records` builder (see data.factory.BUILDERS)."""
    files, layout = find_files(ds, is_training)
    logging.info("%s: %d %s record file(s) for split %s (%s ... %s)",
                 _key(is_training), len(files), layout.name, ds.split,
                 os.path.basename(files[0]), os.path.basename(files[-1]))
    return build_dataset(files, layout, ds, ctx, batch_size, is_training,
                         seed)
