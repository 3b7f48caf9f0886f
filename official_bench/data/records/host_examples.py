"""`builder: records` without TensorFlow: this process's record files, and
the examples one loader worker makes of its part of them.

`process_files` finds the files as the TensorFlow path does
(record_sets.py) and shards them over processes as it does: every
count-th file when each process gets one, else all files with their
records shared out (the list's `record_shard`). `worker_examples` reads a
worker's part: file i of the process's goes to worker i % num_workers;
with fewer files than workers, every worker reads every file and keeps
every num_workers-th record of each. Training: an endless stream, the
files in a seeded order reshuffled every epoch (file_shuffle_buffer_size),
read 10 at a time, records through a seeded shuffle buffer (each worker
holds shuffle_buffer_size / num_workers records, so the workers together
hold what the TensorFlow pipeline's one buffer holds), then parse
(example_wire.py), label offset and range, decode, train crop and flip
(host_decode.py). Evaluation: one pass in file order, centre crop. A
window decoder (decode: gpu) decodes WINDOW_GROUP windows a call: each
record's window is drawn as it is read, the group decoded, the examples
given in order.

Bad records raise BadRecord with the TensorFlow path's line (and its skip
hint), or with `skip_bad_records: true` are logged and counted as it logs
them (record_problems.py): the count is this worker's; a training worker
that has skipped every record of its share since its last example raises
ConfigError (no epoch would make one). TensorFlow-free.
"""

from __future__ import annotations

import itertools
import math
import random
import zlib
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
from absl import logging

from official_bench.config import ConfigError, DatasetConfig
from official_bench.data.records import (
    crop_sampling,
    example_wire as wire,
    file_note,
    host_decode,
    packed_batch,
    record_problems as words,
    record_sets,
    set_counts,
)
from official_bench.data.records.file_verdict import BadRecordFile
from official_bench.data.records.framing import Problem, frames_of
from official_bench.data.records.host_reader import (
    Item,
    interleave,
    read_file,
)

DECODER = host_decode.DECODER  # the loader writes it into result.json
# Windows a window decoder (decode: gpu) decodes in one call: fewer
# round trips to the GPU, and a batch for its JPEG engines.
WINDOW_GROUP = 32
BOX_SIDES = ("ymin", "xmin", "ymax", "xmax")


class FileShard(list):
    """This process's record files; `record_shard` = (index, count) of the
    records it keeps of each, (0, 1) when the files were sharded; `key`
    and `skip_bad_records` are their config's (records_of's lines)."""

    def __init__(self, files: Sequence[str],
                 record_shard: Tuple[int, int] = (0, 1), key: str = "",
                 skip_bad_records: bool = False):
        super().__init__(files)
        self.record_shard = tuple(record_shard)
        self.key = key
        self.skip_bad_records = skip_bad_records


class BadRecord(Exception):
    """A record the run cannot use; str() is the TensorFlow path's line
    with the skip hint. `filename` names the file."""

    def __init__(self, line: str, filename: str, index: int):
        super().__init__(line)
        self.filename = filename
        self.index = index


def process_files(ds: DatasetConfig, process_index: int, process_count: int,
                  training: bool) -> List[str]:
    """This process's record files (a FileShard), found and sharded as
    the TensorFlow path finds and shards them."""
    if ds.builder != "records":
        raise ConfigError(
            f"{record_sets.config_key(training)}.builder {ds.builder!r}: "
            "the TensorFlow-free reader reads builder: records only")
    files, layout = record_sets.find_files(ds, training)
    if layout.name == record_sets.CLASSIC:
        set_counts.check_counts(ds, record_sets.config_key(training),
                                record_sets.label_offset(ds, layout))
    logging.info("%s", record_sets.files_line(training, files, layout,
                                              ds.split))
    mine, record_shard = record_sets.shard_files(files, process_count,
                                                 process_index)
    return FileShard(mine, record_shard, record_sets.config_key(training),
                     ds.skip_bad_records)


