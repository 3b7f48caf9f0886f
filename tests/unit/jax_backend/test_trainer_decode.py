"""decode: gpu_trainer (jax_backend/host_feed.TrainerDecode over workers
packing with data/records/packed_batch.py), on nvImageCodec's CPU
decoder: the same batches as decode: gpu for the same records and seed
(grayscale, CMYK and PNG records, JPEGs too big to pack, an evaluation
pass's partial batches), a worker_decode_share's split (the same
pixels, that share of each batch's JPEGs decoded in the worker, a bad one
the worker's skip), and its decode failures as one line; over a
stand-in pool, its pipeline: order, the decoder call beside the resizes,
failures in order, close() with every stage holding a batch."""

import io
import os
import threading
import time

import numpy as np
import pytest

from official_bench.config import DatasetConfig
from official_bench.data.build.example_proto import classic_example
from official_bench.data.records import host_decode, record_problems
from official_bench.data.records.framing import frame
from official_bench.jax_backend import host_feed
from support.natural_images import natural_jpeg, natural_pixels
from support.nv_images import OnTheGpu

KEY = "train_dataset"
WINDOWS = "nvimgcodec_cpu"


def _png(seed):
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(natural_pixels(seed, 40, 30)).save(buf, "PNG")
    return buf.getvalue()


def _images(count, first):
    """Colour JPEGs of two sizes (the large ones do not fit a packed batch
    at 48x48); the first file's first three: grayscale, CMYK, PNG."""
    out = []
    for i in range(count):
        seed = first + i
        side = (160, 120) if i % 3 == 2 else (48, 36)
        out.append(natural_jpeg(seed, *side))
    if first == 0:
        out[:3] = [natural_jpeg(90, 48, 36, mode="L"),
                   natural_jpeg(91, 48, 36, mode="CMYK"), _png(92)]
    return out


def _write(path, images, labels):
    with open(path, "wb") as f:
        for image, label in zip(images, labels):
            f.write(frame(classic_example(image, label, 36, 48)))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """Train and validation records: 7 and 5 images in 2 files each."""
    root = str(tmp_path_factory.mktemp("packed"))
    for split in ("train", "validation"):
        for f, count in enumerate((7, 5)):
            _write(os.path.join(root, f"{split}-{f:05d}-of-00002"),
                   _images(count, 7 * f), [1 + 7 * f + i
                                           for i in range(count)])
    return root


def _ds(data_dir, training, size):
    return DatasetConfig(builder="records", data_dir=data_dir,
                         split="train" if training else "validation",
                         image_size=size, num_classes=12,
                         shuffle_buffer_size=4, worker_timeout_seconds=60.0)


def _batches(producer, count=None):
    out = []
    try:
        while count is None or len(out) < count:
            b = producer.next()
            if b is None:
                break
            out.append((b.images.copy(), b.labels.tolist()))
            b.release()
    finally:
        producer.close()
    return out


def _both(data_dir, training, size, workers, count=None):
    """(decode: gpu's batches, gpu_trainer's, windows the trainer
    decoded)."""
    from official_bench.data.records import host_examples
    ds = _ds(data_dir, training, size)
    files = host_examples.process_files(ds, 0, 1, training)
    gpu = host_feed.pool_maker(host_feed.records_source(
        ds, files, training, 5, WINDOWS), ds, 4, KEY, workers)()
    stage = host_feed.trainer_decode_maker(host_feed.records_source(
        ds, files, training, 5, WINDOWS, pack_batch=4), ds, 4, KEY,
        workers, WINDOWS, 0, 2)()
    return _batches(gpu, count), _batches(stage, count), stage.decoded


def _same(ours, theirs):
    assert len(ours) == len(theirs) > 0
    for (a, y), (b, z) in zip(ours, theirs):
        assert y == z and a.shape == b.shape and (a == b).all()


