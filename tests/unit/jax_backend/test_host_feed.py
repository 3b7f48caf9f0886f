"""jax_backend/host_feed.py on two CPU devices (in one child Python, as
JAX's device count is fixed per process): input workers running the
stand-in source (support/worker_examples.py) through the feed, normalised
on the devices, sharded over the batch axis; evaluation passes; a failing
worker; a Python source's per-replica batches joined per step."""

import json

import ml_dtypes
import numpy as np
import pytest

from official_bench.config import DatasetConfig
from official_bench.contracts.imagenet import (
    IMAGENET_MEAN_RGB,
    IMAGENET_STD_RGB,
)
from official_bench.jax_backend import host_feed
from support.helpers import keras3_child

EXAMPLES = "support.worker_examples:examples"


def _ds(**kw):
    return DatasetConfig(**dict(dict(image_size=4, num_classes=40,
                                     mean_subtract=True, standardize=True,
                                     worker_timeout_seconds=60.0), **kw))


@pytest.mark.parametrize("dtype, expected", [
    ("float32", np.float32), ("bfloat16", ml_dtypes.bfloat16)])
def test_normalize_is_the_imagenet_arithmetic_in_the_dataset_dtype(
        dtype, expected):
    images = np.arange(2 * 4 * 4 * 3, dtype=np.uint8).reshape(2, 4, 4, 3)
    out = host_feed.normalize(np, images, _ds(dtype=dtype))
    assert out.dtype == expected
    want = (images.astype(np.float32) - np.float32(IMAGENET_MEAN_RGB)) / \
        np.float32(IMAGENET_STD_RGB)
    np.testing.assert_allclose(out.astype(np.float32), want,
                               rtol=1e-2 if dtype == "bfloat16" else 1e-6)
    only_mean = host_feed.normalize(np, images, _ds(standardize=False))
    np.testing.assert_allclose(
        only_mean, images - np.float32(IMAGENET_MEAN_RGB), rtol=1e-6)
    gray = host_feed.normalize(np, images[..., :1], _ds(num_channels=1))
    np.testing.assert_allclose(
        gray, (images[..., :1] - np.mean(np.float32(IMAGENET_MEAN_RGB))) /
        np.mean(np.float32(IMAGENET_STD_RGB)), rtol=1e-6)


def test_a_records_feed_with_more_workers_than_cpus_warns(monkeypatch,
                                                          caplog):
    """records_feed names a num_workers above the usable CPUs (16 on 2
    CPUs used to start in silence); its workers start with the pass, so
    this fake JAX (numpy and jit) suffices."""
    import logging
    import os
    import types
    monkeypatch.setattr(os, "sched_getaffinity",
                        lambda pid: {0, 1})
    jax = types.SimpleNamespace(numpy=np, jit=lambda fn, **kw: fn)
    caplog.set_level(logging.WARNING)
    for workers in (2, 16):
        host_feed.records_feed(
            jax, _ds(num_workers=workers), 4, None, training=False, seed=0,
            process_index=0, process_count=1, steps_per_pass=1,
            files=["/nowhere/validation-00000-of-00001"])
    assert [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING] == [
        "official_bench: validation_dataset.num_workers is 16, more than "
        "the 2 CPU(s) this process may use: the workers share them with "
        "each other and with the process feeding the devices, and each is "
        "a Python process of its own (memory, start-up); 'auto' starts 1"]