def records_of(files: FileShard) -> int:
    """How many records of `files` this process reads in one pass: every
    record of its files, or its share of each when the files were not
    sharded (every p-th record of each file, from p). The frames it walks
    to count them are the framing check's (framing.py): a truncated,
    corrupt or unreadable file raises BadRecordFile with its bad-record
    line, as the reader would when it got there (with skip_bad_records,
    a warning names it and its whole records count); an empty file, or
    one whose records differ from what the build wrote into it, is a
    warning naming it."""
    index, count = files.record_shard
    key = getattr(files, "key", "")
    total = 0
    for path in files:
        try:
            n, problem = frames_of(path)
        except OSError as e:
            n, problem = 0, Problem(path, 0, "the file cannot be read "
                                    f"({e.strerror or e})")
        if problem is not None:
            if not getattr(files, "skip_bad_records", False):
                raise BadRecordFile(problem.line() + words.SKIP_HINT)
            logging.warning("%s; skipped (skip_bad_records: true)",
                            problem.line())
        else:
            set_counts.warn_file(key, path, n)
        total += (n - index + count - 1) // count if n > index else 0
    return total


def _worker_part(files: Sequence[str], worker_index: int, num_workers: int,
                 record_shard: Tuple[int, int]
                 ) -> Tuple[List[str], Tuple[int, int]]:
    """(this worker's files, (index, count) of the records it keeps)."""
    p_index, p_count = record_shard
    if len(files) >= num_workers:
        return list(files[worker_index::num_workers]), (p_index, p_count)
    return list(files), (p_index * num_workers + worker_index,
                         p_count * num_workers)


def shuffled(items: Iterator, size: int, rng: random.Random) -> Iterator:
    """tf.data's shuffle: a buffer of `size`; each element out is a random
    one of the buffer, replaced by the next in."""
    buffer: list = []
    for item in items:
        if len(buffer) < size:
            buffer.append(item)
            continue
        i = rng.randrange(size)
        buffer[i], item = item, buffer[i]
        yield item
    rng.shuffle(buffer)
    yield from buffer


def _epochs(files: List[str], sizes: List[int], keep: Tuple[int, int],
            ds: DatasetConfig, training: bool, name: str,
            first_epoch: int, per_epoch: Optional[List[int]] = None
            ) -> Iterator[Item]:
    """This worker's records (and the Problems it reports), one pass, or
    endless epochs in a reshuffled file order when training; each
    training epoch's count of records is appended to `per_epoch`."""
    k_index, k_count = keep
    epoch = first_epoch
    while True:
        order = list(range(len(files)))
        if training and ds.file_shuffle_buffer_size > 1 and len(files) > 1:
            order = list(shuffled(iter(order), min(
                ds.file_shuffle_buffer_size, len(files)),
                random.Random(f"{name}/files/{epoch}")))
        kept = readable = 0
        for item in interleave([files[i] for i in order],
                               [sizes[i] for i in order], reader=_noted):
            record = not isinstance(item, Problem)
            readable += record
            if (item[1] if record else item.index) % k_count == k_index:
                kept += record
                yield item
        if not training:
            return
        if not kept:
            raise ConfigError(_no_record_message(files, readable, keep,
                                                 training))
        if per_epoch is not None:
            per_epoch.append(kept)
        epoch += 1


def _noted(path: str, size: int) -> Iterator[Item]:
    """read_file, the worker saying before each read that it is opening
    (its first) or reading `path` (file_note): a worker stalled on a file
    (a dead mount, a FIFO) is named with that file."""
    items, opening = read_file(path, size), True
    while True:
        file_note.note(path, opening)
        item = next(items, None)
        if item is None:
            return
        opening = False
        yield item


def _no_record_message(files: List[str], readable: int,
                       keep: Tuple[int, int], training: bool) -> str:
    """Why a loader worker has nothing to read, with the fix that fits:
    its files' records go to other workers (fewer workers), or none of
    them can be read (the files are the fault)."""
    k_index, k_count = keep
    head = (f"{record_sets.config_key(training)}: a loader worker has no "
            f"record to read: its {len(files)} file(s) ({files[0]} ...)")
    if not readable:
        return (f"{head} hold no record that can be read (each is "
                "truncated or corrupt from its first record): fix or "
                "rebuild those files, or leave them out (filenames)")
    return (f"{head} hold none of its share (every {k_count}-th record "
            f"from {k_index}); use fewer loader workers")