def test_training_batches_are_decode_gpus_bit_for_bit(data_dir):
    gpu, trainer, decoded = _both(data_dir, True, 48, 2, count=6)
    _same(trainer, gpu)
    # 3 batches from each worker: 12 draws of its 7 or 5 records through a
    # 2-deep shuffle buffer hold each record at least once (the order
    # follows the files' paths). Records 0-2 (grayscale, CMYK, PNG) are
    # decoded in the workers; the colour JPEGs of the batches handed out
    # (not the one decoded ahead) in the trainer as they fit
    labels = [y for _, batch in gpu for y in batch]
    assert sorted(set(labels)) == list(range(12))
    assert 0 < decoded <= sum(y > 2 for y in labels) < 24


def test_an_evaluation_pass_with_its_partial_batches_is_the_same(data_dir):
    # 7 + 5 records over 2 workers: a packed batch each, then 3 + 1 left
    # over, joined into a last batch decoded in the workers
    gpu, trainer, decoded = _both(data_dir, False, 48, 2)
    assert [labels for _, labels in gpu] == [
        [0, 1, 2, 3], [7, 8, 9, 10], [4, 5, 6, 11]]
    _same(trainer, gpu)
    assert decoded > 0


def test_jpegs_bigger_than_their_slots_are_decoded_by_the_workers(data_dir):
    gpu, trainer, decoded = _both(data_dir, True, 8, 1, count=2)
    _same(trainer, gpu)
    assert decoded == 0  # 192-byte slots: no JPEG fits, the batches plain


def _first_error(stage) -> str:
    """The InputWorkerError the stage's first next() raises, the stage
    closed after."""
    try:
        with pytest.raises(host_feed.InputWorkerError) as e:
            stage.next()
    finally:
        stage.close()
    return str(e.value)


def _failure(data_dir, monkeypatch, broken):
    from official_bench.data.records import host_examples
    ds = _ds(data_dir, False, 48)
    files = host_examples.process_files(ds, 0, 1, False)
    broken(monkeypatch)
    stage = host_feed.trainer_decode_maker(host_feed.records_source(
        ds, files, False, 5, WINDOWS, pack_batch=4), ds, 4, KEY, 1,
        WINDOWS, 0, 1)()
    line = _first_error(stage)
    assert "\n" not in line
    return line, files


def test_an_image_the_trainer_cannot_decode_names_its_record(data_dir,
                                                            monkeypatch):
    def cut(patch):  # every crop fails after its window is decoded
        patch.setattr(host_decode, "resize", _raise)
    line, files = _failure(data_dir, monkeypatch, cut)
    head, _, rest = line.partition(" in ")
    assert head.startswith(f"official_bench: {KEY}: record ")
    assert rest.split(":")[0] in files and ": its JPEG (" in rest
    assert "cannot be decoded (ValueError: no pixels)" in line
    assert line.endswith(record_problems.SKIP_HINT)


def _cut(seed):
    """A JPEG without its scan, its end-of-image marker kept: the workers
    read its header, find it ends as a whole file does (check_whole) and
    pack it; no decoder can decode it."""
    data = natural_jpeg(seed, 48, 36)
    return data[:data.index(b"\xff\xda")] + b"\xff\xd9"


def _bad_pass(tmp_path, bad, skip, share=0.0):
    """TrainerDecode over 1 worker and an evaluation pass of one file's
    8 records (labels 0-7), the records `bad` cut JPEGs: two packed
    batches of 4, `share` of their JPEGs decoded in the worker. (the
    stage, its file, the cut JPEGs' sizes)."""
    path = str(tmp_path / "validation-00000-of-00001")
    images = [_cut(i) if i in bad else natural_jpeg(i, 48, 36)
              for i in range(8)]
    _write(path, images, [1 + i for i in range(8)])
    ds = DatasetConfig(builder="records", data_dir=str(tmp_path),
                       split="validation", image_size=48, num_classes=8,
                       worker_timeout_seconds=60.0, skip_bad_records=skip,
                       worker_decode_share=share)
    stage = host_feed.trainer_decode_maker(host_feed.records_source(
        ds, [path], False, 5, WINDOWS, pack_batch=4), ds, 4, KEY, 1,
        WINDOWS, 0, 1)()
    return stage, path, {i: len(images[i]) for i in bad}


