"""jax_backend/synthetic.py: the host batch (numpy, here) and the feed
that puts it on two CPU devices (in one child Python, as JAX's device
count is fixed per process)."""

import json

import ml_dtypes
import numpy as np
import pytest

from official_bench.config import DatasetConfig
from official_bench.jax_backend.synthetic import host_batch
from support.helpers import keras3_child


def _ds(**kw):
    return DatasetConfig(**dict(dict(image_size=8, num_classes=10), **kw))


@pytest.mark.parametrize("dtype, expected", [
    ("float32", np.float32), ("float16", np.float16),
    ("bfloat16", ml_dtypes.bfloat16)])
def test_host_batch_shapes_and_dtypes(dtype, expected):
    images, labels = host_batch(_ds(dtype=dtype), 6, seed=0, stream=0)
    assert images.shape == (6, 8, 8, 3) and images.dtype == expected
    # random normals, not zeros or a constant
    values = images.astype(np.float32)
    assert abs(values.mean()) < 0.3 and 0.7 < values.std() < 1.3
    assert labels.shape == (6, 10) and labels.dtype == np.float32


def test_one_hot_and_sparse_labels_name_the_same_classes():
    dense = host_batch(_ds(one_hot=True), 32, seed=1, stream=0)[1]
    sparse = host_batch(_ds(one_hot=False), 32, seed=1, stream=0)[1]
    assert sparse.dtype == np.int32 and sparse.shape == (32,)
    assert sparse.min() >= 0 and sparse.max() < 10
    assert (dense.sum(axis=1) == 1).all()
    assert (dense.argmax(axis=1) == sparse).all()
    assert len(set(sparse.tolist())) > 1


def test_streams_differ_and_a_stream_repeats():
    ds = _ds(num_channels=1)
    a = host_batch(ds, 4, seed=0, stream=0)
    again = host_batch(ds, 4, seed=0, stream=0)
    other_stream = host_batch(ds, 4, seed=0, stream=1)
    other_seed = host_batch(ds, 4, seed=1, stream=0)
    assert a[0].shape == (4, 8, 8, 1)
    assert np.array_equal(a[0], again[0]) and np.array_equal(a[1], again[1])
    assert not np.array_equal(a[0], other_stream[0])
    assert not np.array_equal(a[0], other_seed[0])


def feed_report():
    """In the child (2 CPU devices): both locations' batches, their
    shards, and the host thread's life."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from official_bench.jax_backend.synthetic import SyntheticFeed
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    sharding = NamedSharding(mesh, PartitionSpec("batch"))
    host = host_batch(_ds(one_hot=False), 8, seed=5, stream=0)
    out = {"devices": len(jax.devices())}
    for location in ("device", "host"):
        feed = SyntheticFeed(jax, _ds(one_hot=False,
                                      synthetic_location=location),
                             8, sharding, seed=5, process_index=0)
        first, second = feed.next(), feed.next()
        thread = feed._thread
        report = {
            "shape": list(first[0].shape), "dtype": str(first[0].dtype),
            "spec": [list(a.sharding.spec) for a in first],
            "equal_to_host": [bool(np.array_equal(np.asarray(a), h))
                              for a, h in zip(first, host)],
            "second_equal": [bool(np.array_equal(np.asarray(a),
                                                 np.asarray(b)))
                             for a, b in zip(first, second)],
            "same_buffers": first[0] is second[0],
            # each device's shard: (device id, first row, rows, == host's)
            "shards": [[s.device.id, s.index[0].start or 0,
                        s.data.shape[0], bool(np.array_equal(
                            np.asarray(s.data),
                            host[0][s.index[0]]))]
                       for s in first[0].addressable_shards],
            "thread_alive_before_close": bool(thread and thread.is_alive()),
        }
        feed.close()
        report["thread_alive_after_close"] = bool(thread and
                                                  thread.is_alive())
        out[location] = report
    print(json.dumps(out))


@pytest.fixture(scope="module")
def feeds():
    return keras3_child(__file__, "feed_report", cpu_devices=2)


@pytest.mark.parametrize("location", ["device", "host"])
def test_feed_gives_the_host_batch_sharded_over_the_batch_axis(feeds,
                                                               location):
    assert feeds["devices"] == 2
    r = feeds[location]
    assert r["shape"] == [8, 8, 8, 3] and r["dtype"] == "float32"
    assert r["spec"] == [["batch"], ["batch"]]
    assert r["equal_to_host"] == [True, True]
    assert r["second_equal"] == [True, True]  # the same batch every step
    assert sorted(r["shards"]) == [[0, 0, 4, True], [1, 4, 4, True]]


def test_device_feed_keeps_one_resident_batch(feeds):
    assert feeds["device"]["same_buffers"] is True
    assert feeds["device"]["thread_alive_before_close"] is False


def test_host_feed_copies_from_a_thread_that_stops_on_close(feeds):
    host = feeds["host"]
    assert host["same_buffers"] is False  # a fresh copy each step
    assert host["thread_alive_before_close"] is True
    assert host["thread_alive_after_close"] is False