class _BadRun:
    """The records skipped since the last example made. Once they are
    every record of a training worker's share (`per_epoch`: its records
    per epoch, as _epochs counts them), no epoch will make one: raises
    ConfigError instead of skipping them until the stall timeout."""

    def __init__(self, key: str, per_epoch: List[int]):
        self.key, self.per_epoch = key, per_epoch
        self.records: set = set()

    def made(self) -> None:
        self.records.clear()

    def skipped(self, filename: str, index: int, line: str) -> None:
        self.records.add((filename, index))
        if self.per_epoch and len(self.records) >= self.per_epoch[-1]:
            raise ConfigError(words.all_skipped(
                self.key, "a loader worker", self.per_epoch[-1], line))


class _Bad(Exception):
    """A record's problem: the detail of its message line; `hint`: offer
    SKIP_HINT (not when a setting is wrong)."""

    def __init__(self, detail: str, hint: bool = True):
        super().__init__(detail)
        self.hint = hint


def _parse(record: bytes, layout: record_sets.Layout):
    """(image bytes, raw label, boxes, words for a missing label key or
    "") as the TensorFlow path's feature spec reads them
    (record_guard._feature_spec, Decoder.label_problem)."""
    other = record_sets.other_layout(layout)
    keys = [layout.image_key, layout.label_key]
    if layout.has_boxes:
        keys += [f"image/object/bbox/{s}" for s in BOX_SIDES]
    try:
        features = wire.parse_example(
            record, keys + [other.image_key, other.label_key])
        image = wire.fixed(features, layout.image_key, wire.BYTES, b"")
        label = wire.fixed(features, layout.label_key, wire.INT64, -1)
        sides = [wire.var_len(features, k, wire.FLOAT) for k in keys[2:]]
    except wire.ParseError as e:
        raise _Bad(words.not_an_example(layout.image_key, layout.label_key)
                   .format(len(record))) from e
    def has(key):  # as a VarLenFeature: one value or more
        return bool(features.get(key, (None, []))[1])
    missing = "" if has(layout.label_key) else words.missing_label(
        layout, other if has(other.image_key) and has(other.label_key)
        else None)
    return (image, label, crop_sampling.clip_boxes(*sides) if sides else [],
            missing)


def _example(record: bytes, layout, offset: int, ds: DatasetConfig,
             training: bool, rng: random.Random, decoder: str = DECODER
             ) -> Tuple[Union[np.ndarray, host_decode.Pending], int]:
    """(crop, label); a window decoder's colour JPEG crop is Pending, its
    window drawn (_in_groups decodes it). Raises _Bad."""
    image, raw_label, boxes, missing = _parse(record, layout)
    label = raw_label - offset
    if missing or not 0 <= label < ds.num_classes:
        detail, wrong_setting = words.label_problem(
            raw_label, offset, ds.num_classes, missing)
        raise _Bad(detail, hint=not wrong_setting)
    if training:
        def window(height, width):
            return crop_sampling.train_window(
                height, width, boxes, rng, ds.crop_area_range,
                ds.crop_aspect_ratio_range, ds.min_object_covered)
        flip = bool(ds.random_flip) and rng.random() < 0.5
    else:
        def window(height, width):
            return crop_sampling.center_window(height, width, ds.image_size,
                                               ds.eval_crop_padding)
        flip = False
    try:
        pixels = host_decode.start_crop(image, window, ds.image_size, flip,
                                        ds.num_channels, decoder,
                                        dct_scaling=training)
    except host_decode.UndecodableImage as e:
        raise _Bad(words.undecodable(layout.image_key).format(len(image))
                   ) from e
    return pixels, label


class _Made(NamedTuple):
    """A record's example; its crop still Pending in a window decoder's
    group."""
    pixels: Union[np.ndarray, host_decode.Pending]
    label: int
    filename: str
    index: int


class _Skip(NamedTuple):
    """A record's problem (`record`), or a file's: its line's parts."""
    filename: str
    index: int
    detail: str
    record: bool
    hint: bool = True  # offer SKIP_HINT