def _skipped_line(path, record, size):
    return record_problems.message_line(path, record, record_problems
                                        .undecodable("image/encoded")
                                        .format(size))


def test_a_skipped_undecodable_image_takes_a_copy_of_the_next(
        tmp_path, absl_messages):
    stage, path, sizes = _bad_pass(tmp_path, {2}, True)
    got = _batches(stage)
    assert [labels for _, labels in got] == [[0, 1, 3, 3], [4, 5, 6, 7]]
    images = got[0][0]
    assert images.shape == (4, 48, 48, 3) and (images[2] == images[3]).all()
    assert not (images[1] == images[3]).all()
    warned = [m for m in absl_messages if "skip" in m]
    assert warned == [
        _skipped_line(path, 2, sizes[2]) +
        "; skipped (skip_bad_records: true)",
        "official_bench: 1 bad record(s) skipped in validation so far"]
    assert stage.skipped.count("validation") == 1 and stage.decoded == 7


def test_without_skip_an_undecodable_image_ends_with_the_hint(tmp_path):
    stage, path, sizes = _bad_pass(tmp_path, {2}, False)
    line = _first_error(stage)
    assert line.startswith(f"official_bench: {KEY}: record 2 in {path}: "
                           f"its JPEG ({sizes[2]} bytes) cannot be decoded")
    assert line.endswith(record_problems.SKIP_HINT) and "\n" not in line


def test_a_batch_with_no_image_decoded_ends_in_one_line(tmp_path,
                                                      absl_messages):
    stage, path, sizes = _bad_pass(tmp_path, {0, 1, 2, 3}, True)
    assert _first_error(stage) == (
        f"official_bench: {KEY}: the trainer skipped all 4 image(s) of a "
        "batch as bad (skip_bad_records: true) and can make no batch of "
        f"it; the last: {_skipped_line(path, 3, sizes[3])}")
    assert "official_bench: 4 bad record(s) skipped in validation so far" \
        in absl_messages


def _sent(monkeypatch):
    """How many JPEGs each packed batch the trainer unpacks holds."""
    from official_bench.data.records import packed_batch
    counts, real = [], packed_batch.unpack

    def unpack(*args):
        items, tags = real(*args)
        counts.append(sum(isinstance(item, host_decode.Pending)
                          for item in items))
        return items, tags
    monkeypatch.setattr(packed_batch, "unpack", unpack)
    return counts


@pytest.mark.parametrize("share, sent", [(0.5, [2, 2]), (0.25, [3, 3])])
def test_a_worker_share_splits_each_batch_with_the_same_pixels(
        tmp_path, monkeypatch, share, sent):
    counts = _sent(monkeypatch)
    whole, _, _ = _bad_pass(tmp_path, set(), False)
    want = _batches(whole)
    assert counts == [4, 4] and whole.decoded == 8
    del counts[:]
    split, _, _ = _bad_pass(tmp_path, set(), False, share)
    _same(_batches(split), want)
    assert counts == sent and split.decoded == sum(sent)


def test_a_bad_jpeg_of_the_workers_share_is_their_skip(tmp_path,
                                                       monkeypatch):
    # record 1, the first batch's second JPEG, is the worker's at 0.5: it
    # skips it and refills the batch with record 4; of the JPEGs still
    # undecoded (0, 2, 4) it decodes 2, the trainer 0 and 4
    counts = _sent(monkeypatch)
    stage, _, _ = _bad_pass(tmp_path, {1}, True, 0.5)
    got = _batches(stage)
    # (the 3 records left make no batch of 4)
    assert [labels for _, labels in got] == [[0, 2, 3, 4]]
    assert counts == [2] and stage.decoded == 2
    assert stage.skipped.count("validation") == 0  # the trainer's


def test_a_failing_decoder_ends_the_feed_in_one_line(data_dir, monkeypatch):
    def fail(patch):
        def windows(*args):
            raise host_decode.DecoderUnavailable(
                "nvImageCodec failed on GPU 0: RuntimeError: CUDA error")
        patch.setattr(host_decode, "_nv_windows", windows)
    line, _ = _failure(data_dir, monkeypatch, fail)
    assert line == (f"official_bench: {KEY}: the trainer's decoder failed: "
                    "nvImageCodec failed on GPU 0: RuntimeError: CUDA error")