def test_an_evaluation_longer_than_a_pass_is_refused_before_training(
        tmp_path):
    """One process: the validation files' records (counted, 16 bytes read
    per record) over the batch against the evaluation's steps; the feed
    said so only at the first evaluation, after training."""
    from official_bench.config import ConfigError
    from official_bench.data.records.framing import frame
    files = []
    for s, n in enumerate((3, 2)):  # 5 records
        path = tmp_path / f"validation-{s:05d}-of-00002"
        path.write_bytes(b"".join(frame(b"x" * 7) for _ in range(n)))
        files.append(str(path))
    from official_bench.data.records.host_examples import FileShard
    files = FileShard(files)  # as process_files gives them
    host_feed.check_eval_pass(files, 2, 2)  # 2 whole batches of 2
    with pytest.raises(ConfigError) as e:
        host_feed.check_eval_pass(files, 2, 3)
    assert str(e.value) == (
        "validation_dataset: one pass over its 2 file(s) gives at most 2 "
        "batches of 2 (5 records), the evaluation takes 3 "
        "(evaluation.steps, else this dataset's num_examples / the global "
        "batch): set validation_dataset.num_examples=5 (and "
        "evaluation.steps, if set, to at most 2)")


def _stand_in(**kwargs):
    return host_feed.Source(EXAMPLES, dict(kwargs))


def _expected_batch(labels, ds):
    """What the stand-in's examples become on the devices."""
    images = np.stack([np.full((4, 4, 3), k % 256, np.uint8)
                       for k in labels])
    return host_feed.normalize(np, images, ds).astype(np.float32)


def _mesh():
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    return jax, NamedSharding(mesh, PartitionSpec("batch"))


def feed_report():
    """In the child: a training feed of two workers, an evaluation feed
    read twice, one whose pass is too short, one whose worker fails, and
    (last) a python source's feed."""
    jax, sharding = _mesh()
    out = {"devices": len(jax.devices())}
    ds = _ds(dtype="bfloat16")
    feed = host_feed.HostFeed(
        jax, host_feed.pool_maker(_stand_in(), ds, 8, "train_dataset", 2),
        sharding, ds, "train_dataset", uint8=True,
        info={"builder": "records", "num_workers": 2})
    batches = [feed.next() for _ in range(3)]
    pids = list(feed._producer.pids)
    out["train"] = {
        "dtype": str(batches[0][0].dtype),
        "labels_dtype": str(batches[0][1].dtype),
        "spec": [list(a.sharding.spec) for a in batches[0]],
        "shards": sorted([s.device.id, s.index[0].start or 0,
                          s.data.shape[0]]
                         for s in batches[0][0].addressable_shards),
        "labels": [np.asarray(b[1]).argmax(-1).tolist() for b in batches],
        "one_hot_rows": [np.asarray(b[1]).sum(-1).tolist()
                         for b in batches],
        "images_match": [bool(np.allclose(
            np.asarray(b[0]).astype(np.float32),
            _expected_batch(np.asarray(b[1]).argmax(-1), ds)))
            for b in batches]}
    feed.close()
    out["train"]["describe"] = feed.describe()
    out["train"]["pids"] = pids
    out["train"]["alive_after_close"] = _alive(pids)
    # Evaluation: 10 examples over 2 workers, batches of 4, 2 steps a pass.
    ev = _ds(one_hot=False)
    feed = host_feed.HostFeed(
        jax, host_feed.pool_maker(_stand_in(count=10), ev, 4,
                                  "validation_dataset", 2),
        sharding, ev, "validation_dataset", uint8=True, steps_per_pass=2)
    passes = [[np.asarray(feed.next()[1]).tolist() for _ in range(2)]
              for _ in range(2)]
    out["eval"] = {"passes": passes, "running_after_pass":
                   feed._thread is not None}
    feed.close()
    short = host_feed.HostFeed(
        jax, host_feed.pool_maker(_stand_in(count=10), ev, 4,
                                  "validation_dataset", 2),
        sharding, ev, "validation_dataset", uint8=True, steps_per_pass=3)
    out["short"] = _error_of(short, 3)
    failing = host_feed.HostFeed(
        jax, host_feed.pool_maker(_stand_in(fail_at=13), ev, 4,
                                  "train_dataset", 2),
        sharding, ev, "train_dataset", uint8=True)
    out["failing"] = _error_of(failing, 10)
    out["failing_alive"] = _alive(failing._producer.pids)
    out["closed_mid_copy"] = _closed_mid_copy(jax, sharding, ds)
    out["gpu_decode_here"] = {
        decode: _error_of_call(lambda decode=decode: host_feed.workers_decoder(
            jax, _ds(decode=decode), "train_dataset"))
        for decode in ("gpu", "gpu_trainer")}
    out["window_decoder"] = _window_decoder_batches()
    out["trainer_decode"] = _trainer_decode_feed(jax, sharding)
    out["python"] = _python_feed()
    print(json.dumps(out))