def _outcome(item, layout, offset: int, ds: DatasetConfig, training: bool,
             rng: random.Random, decoder: str) -> Union[_Made, _Skip]:
    if isinstance(item, Problem):
        return _Skip(item.filename, item.index, item.detail, False)
    filename, index, record = item
    try:
        pixels, label = _example(record, layout, offset, ds, training, rng,
                                 decoder)
    except _Bad as bad:
        return _Skip(filename, index, str(bad), True, bad.hint)
    return _Made(pixels, label, filename, index)


def _pending(outcome) -> bool:
    return isinstance(outcome, _Made) and \
        isinstance(outcome.pixels, host_decode.Pending)


def _in_groups(outcomes: Iterator, decoder: str, device: int,
               image_key: str) -> Iterator[Union[_Made, _Skip]]:
    """`outcomes` in order, their Pending crops decoded WINDOW_GROUP to a
    call (the last group when the outcomes end)."""
    held: list = []
    for outcome in outcomes:
        held.append(outcome)
        if sum(map(_pending, held)) == WINDOW_GROUP:
            yield from _finished(held, decoder, device, image_key)
            held = []
    yield from _finished(held, decoder, device, image_key)


def _finished(held: list, decoder: str, device: int,
              image_key: str) -> Iterator[Union[_Made, _Skip]]:
    group = [o for o in held if _pending(o)]
    crops = iter(host_decode.finish_crops([o.pixels for o in group],
                                          decoder, device) if group else [])
    for outcome in held:
        if not _pending(outcome):
            yield outcome
            continue
        crop = next(crops)
        if isinstance(crop, host_decode.UndecodableImage):
            yield _Skip(outcome.filename, outcome.index, words.undecodable(
                image_key).format(len(outcome.pixels.data)), True)
        else:
            yield outcome._replace(pixels=crop)


def worker_examples(ds: DatasetConfig, files: Sequence[str], *,
                    training: bool, seed: int, worker_index: int,
                    num_workers: int, epoch_offset: int = 0,
                    skipped: Optional[words.SkippedRecords] = None,
                    decoder: str = DECODER,
                    record_shard: Optional[Tuple[int, int]] = None,
                    decode_devices: Sequence[int] = (0,),
                    pack_batch: int = 0
                    ) -> Iterator[Tuple[np.ndarray, int]]:
    """(uint8 image [image_size, image_size, num_channels], label) of this
    worker's part of `files` (see the module doc). Seeded by `seed`, the
    worker, the files and the record share (so processes with the same
    seed draw different crops, flips and orders);
    `epoch_offset` starts at that epoch's file order. `skipped` counts
    skipped records (a new count when not given); `decoder` is one of
    host_decode.DECODERS; `record_shard` is the process's share of each
    file's records, by default the `files` FileShard's; a GPU decoder
    decodes on decode_devices[worker_index % len(decode_devices)].
    `pack_batch` B (decode: gpu_trainer, a window decoder): B examples at
    a time packed for the trainer to decode (_packed)."""
    if not files:
        raise ConfigError(f"{record_sets.config_key(training)}: no record "
                          "files for this process")
    skipped = words.SkippedRecords() if skipped is None else skipped
    layout = record_sets.layout_for(ds, files,
                                    record_sets.config_key(training))
    offset = record_sets.label_offset(ds, layout)
    if record_shard is None:
        record_shard = getattr(files, "record_shard", (0, 1))
    mine, keep = _worker_part(files, worker_index, num_workers,
                              tuple(record_shard))
    # Processes that share every file (fewer files than processes) differ
    # only by their share of the records: it must name their streams too.
    share = "" if record_shard[1] == 1 else \
        f"/records {record_shard[0]} of {record_shard[1]}"
    name = (f"{worker_index}/{num_workers}/{seed}/"
            f"{zlib.crc32(chr(0).join(files).encode()):08x}{share}")
    per_epoch: List[int] = []
    items = _epochs(mine, record_sets.file_sizes(mine), keep, ds, training,
                    name, epoch_offset, per_epoch)
    bad_run = _BadRun(record_sets.config_key(training), per_epoch)
    rng = random.Random(f"{name}/records/{epoch_offset}")
    buffer = math.ceil(ds.shuffle_buffer_size / num_workers)
    if training and ds.shuffle_buffer_size > 1 and buffer > 1:
        items = shuffled(items, buffer, rng)
    outcomes = (_outcome(item, layout, offset, ds, training, rng, decoder)
                for item in items)
    device = decode_devices[worker_index % len(decode_devices)]
    settle = _Settle(ds, skipped, bad_run)
    if pack_batch:
        yield from _packed(settle.made(outcomes), settle, pack_batch, ds,
                           files, decoder, device, layout.image_key)
        return
    if decoder in host_decode.WINDOW_DECODERS:
        outcomes = _in_groups(outcomes, decoder, device, layout.image_key)
    for made in settle.made(outcomes):
        yield made.pixels, made.label


