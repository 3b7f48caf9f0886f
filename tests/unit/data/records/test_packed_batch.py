"""data/records/packed_batch.py: decode: gpu_trainer's batches as the
workers pack them and the trainer unpacks them."""

import numpy as np
import pytest

from official_bench.data.records import packed_batch as pb
from official_bench.data.records.host_decode import Pending

SHAPE = (16, 16, 3)  # 768 bytes a slot


def _pending(size, k=0):
    return Pending(bytes([k % 256]) * size, (480, 640, 3, k % 2 == 1),
                   (10 + k, 20, 300, 400), 16, k % 2 == 0, True)


def _pixels(value):
    return np.full(SHAPE, value, np.uint8)


def test_pending_and_ready_items_come_back_as_they_went():
    items = [_pending(100, 0), _pixels(7), _pending(50, 3), _pixels(9)]
    tags = [pb.Tag(k, 1000 + k) for k in range(4)]
    assert pb.plan(items, 768) == [True, False, True, False]
    packed = pb.pack(items, tags, SHAPE)
    assert packed.shape == (4,) + SHAPE and packed.dtype == np.uint8
    out, got = pb.unpack(packed)
    assert got == tags
    assert out[0] == items[0] and out[2] == items[2]
    assert (out[1] == 7).all() and (out[3] == 9).all()


def test_ready_items_are_copied_into_the_given_batch():
    items = [_pending(100, 0), _pixels(7), _pixels(9)]
    packed = pb.pack(items, [pb.Tag(0, k) for k in range(3)], SHAPE)
    batch = np.zeros_like(packed)
    out, _ = pb.unpack(packed, batch)
    assert out[0] == items[0] and (batch[0] == 0).all()
    assert (batch[1] == 7).all() and (batch[2] == 9).all()
    out[1][0, 0, 0] = 1  # the item is its place in the batch
    assert batch[1, 0, 0, 0] == 1


def test_a_jpeg_that_would_eat_the_later_items_reserve_is_decoded_here():
    # 4 slots of 768 bytes, header 256: 2816 bytes for the items. A JPEG
    # of 600 bytes leaves 2216 of them, under the 3 x 768 still to place.
    items = [_pending(600), _pending(40, 1), _pending(40, 2), _pixels(1)]
    keep = pb.plan(items, 768)
    assert keep == [False, True, True, False]
    items[0] = _pixels(5)  # the worker decoded it
    out, _ = pb.unpack(pb.pack(items, [pb.Tag(0, k) for k in range(4)],
                               SHAPE))
    assert (out[0] == 5).all() and out[1] == items[1]


def test_a_batch_where_no_jpeg_fits_goes_plain():
    assert pb.plan([_pending(2000), _pixels(1), _pending(2500)], 768) \
        is None
    assert pb.plan([_pixels(1), _pixels(2)], 768) is None
    # a slot smaller than the header: nothing can be packed
    assert pb.plan([_pending(1)] * 4, 48) is None


def test_items_that_do_not_fit_are_refused():
    with pytest.raises(pb.PackError, match="need more than the 1536 bytes"):
        pb.pack([_pending(800), _pending(800)], [pb.Tag(0, 0)] * 2, SHAPE)


def test_bytes_that_are_no_packed_batch_are_a_clear_error():
    with pytest.raises(pb.PackError, match="no packed batch of 2 items of "
                       r"16x16x3 \(header b'\\x00"):
        pb.unpack(np.zeros((2,) + SHAPE, np.uint8))
    packed = pb.pack([_pending(10), _pixels(1)], [pb.Tag(0, 0)] * 2, SHAPE)
    records = packed.reshape(-1)[16:16 + 2 * pb.ITEM.itemsize].view(pb.ITEM)
    records[0]["length"] = 10 ** 6
    with pytest.raises(pb.PackError, match="item 0: bytes"):
        pb.unpack(packed)


def test_a_worker_share_takes_jpegs_spread_evenly():
    # the k-th JPEG (from 0) is the worker's when floor((k + 1) * share)
    # > floor(k * share): 0.5 every other one, 0.25 every fourth
    assert [k for k in range(8) if pb.worker_takes(k, 0.5)] == [1, 3, 5, 7]
    assert [k for k in range(8) if pb.worker_takes(k, 0.25)] == [3, 7]
    assert not any(pb.worker_takes(k, 0.0) for k in range(100))
    items = [_pending(40, 0), _pixels(1), _pending(40, 1), _pending(40, 2),
             _pending(40, 3)]
    assert pb.plan(items, 768) == [True, False, True, True, True]
    assert pb.plan(items, 768, 0.5) == [True, False, False, True, False]


def test_a_worker_share_composes_with_the_room_rule():
    # the 600-byte JPEG does not fit (see above), so is decoded here
    # whatever the share; the share counts it among the JPEGs
    items = [_pending(600), _pending(40, 1), _pending(40, 2), _pixels(1)]
    assert pb.plan(items, 768, 0.5) == [False, False, True, False]
    assert pb.plan([_pending(40), _pending(40, 1), _pixels(1)], 768,
                   0.5) == [True, False, False]
    # the room rule and the share leave no JPEG to travel: plain
    assert pb.plan([_pending(600), _pending(40, 1), _pixels(1),
                    _pixels(2)], 768, 0.5) is None