def _trainer_decode_feed(jax, sharding):
    """decode: gpu_trainer's stage (nvImageCodec's CPU decoder here) under
    a feed: two steps, what describe() says, the workers after close()."""
    import tempfile

    from official_bench.data.build.example_proto import classic_example
    from official_bench.data.records.framing import frame
    from support.natural_images import natural_jpeg
    with tempfile.TemporaryDirectory() as tmp:
        with open(f"{tmp}/train-00000-of-00001", "wb") as f:
            for i in range(6):
                f.write(frame(classic_example(natural_jpeg(i, 48, 36),
                                              1 + i % 2, 36, 48)))
        ds = DatasetConfig(builder="records", split="train", image_size=32,
                           num_classes=2, data_dir=tmp,
                           worker_timeout_seconds=60.0)
        from official_bench.data.records import host_examples
        files = host_examples.process_files(ds, 0, 1, True)
        make = host_feed.trainer_decode_maker(host_feed.records_source(
            ds, files, True, 0, "nvimgcodec_cpu", pack_batch=4), ds, 4,
            "train_dataset", 1, "nvimgcodec_cpu", 0, 2)
        feed = host_feed.HostFeed(jax, make, sharding, ds, "train_dataset",
                                  uint8=True, info={"decode": "gpu_trainer"})
        shapes = [list(feed.next()[0].shape) for _ in range(2)]
        pids = list(feed._producer.pool.pids)
        feed.close()
        return {"shapes": shapes, "describe": feed.describe(),
                "alive_after_close": _alive(pids)}


def _window_decoder_batches():
    """decode: gpu's worker path on nvImageCodec's CPU decoder: a batch
    from 2 spawned workers, and the same batch from simplejpeg's."""
    import tempfile

    from official_bench.data.records import host_examples
    from support.natural_images import record_set
    with tempfile.TemporaryDirectory() as tmp:
        ds = DatasetConfig(builder="records", split="train", image_size=96,
                           num_classes=2, shuffle_buffer_size=1,
                           worker_timeout_seconds=60.0,
                           data_dir=record_set(tmp, 2, 1, classes=2, train=4,
                                               validation=1, width=96,
                                               height=72))
        files = host_examples.process_files(ds, 0, 1, training=True)
        batches = {}
        for decoder in ("nvimgcodec_cpu", "simplejpeg"):
            pool = host_feed.pool_maker(host_feed.records_source(
                ds, files, True, 0, decoder), ds, 4, "train_dataset", 2)()
            try:
                b = pool.next()
                batches[decoder] = (b.images.copy(), b.labels.tolist())
                b.release()
            finally:
                pool.close()
    (ours, y1), (theirs, y2) = batches["nvimgcodec_cpu"], \
        batches["simplejpeg"]
    return {"shape": list(ours.shape), "labels_equal": y1 == y2,
            "mad": float(np.abs(ours.astype(int) - theirs).mean())}


