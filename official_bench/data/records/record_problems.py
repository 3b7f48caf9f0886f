"""A bad record in words, once for both readers: the status codes, the
message line naming the file and the record, the words for each kind of
problem, the skip hint, and the skip-and-count log of
`skip_bad_records: true`.

The TensorFlow pipeline (record_reader.py, record_guard.py, bad_records.py)
fills the templates with tf.strings.format, the TensorFlow-free reader
(host_examples.py) with str.format: both write `{}` placeholders, so a
message reads the same from either. The verifier
(data/build/record_verify.py) parses the lines back. TensorFlow-free.
"""

from __future__ import annotations

import collections
import re
import threading
from typing import Dict, Iterable, Optional, Tuple

from absl import logging

# Record status codes carried through the TensorFlow pipeline.
# WRONG_SETTING: a label that says a setting is wrong (the layout,
# label_offset), not the record: its error offers no SKIP_HINT.
(OK, END_OK, CORRUPT_FILE, BAD_EXAMPLE, BAD_IMAGE, BAD_LABEL, BLOCK_FAILED,
 WRONG_SETTING) = range(8)

PREFIX = "official_bench: bad record "
SKIP_HINT = ("; set skip_bad_records: true in the dataset config to skip "
             "bad records")

# A file the reader could not read whole: {size}; {index, offset, size}.
UNREADABLE = ("the file cannot be read (missing, unreadable, or not TFRecord "
              "data from its first record; {} bytes expected)")
TRUNCATED = ("corrupt or truncated TFRecord data: only the first {} "
             "record(s) ({} of {} bytes) could be read")
# A file listed, then gone (its size unreadable) when the input was built:
# its size is GONE_SIZE, and the readers report it as a bad file.
GONE_SIZE = -1
GONE = ("the file cannot be read (listed, then gone when its size was "
        "read)")
# A record: {raw label, offset, last label, offset, num_classes}.
LABEL_OUTSIDE = ("label {} is outside {}..{} (label_offset {}, num_classes "
                 "{})")
# Just below the range: LABEL_OUTSIDE's, then {first label} twice.
LABEL_BELOW = LABEL_OUTSIDE + (": the labels likely start at {}, so "
                               "label_offset is likely wrong (set "
                               "label_offset: {})")
# Just past the range: LABEL_OUTSIDE's, then {offset + 1} twice and
# {num_classes + 1}.
LABEL_ABOVE = LABEL_OUTSIDE + (": one past the last label, so label_offset "
                               "or num_classes is likely wrong (set "
                               "label_offset: {} if the labels start at {}, "
                               "or num_classes: {})")


def not_an_example(image_key: str, label_key: str) -> str:
    """The template (one `{}`: the record's size) for a record that does
    not parse."""
    return ("the record ({} bytes) is not a tf.train.Example with "
            f"{image_key} and {label_key}")


def undecodable(image_key: str) -> str:
    """The template (one `{}`: the image's size) for an image that does not
    decode."""
    return image_key + " ({} bytes) cannot be decoded as an image"


def _range_fields(raw_label: int, offset: int, num_classes: int) -> tuple:
    return raw_label, offset, offset + num_classes - 1, offset, num_classes


def missing_label(layout, other=None) -> str:
    """A record without the `layout`'s label key; `other` is the layout
    whose image and label keys it has instead (None: neither). No
    apostrophes: TensorFlow's assertion message escapes them."""
    words = (f"the record has no {layout.label_key} (layout {layout.name} "
             f"reads {layout.image_key} + {layout.label_key})")
    if other is None:
        return words
    return (f"{words}; it has {other.image_key} + {other.label_key} "
            f"(layout {other.name}): set layout: {other.name} and list the "
            "files in filenames")


def label_problem(raw_label: int, offset: int, num_classes: int,
                  missing: str = "") -> Tuple[str, bool]:
    """(the words, whether a setting is wrong) for a label outside the
    range: `missing` (missing_label's words) when the key is absent; a
    label just below or just past the range most likely means a wrong
    label_offset (or num_classes), with the value to set; else
    LABEL_OUTSIDE. record_guard.Decoder chooses the same way in
    TensorFlow."""
    fields = _range_fields(raw_label, offset, num_classes)
    if missing:
        return missing, True
    if offset >= 1 and raw_label == offset - 1:
        return LABEL_BELOW.format(*fields, raw_label, raw_label), True
    if raw_label == offset + num_classes:
        return LABEL_ABOVE.format(*fields, offset + 1, offset + 1,
                                  num_classes + 1), True
    return LABEL_OUTSIDE.format(*fields), False


def all_skipped(key: str, who: str, count: int, line: str) -> str:
    """Why a training input stops with skip_bad_records: `who` (a loader
    worker, the input pipeline) skipped every one of the `count` records
    of its share since its last good one; `line` is the last skipped."""
    return (f"{key}: {who} skipped all {count} record(s) of its share as "
            "bad (skip_bad_records: true) and can make no batch; the last: "
            f"{line}")


def message_line(filename: str, index: int, detail: str) -> str:
    """`official_bench: bad record N in FILE: why` (bad_records.message is
    the same line as a TensorFlow string)."""
    return f"{PREFIX}{index} in {filename}: {detail}"


class SkippedRecords:
    """Records one pipeline skipped so far, per split. Thread-safe: the
    filter's numpy_function can run on several tf.data threads at once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts: Dict[str, int] = collections.Counter()

    def add(self, split: str, count: int) -> int:
        """Counts `count` more for `split`; returns its running total."""
        with self._lock:
            self._counts[split] += count
            return self._counts[split]

    def count(self, split: Optional[str] = None) -> int:
        """Skipped so far (all splits, or one)."""
        with self._lock:
            if split is None:
                return sum(self._counts.values())
            return self._counts.get(split, 0)

    def counts(self) -> Dict[str, int]:
        """Skipped so far, per split (a copy)."""
        with self._lock:
            return dict(self._counts)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()


# Every record this process skipped, from any pipeline; an input worker's
# count reaches its trainer's in its batch messages (shm_workers). The
# trainer clears it when a run starts; result.json's records_skipped.
PROCESS = SkippedRecords()


def log_skipped(split: str, skipped: SkippedRecords, lines: Iterable[str],
                count: int) -> int:
    """Logs each message line as skipped, counts `count` more for `split`
    and logs the running total; returns it."""
    total = skipped.add(split, int(count))
    if skipped is not PROCESS:
        PROCESS.add(split, int(count))
    for line in lines:
        logging.warning("%s; skipped (skip_bad_records: true)", line)
    logging.warning("official_bench: %d bad record(s) skipped in %s so far",
                    total, split)
    return total


_LINE = re.compile(r"^official_bench: bad record (-?\d+) in (.*?): (.*)$")


def parse_message(line: str):
    """A message line back into (filename, index, status, why)."""
    match = _LINE.match(line)
    if not match:
        return "", -1, BAD_EXAMPLE, line
    index, filename, detail = match.groups()
    status = BAD_IMAGE if "cannot be decoded" in detail else BAD_EXAMPLE
    return filename, int(index), status, detail