class _Settle:
    """Outcomes to examples: a _Skip raises BadRecord, or is logged and
    counted with skip_bad_records."""

    def __init__(self, ds: DatasetConfig, skipped, bad_run: _BadRun):
        self.ds, self.skipped, self.bad_run = ds, skipped, bad_run

    def made(self, outcomes: Iterator) -> Iterator[_Made]:
        for outcome in outcomes:
            if isinstance(outcome, _Made):
                self.bad_run.made()
                yield outcome
            else:
                self.skip(outcome)

    def skip(self, outcome: _Skip) -> None:
        line = words.message_line(outcome.filename, outcome.index,
                                  outcome.detail)
        if not self.ds.skip_bad_records:
            hint = words.SKIP_HINT if outcome.hint else ""
            raise BadRecord(line + hint, outcome.filename,
                            outcome.index)
        words.log_skipped(self.ds.split, self.skipped, [line], 1)
        if outcome.record:
            self.bad_run.skipped(outcome.filename, outcome.index, line)


def _packed(made: Iterator[_Made], settle: _Settle, batch: int,
            ds: DatasetConfig, files: Sequence[str], decoder: str,
            device: int, image_key: str) -> Iterator[Tuple[np.ndarray, int]]:
    """decode: gpu_trainer: `batch` examples at a time as one packed
    batch (packed_batch.py), a chunk of its bytes an example, the JPEGs
    that do not fit and ds.worker_decode_share of them decoded here (a
    group refilled after a bad record shares out its JPEGs still
    undecoded anew); a last, partial group (a pass's end) goes plain,
    decoded here."""
    index = {f: i for i, f in enumerate(files)}
    shape = (ds.image_size, ds.image_size, ds.num_channels)
    slot = int(np.prod(shape))

    def plan(group: list):  # a whole group's, else None: it goes plain
        return packed_batch.plan([m.pixels for m in group], slot,
                                 ds.worker_decode_share) \
            if len(group) == batch else None

    while True:
        group = list(itertools.islice(made, batch))
        keep = plan(group)
        while not _decode_rest(group, keep, settle, decoder, device,
                               image_key):
            group += itertools.islice(made, batch - len(group))
            keep = plan(group)
        if keep is None:  # plain: pixels only
            for m in group:
                yield m.pixels, m.label
            if len(group) < batch:
                return
            continue
        chunks = packed_batch.pack(
            [m.pixels for m in group],
            [packed_batch.Tag(index.get(m.filename, len(files)), m.index)
             for m in group], shape)
        for k, m in enumerate(group):
            yield chunks[k], m.label | (packed_batch.PACKED if k == 0 else 0)


def _decode_rest(group: list, keep, settle: _Settle, decoder: str,
                 device: int, image_key: str) -> bool:
    """Decodes here the Pending crops of `group` that `keep` does not
    send (all of them when it is None), in place; False when one could
    not be decoded (its record settled as skipped and dropped: the group
    is to be refilled)."""
    todo = [k for k, m in enumerate(group) if _pending(m) and
            (keep is None or not keep[k])]
    if not todo:
        return True
    done = list(_finished([group[k] for k in todo], decoder, device,
                          image_key))
    bad = [o for o in done if isinstance(o, _Skip)]
    for k, outcome in zip(todo, done):
        group[k] = outcome
    for outcome in bad:
        settle.skip(outcome)
        group.remove(outcome)
    return not bad