def _error_of_call(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 - reported to the test
        return [type(e).__name__, str(e)]
    return None


def _closed_mid_copy(jax, sharding, ds):
    """The training thread closes the feed while the copy thread is
    copying the first batch out of its slot: what that copy read."""
    import threading
    import time
    copying, seen = threading.Event(), []

    class SlowCopy(host_feed.HostFeed):
        def _to_devices(self, host):
            copying.set()
            time.sleep(0.5)  # close() is called meanwhile
            seen.append(host.images[:, 0, 0, 0].tolist())  # reads the slot
            return super()._to_devices(host)
    feed = SlowCopy(
        jax, host_feed.pool_maker(_stand_in(), ds, 8, "train_dataset", 2),
        sharding, ds, "train_dataset", uint8=True)
    copying.wait(60)
    feed.close()
    return seen


def _error_of(feed, steps):
    try:
        for _ in range(steps):
            feed.next()
    except Exception as e:  # noqa: BLE001 - reported to the test
        return [type(e).__name__, str(e)]
    finally:
        feed.close()
    return None


def _alive(pids):
    import os
    return [p for p in pids if os.path.exists(f"/proc/{p}")]


@pytest.fixture(scope="module")
def report():
    return keras3_child(__file__, "feed_report", cpu_devices=2)


def test_records_batches_arrive_normalised_and_sharded(report):
    assert report["devices"] == 2
    r = report["train"]
    assert r["dtype"] == "bfloat16" and r["labels_dtype"] == "float32"
    assert r["spec"] == [["batch"], ["batch"]]
    assert r["shards"] == [[0, 0, 4], [1, 4, 4]]
    # round-robin over the 2 workers: worker w makes w, w + 2, ...
    assert r["labels"] == [[0, 2, 4, 6, 8, 10, 12, 14],
                           [1, 3, 5, 7, 9, 11, 13, 15],
                           [16, 18, 20, 22, 24, 26, 28, 30]]
    assert r["one_hot_rows"] == [[1.0] * 8] * 3
    assert r["images_match"] == [True, True, True]


def test_closing_the_feed_ends_its_workers_and_says_what_they_did(report):
    r = report["train"]
    assert len(r["pids"]) == 2 and r["alive_after_close"] == []
    d = r["describe"]
    assert d["builder"] == "records" and d["num_workers"] == 2
    assert d["images_decoded"] >= 24  # 3 batches of 8, and those ahead
    # close() waited for the copy under way before unmapping the slots:
    # the copy read its batch (not a segfault, not another mapping's bytes).
    assert report["closed_mid_copy"] == [[0, 2, 4, 6, 8, 10, 12, 14]]


def test_each_evaluation_reads_the_same_fresh_pass(report):
    passes = report["eval"]["passes"]
    assert passes[0] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert passes[1] == passes[0]
    assert report["eval"]["running_after_pass"] is False


def test_a_pass_shorter_than_the_evaluation_is_one_line(report):
    # 10 examples: 2 whole batches of 4 and the last 2 dropped
    kind, message = report["short"]
    assert kind == "InputWorkerError"
    assert message == (
        "official_bench: validation_dataset: one pass gave 2 batches, the "
        "evaluation takes 3 (evaluation.steps, else this dataset's "
        "num_examples / the global batch): is num_examples right for these "
        "files?")


@pytest.mark.parametrize("decode", ["gpu", "gpu_trainer"])
def test_decode_on_a_gpu_without_one_names_the_devices(report, decode):
    assert report["gpu_decode_here"][decode] == [
        "ConfigError", f"train_dataset.decode: {decode!r} needs a GPU; this "
        "process's JAX devices are cpu:0, cpu:1"]


def test_cpu_window_decodes_in_the_workers_on_nvimgcodecs_cpu_decoder(
        monkeypatch):
    """decode: cpu_window needs no GPU (no JAX asked): the workers' window
    decoder on the CPU, the path the test below runs; a decoder that does
    not start is one line naming the key."""
    from official_bench.config import ConfigError
    from official_bench.data.records import host_decode
    ds = _ds(decode="cpu_window")
    assert host_feed.workers_decoder(None, ds, "train_dataset") == (
        "nvimgcodec_cpu", (0,))

    def missing(kind, device):
        assert (kind, device) == ("cpu", 0)
        raise host_decode.DecoderUnavailable(
            "nvImageCodec is not importable (ImportError: no module)")
    monkeypatch.setattr(host_decode, "check_decoder", missing)
    with pytest.raises(ConfigError) as e:
        host_feed.workers_decoder(None, ds, "train_dataset")
    assert str(e.value) == ("train_dataset.decode: 'cpu_window': "
                            "nvImageCodec is not importable (ImportError: "
                            "no module)")


def test_input_workers_decode_with_the_window_decoder(report):
    r = report["window_decoder"]
    assert r["shape"] == [4, 96, 96, 3] and r["labels_equal"]
    # accurate against fast DCT: about one unit, not the same pixels
    assert 0.3 < r["mad"] < 2.4, r


def test_the_trainers_decoder_feeds_steps_and_says_what_it_did(report):
    r = report["trainer_decode"]
    assert r["shapes"] == [[4, 32, 32, 3]] * 2
    d = r["describe"]
    assert d["decode"] == "gpu_trainer" and d["images_decoded"] >= 8
    assert d["images_decoded_in_trainer"] >= 8  # every image a JPEG
    assert d["decode_streams"] == 1  # the CPU decoder: no streams to make
    assert r["alive_after_close"] == []


def test_result_json_gives_gpu_trainers_threads_and_worker_share():
    info = host_feed.records_info(
        _ds(decode="gpu_trainer", worker_decode_share=0.5), "nvimgcodec",
        15, 64)
    assert info == {"builder": "records", "decoder": "nvimgcodec",
                    "decode": "gpu_trainer", "num_workers": 15, "files": 64,
                    "decode_threads": host_feed.decode_threads(),
                    "worker_decode_share": 0.5}
    assert set(host_feed.records_info(_ds(decode="gpu"), "nvimgcodec", 15,
                                      64)) == {
        "builder", "decoder", "decode", "num_workers", "files"}


def test_gpu_trainers_resize_threads_grow_with_its_gpus(monkeypatch):
    monkeypatch.setattr(host_feed, "usable_cores", lambda: 100)
    assert [host_feed.decode_threads(n) for n in (1, 2, 8)] == [8, 16, 64]
    monkeypatch.setattr(host_feed, "usable_cores", lambda: 12)
    assert [host_feed.decode_threads(n) for n in (1, 2, 8)] == [8, 12, 12]
    assert host_feed.records_info(_ds(decode="gpu_trainer"), "nvimgcodec",
                                  15, 64, 2)["decode_threads"] == 12


def test_a_failing_worker_ends_the_feed_in_one_line(report):
    kind, message = report["failing"]
    assert kind == "InputWorkerError"
    assert message.startswith("official_bench: train_dataset: input worker "
                              "1 of 2 (pid ")
    # no files given: the source is named
    assert message.endswith("failed reading its source: ValueError: bad "
                            "record 13 in memory: truncated")
    assert "\n" not in message
    assert report["failing_alive"] == []


def _python_feed():
    """In the child (feed_report's: one start, not two): a python source's
    per-replica batches, 2 per step."""
    jax, sharding = _mesh()
    ds = _ds(python_source="official_bench.data.feeds.python_loader:"
                           "synthetic_source", one_hot=False,
             num_classes=10)
    feed = host_feed.python_feed(jax, ds, 3, 2, sharding, training=True,
                                 seed=4, process_index=0, process_count=1)
    images, labels = feed.next()
    from official_bench.data.feeds.python_loader import synthetic_batches
    want = next(synthetic_batches(3, 4, 3, 10, "float32", seed=4))
    out = {"shape": list(images.shape), "dtype": str(images.dtype),
           "labels": np.asarray(labels).tolist(),
           "want_labels": np.concatenate([want[1], want[1]]).tolist(),
           "images_equal": bool(np.array_equal(
               np.asarray(images), np.concatenate([want[0], want[0]])))}
    feed.close()
    # A source that refills one buffer in place, one batch per step: each
    # batch served keeps its own values after the next ones were read.
    reused = _ds(python_source="support.python_sources:"
                               "reused_buffer_source", one_hot=False,
                 num_classes=10)
    feed = host_feed.python_feed(jax, reused, 6, 1, sharding, training=True,
                                 seed=4, process_index=0, process_count=1)
    served = [feed.next() for _ in range(4)]
    out["reused"] = [[float(np.asarray(i).min()), float(np.asarray(i).max()),
                      np.asarray(l).tolist()] for i, l in served]
    feed.close()
    return out


def test_a_python_source_feeds_one_per_replica_batch_per_device(report):
    r = report["python"]
    assert r["shape"] == [6, 4, 4, 3] and r["dtype"] == "float32"
    assert r["labels"] == r["want_labels"]
    assert r["images_equal"] is True
    # The feed copies a batch on the devices before the source may reuse
    # its buffer (HostFeed._to_devices).
    assert r["reused"] == [[k, k, [k] * 6] for k in range(4)]


def test_a_training_source_that_ends_is_the_tensorflow_trainers_line():
    """The JAX feed said 'the input ended after 2 batches', the TensorFlow
    trainer 'ran out after step 2 of 6': one wording now
    (python_batches.ran_out_message), the feed made as the JAX trainer
    makes it. JAX stood in for by numpy."""
    from types import SimpleNamespace

    from official_bench.data.feeds.shm_workers import InputWorkerError
    from official_bench.jax_backend import trainer
    jax = SimpleNamespace(numpy=np, jit=lambda f, **kw: f,
                          make_array_from_process_local_data=lambda s, a: a,
                          block_until_ready=lambda x: x)
    run = SimpleNamespace(jax=jax, process_count=1, process_index=0,
                          local_devices=[0])
    ds = _ds(builder="python", one_hot=False,
             python_source="support.python_sources:two_batch_source")
    feed = trainer._feed(ds, run, 2, None, 0, None, total_steps=6)
    feed.next()
    feed.next()
    with pytest.raises(InputWorkerError) as e:
        feed.next()
    assert str(e.value) == (
        "official_bench: the training input ran out after step 2 of 6 "
        "(train_dataset.builder python, python_source "
        "support.python_sources:two_batch_source): a training source must "
        "be endless (the trainer takes train.steps batches); no result "
        "written")


@pytest.mark.parametrize("decode,module,wheel", [
    ("cpu", "simplejpeg", "simplejpeg"),
    ("cpu", "cv2", "opencv-python-headless"),
    ("cpu_window", "cv2", "opencv-python-headless")])
def test_a_missing_decode_library_is_one_line_before_the_workers_start(
        monkeypatch, decode, module, wheel):
    """Every decode resizes with OpenCV and decodes some JPEGs with
    simplejpeg: checked here, as the trainer does before building the
    model (a missing one was each record's 'cannot be decoded')."""
    import sys

    from official_bench.config import ConfigError
    monkeypatch.setitem(sys.modules, module, None)  # import raises
    with pytest.raises(ConfigError) as e:
        host_feed.workers_decoder(None, _ds(decode=decode), "train_dataset")
    assert str(e.value) == (
        f"train_dataset.decode: {decode!r}: {module} is not importable "
        f"(ModuleNotFoundError: import of {module} halted; None in "
        f'sys.modules); install {wheel} (pip install -e ".[jax]")')


@pytest.mark.parametrize("decode", ["gpu", "gpu_trainer"])
def test_a_gpu_decode_starts_a_decoder_on_each_of_the_processs_gpus(
        monkeypatch, decode):
    # gpu_trainer too: the trainer decodes each GPU's share of a batch on
    # that GPU (one decoder on the first would feed all of them)
    import types

    from official_bench.data.records import host_decode
    started = []
    monkeypatch.setattr(host_decode, "check_decoder",
                        lambda kind, device: started.append((kind, device)))
    gpu = [types.SimpleNamespace(platform="gpu", local_hardware_id=k)
           for k in (2, 3)]
    jax = types.SimpleNamespace(local_devices=lambda: gpu)
    assert host_feed.workers_decoder(jax, _ds(decode=decode),
                                     "train_dataset") == ("nvimgcodec", (2, 3))
    assert started == [("gpu", 2), ("gpu", 3)]