def test_a_failed_copy_from_the_gpu_ends_the_feed_in_one_line(
        data_dir, monkeypatch):
    def lose(patch):  # the windows decode, their copies to the host fail
        real = host_decode._nv_windows

        def windows(*args):
            return [None if w is None else OnTheGpu(
                np.asarray(w), RuntimeError("CUDA error: lost"))
                for w in real(*args)]
        patch.setattr(host_decode, "_nv_windows", windows)
    line, _ = _failure(data_dir, monkeypatch, lose)
    assert line == (f"official_bench: {KEY}: the trainer's decoder failed: "
                    "nvImageCodec could not copy a decoded window to the "
                    "host: RuntimeError: CUDA error: lost")


def _raise(*args, **kwargs):
    raise ValueError("no pixels")


# The pipeline itself, over a stand-in pool of packed batches in memory:
# batch k holds labels 4k..4k+3, the even batches packed (every item a
# 48x36 colour JPEG, resized to 32), the odd ones plain.
SIZE = 32


class _Pool:
    """WorkerPool's part TrainerDecode uses: `batches` in turn, then None
    (or, with `block`, next() waits for close() and says it was
    closed)."""

    def __init__(self, batches, block=False):
        from official_bench.data.feeds.shm_workers import Batch
        self._batches = [Batch(*b) for b in batches]
        self._block, self.given, self.closed = block, 0, False
        self._closing = threading.Event()
        self.source = type("Source", (), {"files": ["a.rec"]})()

    def next(self):
        if self.given == len(self._batches):
            if not self._block:
                return None
            self._closing.wait(10)
            raise host_feed.InputWorkerError("closed")
        self.given += 1
        return self._batches[self.given - 1]

    def close(self):
        self.closed = True
        self._closing.set()


def _pending(k):
    return host_decode.start_crop(natural_jpeg(k, 48, 36),
                                  lambda h, w: (0, 0, h, w), SIZE,
                                  k % 2 == 0, decoder=WINDOWS)


def _stand_in_batches(count):
    """[(images, labels)] as the pool hands them out, and each batch's
    pixels as decode: gpu's finish_crops makes them."""
    from official_bench.data.records import packed_batch
    batches, want = [], []
    for b in range(count):
        pending = [_pending(4 * b + i) for i in range(4)]
        pixels = np.stack(host_decode.finish_crops(pending, WINDOWS))
        labels = np.arange(4 * b, 4 * b + 4, dtype=np.int32)
        if b % 2:
            batches.append((pixels, labels))
        else:
            packed = packed_batch.pack(
                pending, [packed_batch.Tag(0, 4 * b + i) for i in range(4)],
                (SIZE, SIZE, 3))
            assert packed_batch.plan(pending, packed[0].size) == [True] * 4
            labels = labels.copy()
            labels[0] |= packed_batch.PACKED
            batches.append((packed, labels))
        want.append(pixels)
    return batches, want


