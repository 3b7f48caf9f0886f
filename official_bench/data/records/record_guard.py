"""Parse + decode + augment records inside a guard.

tf.data has no try/except: a block of GUARD_BLOCK records is decoded by an
inner dataset with ignore_errors(), and the records that did not come out
are sent through fallbacks that say why (not a tf.train.Example, an
undecodable image, a label out of range). What happens to a bad record
(stop with an error naming it, or skip and count) is
data/records/bad_records.py.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional

from official_bench.config import DatasetConfig
from official_bench.data import preprocessing
from official_bench.data.records.bad_records import message
from official_bench.data.records.record_problems import (
    BAD_EXAMPLE,
    BAD_IMAGE,
    BAD_LABEL,
    BLOCK_FAILED,
    END_OK,
    LABEL_ABOVE,
    LABEL_BELOW,
    LABEL_OUTSIDE,
    OK,
    SKIP_HINT,
    WRONG_SETTING,
    missing_label,
    not_an_example,
    undecodable,
)
from official_bench.data.records.record_sets import Layout, other_layout
from official_bench.runtime.keras_setup import tf

GUARD_BLOCK = 32  # records per error-catching inner dataset (<= 62)


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


def _missing(mask, positions):
    """Which `positions` the bit `mask` has not seen come out."""
    return tf.equal(tf.bitwise.bitwise_and(
        tf.bitwise.right_shift(mask, positions), 1), 0)


def _seen(mask, position):
    """`mask` with `position` (a marker's -1: 0) noted."""
    return mask | tf.bitwise.left_shift(tf.constant(1, tf.int64),
                                        tf.maximum(position, 0))


# decode_fn(image_bytes, boxes, seed) -> one image as build_dataset emits it
DecodeFn = Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor]


@dataclasses.dataclass(frozen=True)
class Decoder:
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
            code, why = tf.cond(
                tf.equal(status, OK),
                lambda: self.label_problem(record, raw_label),
                lambda: (status, detail))
            return self.placeholder(code, filename, index, why)
        return tf.cond(tf.equal(status, OK) & in_range, image, bad)

    def label_problem(self, record, raw_label):
        """(status, words) for a label outside the range, chosen as
        record_problems.label_problem chooses: a missing key (naming the
        other layout's keys when the record has them), a label just below
        or past the range (WRONG_SETTING), else BAD_LABEL."""
        layout, other = self.layout, other_layout(self.layout)
        offset, n = self.label_offset, self.ds.num_classes
        keys = tf.io.parse_single_example(record, {
            layout.label_key: tf.io.VarLenFeature(tf.int64),
            other.image_key: tf.io.VarLenFeature(tf.string),
            other.label_key: tf.io.VarLenFeature(tf.int64)})

        def has(key):
            return tf.size(keys[key].values) > 0

        def words(template, *extra):
            fields = (raw_label, offset, offset + n - 1, offset, n, *extra)
            return lambda: (tf.constant(WRONG_SETTING),
                            tf.strings.format(template, fields))
        missing = tf.cond(
            has(other.image_key) & has(other.label_key),
            lambda: tf.constant(missing_label(layout, other)),
            lambda: tf.constant(missing_label(layout)))
        cases = [(tf.logical_not(has(layout.label_key)),
                  lambda: (tf.constant(WRONG_SETTING), missing))]
        if offset >= 1:
            cases.append((tf.equal(raw_label, offset - 1),
                          words(LABEL_BELOW, raw_label, raw_label)))
        cases.append((tf.equal(raw_label, offset + n),
                      words(LABEL_ABOVE, offset + 1, offset + 1, n + 1)))
        outside = words(LABEL_OUTSIDE)
        return tf.case(cases, default=lambda: (tf.constant(BAD_LABEL),
                                               outside()[1]),
                       exclusive=False)

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
            undecodable(self.layout.image_key), size))

    def not_an_example(self, filename, index, record, status, detail, seed):
        return self.placeholder(
            BAD_EXAMPLE, filename, index, tf.strings.format(
                not_an_example(self.layout.image_key, self.layout.label_key),
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

        strict: the scan stops at the first bad record with an error naming it
        (a record that raised is noticed when the next one comes out, or at the
        end of the block), and emits only good records (one step behind, so
        that the end of the block can still raise). Otherwise bad records stay
        in the stream with their status, and the block ends with a marker:
        END_OK, or BLOCK_FAILED with the count in `label` and one message line
        per missing record in `detail`; either marker's `index` is the block's
        count of good records (see bad_records.keep_or_log).
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

        def failure_lines(missing):
            where = tf.where(missing)[:, 0]
            failed = tf.data.Dataset.from_tensor_slices(
                tuple(tf.gather(t, where) for t in block))
            failed = failed.interleave(self.fallback, cycle_length=1)
            lines = failed.map(lambda image, label, status, filename, index,
                               detail: message(filename, index, detail))
            text = lines.reduce(tf.constant(""), lambda a, b: tf.strings.join(
                [a, b], separator="\n"))
            return tf.size(where, tf.int32), tf.strings.strip(text)

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
                missing = _missing(mask, positions) & below
                failed = bad_record | tf.reduce_any(missing)

                def stop():
                    text = tf.cond(bad_record, lambda: message(
                        decoded[3], decoded[4], decoded[5]),
                        lambda: tf.strings.split(
                            failure_lines(missing)[1], "\n")[0])
                    hint = tf.where(bad_record & tf.equal(
                        status, WRONG_SETTING), "", SKIP_HINT)
                    check = tf.debugging.Assert(tf.constant(False), [
                        tf.strings.join([text, hint])])
                    with tf.control_dependencies([check]):
                        return tf.identity(mask)
                mask = tf.cond(failed, stop, lambda: mask)
                return (_seen(mask, position), tuple(decoded)), previous

            initial = (tf.constant(0, tf.int64), marker)
            return stream.scan(initial, strict_step).skip(1)

        def step(state, element):
            mask, made = state
            *decoded, position = element
            made += tf.cast((position >= 0) & tf.equal(decoded[2], OK),
                            tf.int64)

            def finish():
                missing = _missing(mask, positions)
                image, _, _, filename, _, _ = marker

                def failed_marker():
                    count, text = failure_lines(missing)
                    return (image, count, tf.constant(BLOCK_FAILED, tf.int32),
                            filename, made, text)
                return tf.cond(tf.reduce_any(missing), failed_marker,
                               lambda: (*decoded[:4], made, decoded[5]))
            out = tf.cond(position >= 0, lambda: tuple(decoded), finish)
            return (_seen(mask, position), made), out

        return stream.scan((tf.constant(0, tf.int64),
                            tf.constant(0, tf.int64)), step)