def _overlapping(patch, fail_at=None, undecodable=None):
    """Each crop of packed batch b (records 4b..4b+3, decoder call b / 2)
    waits, 2 s at most, for the decoder call of the packed batch after
    it, where there is one: the calls' sizes, and for each crop of
    records 0-15 whether that call came. `fail_at`: the call that
    fails; `undecodable`: the record whose crop cannot be made."""
    calls, seen = [], []
    called = [threading.Event() for _ in range(3)]
    record = {_pending(k).data: k for k in range(20)}
    real_windows, real_finish = host_decode._nv_windows, \
        host_decode.finish_crop

    def windows(pending, *args):
        calls.append(len(pending))
        called[len(calls) - 1].set()
        if len(calls) == fail_at:
            raise host_decode.DecoderUnavailable("CUDA error")
        return real_windows(pending, *args)

    def finish(p, window):
        k = record[p.data]
        if k < 16:
            seen.append(called[k // 8 + 1].wait(2))
        if k == undecodable:
            return host_decode.UndecodableImage("no pixels")
        return real_finish(p, window)
    patch.setattr(host_decode, "_nv_windows", windows)
    patch.setattr(host_decode, "finish_crop", finish)
    return calls, seen


def test_batches_come_out_in_order_as_the_next_ones_decode(monkeypatch):
    batches, want = _stand_in_batches(5)
    calls, seen = _overlapping(monkeypatch)
    stage = host_feed.TrainerDecode(_Pool(batches), WINDOWS, 0, 2, KEY)
    got = _batches(stage)
    assert [labels for _, labels in got] == [
        list(range(4 * b, 4 * b + 4)) for b in range(5)]
    for (images, _), pixels in zip(got, want):
        assert images.shape == pixels.shape and (images == pixels).all()
    assert calls == [4, 4, 4] and stage.decoded == 12
    # batches 0 and 2 were resized after the decoder call of 2 and 4 began
    assert seen == [True] * 8


def test_a_finish_failure_comes_before_a_later_decode_failure(monkeypatch):
    # batch 2's crop of record 9 cannot be made while batch 4's decoder
    # call fails: next() gives batches 0 and 1, then record 9's line
    batches, _ = _stand_in_batches(5)
    calls, seen = _overlapping(monkeypatch, fail_at=3, undecodable=9)
    stage = host_feed.TrainerDecode(_Pool(batches), WINDOWS, 0, 1, KEY)
    try:
        assert [stage.next().labels[0] for _ in range(2)] == [0, 4]
        with pytest.raises(host_feed.InputWorkerError) as e:
            stage.next()
    finally:
        stage.close()
    assert str(e.value).startswith(
        f"official_bench: {KEY}: record 9 in a.rec: its JPEG (")
    assert "cannot be decoded (no pixels)" in str(e.value)
    assert calls == [4, 4, 4] and seen == [True] * 8  # 4's call failed


def test_close_with_every_stage_holding_a_batch_is_prompt():
    batches, _ = _stand_in_batches(5)
    pool = _Pool(batches[:4], block=True)
    stage = host_feed.TrainerDecode(pool, WINDOWS, 0, 1, KEY)
    deadline = time.monotonic() + 10
    while pool.given < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # one more would be taken by now
    # one batch waits for next(), one is resized and waits, one decoded
    # waits: host_feed.AHEAD, no more
    assert pool.given == host_feed.AHEAD == 3
    start = time.monotonic()
    stage.close()
    assert time.monotonic() - start < 2 and pool.closed
    assert not [t for t in threading.enumerate()
                if t.name.startswith(f"{KEY}-trainer")]
    with pytest.raises(host_feed.InputWorkerError, match="were closed"):
        stage.next()


def _streams_seen(patch):
    """The CUDA stream each decoder call was given (the calls themselves
    made on the CPU decoder, which has none)."""
    seen, real = [], host_decode._nv_windows

    def windows(pending, kind, device, stream=0):
        seen.append(stream)
        return real(pending, kind, device)
    patch.setattr(host_decode, "_nv_windows", windows)
    return seen


def _waits_and_crops(patch, fail=None):
    """In order: each stream the finish thread waited for (and its
    thread's name), "c" for each crop made; `fail`: the wait's error."""
    from official_bench.host import cuda_driver
    events, real = [], host_decode.finish_crop

    def synchronize(device, stream):
        events.append((stream, threading.current_thread().name))
        if fail:
            raise cuda_driver.CudaDriverError(fail)

    def finish(p, window):
        events.append("c")
        return real(p, window)
    patch.setattr(cuda_driver, "synchronize", synchronize)
    patch.setattr(host_decode, "finish_crop", finish)
    return events


def test_each_batch_in_flight_decodes_on_a_stream_of_its_own(monkeypatch):
    # on one stream a batch's copies would queue behind the next batch's
    # decoder call: AHEAD + 1 streams in turn, each waited for once by
    # the finish thread before the resize threads copy its windows
    batches, want = _stand_in_batches(10)  # 5 packed
    seen = _streams_seen(monkeypatch)
    events = _waits_and_crops(monkeypatch)
    monkeypatch.setattr(host_feed, "decoder_streams",
                        lambda *args: [21, 22, 23, 24])
    stage = host_feed.TrainerDecode(_Pool(batches), WINDOWS, 0, 2, KEY)
    got = _batches(stage)
    assert all((images == pixels).all()
               for (images, _), pixels in zip(got, want))
    assert seen == [21, 22, 23, 24, 21] and stage.streams == [21, 22, 23, 24]
    finish = f"{KEY}-trainer-finish"
    assert events == [e for s in seen for e in [(s, finish)] + ["c"] * 4]
    seen.clear()
    events.clear()
    stage = host_feed.TrainerDecode(_Pool(batches), WINDOWS, 0, 2, KEY,
                                    own_streams=False)
    assert len(_batches(stage)) == 10 and seen == [0] * 5
    assert events == ["c"] * 20  # the default stream: no wait of its own


def test_a_failed_wait_for_a_stream_ends_the_feed_in_one_line(monkeypatch):
    batches, _ = _stand_in_batches(2)
    _waits_and_crops(monkeypatch, fail="cuStreamSynchronize failed on GPU "
                                       "0: CUDA_ERROR_LAUNCH_FAILED")
    monkeypatch.setattr(host_feed, "decoder_streams", lambda *args: [21])
    stage = host_feed.TrainerDecode(_Pool(batches), WINDOWS, 0, 1, KEY)
    assert _first_error(stage) == (
        f"official_bench: {KEY}: the trainer's decoder failed: "
        "cuStreamSynchronize failed on GPU 0: CUDA_ERROR_LAUNCH_FAILED")


def test_streams_are_made_for_a_gpu_decoder_only(monkeypatch,
                                                absl_messages):
    from official_bench.host import cuda_driver
    asked = []

    def streams(device, count):
        asked.append((device, count))
        if device == 3:
            raise cuda_driver.CudaDriverError("no CUDA driver library (x)")
        return list(range(count))
    monkeypatch.setattr(cuda_driver, "new_streams", streams)
    assert host_feed.decoder_streams(WINDOWS, 1, KEY) == [0] and asked == []
    assert host_feed.decoder_streams("nvimgcodec", 1, KEY) == [0, 1, 2, 3]
    assert asked == [(1, host_feed.AHEAD + 1)]
    assert host_feed.decoder_streams("nvimgcodec", 3, KEY) == [0]
    assert absl_messages == [
        f"official_bench: {KEY}: the trainer's decoder shares CUDA's "
        "default stream (no CUDA driver library (x)), so each batch's "
        "copies to the host wait for the next batch's decoding"]


def test_several_gpus_each_decode_their_share_of_a_batch(monkeypatch):
    # each device's decoder takes its contiguous half of a batch's windows
    # on a stream of its own ring, the calls side by side; the finish
    # thread waits for each; the pixels are one device's
    from official_bench.host import cuda_driver
    batches, want = _stand_in_batches(4)  # 2 packed
    calls, waits, real = [], [], host_decode._nv_windows

    def windows(pending, kind, device, stream=0):
        calls.append((len(pending), device, stream))
        return real(pending, kind, device)
    monkeypatch.setattr(host_decode, "_nv_windows", windows)
    monkeypatch.setattr(cuda_driver, "synchronize",
                        lambda device, stream: waits.append((device, stream)))
    monkeypatch.setattr(host_feed, "decoder_streams", lambda decoder, device,
                        key: [10 + 100 * device + k for k in range(4)])
    stage = host_feed.TrainerDecode(_Pool(batches), WINDOWS, (0, 1), 2, KEY)
    got = _batches(stage)
    assert all((images == pixels).all()
               for (images, _), pixels in zip(got, want))
    assert len(got) == 4 and stage.decoded == 8
    assert sorted(calls[:2]) == [(2, 0, 10), (2, 1, 110)]
    assert sorted(calls[2:]) == [(2, 0, 11), (2, 1, 111)]
    assert waits == [(0, 10), (1, 110), (0, 11), (1, 111)]
    assert stage.streams == [10, 11, 12, 13, 110, 111, 112, 113]
