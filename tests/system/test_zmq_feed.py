"""builder: zmq: the wire format, the trainer's PULL feed, the reference
producer, and training from real producer processes on 127.0.0.1."""

import contextlib
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

zmq = pytest.importorskip("zmq")

from official_bench.config import ConfigError  # noqa: E402
from official_bench.data.feeds import batch_spec, zmq_feed, zmq_wire  # noqa: E402
from support.helpers import (  # noqa: E402
    REPO,
    TINY_OVERRIDE,
    cli_env,
    consecutive_free_port,
    free_ports,
)

SPEC = batch_spec.BatchSpec(4, 16, 3, 10, "float32")


def _batch(dtype=np.float32, n=4):
    return (np.zeros((n, 16, 16, 3), dtype),
            np.arange(n, dtype=np.int32) % 10)


# -- wire format ------------------------------------------------------------

def test_wire_round_trip_keeps_values_dtype_and_names():
    images = np.random.default_rng(0).standard_normal(
        (4, 16, 16, 3)).astype(np.float32)
    labels = np.array([1, 2, 3, 9], np.int64)
    frames = zmq_wire.encode(images, labels, "p7", 12)
    assert frames[0].startswith(b"OBB1")
    got_images, got_labels, producer, seq = zmq_wire.decode(frames, "ep")
    assert np.array_equal(got_images, images)
    assert got_labels.dtype == np.int64 and got_labels.tolist() == [1, 2, 3, 9]
    assert (producer, seq) == ("p7", 12)


@pytest.mark.parametrize("frames,message", [
    ([b"hello"], r"1 frames, expected 3"),
    ([b"XXXX{}", b"", b""], r"header does not start with b'OBB1'"),
    ([b"OBB1{nope", b"", b""], r"header is not JSON"),
    ([b'OBB1{"producer": "p", "seq": 0, "images": {"dtype": "object", '
      b'"shape": [1]}, "labels": {"dtype": "int32", "shape": [1]}}',
      b"x", b"1234"], r"producer 'p' batch 0 on ep: images dtype 'object'"),
    ([b'OBB1{"producer": "p", "seq": 3, "images": {"dtype": "float32", '
      b'"shape": [2]}, "labels": {"dtype": "int32", "shape": [1]}}',
      b"1234", b"1234"], r"producer 'p' batch 3 on ep: images frame has 4 "
                        r"bytes, the header's float32 \[2\] needs 8"),
])
def test_wire_rejects_frames_that_are_not_ours(frames, message):
    with pytest.raises(batch_spec.BadBatch, match=message):
        zmq_wire.decode(frames, "ep")


def test_worker_endpoints_offset_tcp_ports_by_worker():
    eps = ["tcp://127.0.0.1:5555", "tcp://10.0.0.2:6000"]
    assert zmq_feed.worker_endpoints(eps, 0) == eps
    assert zmq_feed.worker_endpoints(eps, 2) == [
        "tcp://127.0.0.1:5557", "tcp://10.0.0.2:6002"]
    assert zmq_feed.worker_endpoints(["ipc:///tmp/x"], 0) == ["ipc:///tmp/x"]
    with pytest.raises(ConfigError, match="worker i gets port"):
        zmq_feed.worker_endpoints(["ipc:///tmp/x"], 1)


def test_missing_pyzmq_gives_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "zmq", None)
    with pytest.raises(ConfigError,
                       match=r"pip install 'official_bench\[zmq\]'"):
        zmq_feed.import_zmq()


# -- the feed, in process ---------------------------------------------------

def _feed(endpoint, timeout=5.0):
    """The feed's generator on a thread; returns (results, thread)."""
    out = {"batches": []}

    def run():
        try:
            for batch in zmq_feed.receive([endpoint], True, timeout, SPEC):
                out["batches"].append(batch)
                if len(out["batches"]) >= 2:
                    return
        except Exception as e:  # noqa: BLE001 - handed to the test
            out["error"] = e
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return out, thread


@contextlib.contextmanager
def _push(endpoint):
    sock = zmq.Context.instance().socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    try:
        yield sock
    finally:
        sock.close(0)


def test_feed_receives_and_checks_batches():
    ep = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    out, thread = _feed(ep)
    with _push(ep) as sock:
        for seq in range(2):
            sock.send_multipart(zmq_wire.encode(*_batch(), "good", seq))
        thread.join(10)
    assert not thread.is_alive() and "error" not in out, out.get("error")
    images, labels = out["batches"][1]
    assert images.shape == (4, 16, 16, 3) and labels.dtype == np.int32


@pytest.mark.parametrize("frames,message", [
    (zmq_wire.encode(*_batch(np.float16), "bad-dtype", 0),
     r"official_bench: zmq: producer 'bad-dtype' batch 0 on tcp://127.0.0.1:"
     r"\d+: images dtype float16, expected float32"),
    (zmq_wire.encode(*_batch(np.float64), "odd-dtype", 0),
     r"producer 'odd-dtype' batch 0 .*images dtype 'float64' is not one of "
     r"float32, float16, bfloat16, uint8"),
    (zmq_wire.encode(*_batch(n=3), "bad-shape", 0),
     r"producer 'bad-shape' batch 0 .*images shape \(3, 16, 16, 3\), "
     r"expected \(4, 16, 16, 3\)"),
    ([b"GET / HTTP/1.1", b"", b""],
     r"official_bench: zmq: message on tcp://127.0.0.1:\d+: header does not "
     r"start with b'OBB1'; not an official_bench batch"),
])
def test_feed_rejects_bad_batches_naming_producer_and_field(frames, message):
    ep = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    out, thread = _feed(ep)
    with _push(ep) as sock:
        sock.send_multipart(frames)
        thread.join(10)
    assert not thread.is_alive()
    assert re.search(message, str(out.get("error"))), out


def test_feed_times_out_naming_endpoint_and_silent_producer():
    ep = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    out, thread = _feed(ep, timeout=1.0)
    start = time.monotonic()
    with _push(ep) as sock:
        sock.send_multipart(zmq_wire.encode(*_batch(), "quiet", 0))
        thread.join(10)
    assert time.monotonic() - start < 5
    assert re.search(r"official_bench: zmq: no batch for 1 s "
                     r"\(zmq_timeout_seconds\) on tcp://127.0.0.1:\d+ after 1 "
                     r"batches; producers last heard from: 'quiet'",
                     str(out.get("error"))), out


def test_zmq_dataset_error_reaches_tf_data():
    from official_bench.config import DatasetConfig
    from official_bench.runtime.keras_setup import tf
    port = free_ports(1)[0]
    ds = DatasetConfig(builder="zmq", image_size=16, num_classes=10,
                       batch_size=4, zmq_endpoints=[f"tcp://127.0.0.1:{port}"],
                       zmq_timeout_seconds=0.2)
    data = zmq_feed.zmq_dataset(ds, tf.distribute.InputContext(), 4, True, 0)
    with pytest.raises(Exception, match=r"official_bench: zmq: no batch for "
                                        r"0\.2 s"):
        next(iter(data))


# -- real producer processes ------------------------------------------------

def _producer(*args):
    return subprocess.Popen(
        [sys.executable, "-m", "official_bench.data.feeds.zmq_producer",
         "--batch_size", "4", "--image_size", "16",
         *args] + ([] if "--num_classes" in args else
                   ["--num_classes", "10"]),
        cwd=REPO, env=cli_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)


def _stop(proc):
    """SIGTERM, then SIGKILL if it does not go."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.stdout.read() if proc.stdout and not proc.stdout.closed \
        else ""


@contextlib.contextmanager
def _producers(*arg_lists):
    procs = [_producer(*args) for args in arg_lists]
    try:
        yield procs
    finally:
        for p in procs:
            _stop(p)


def test_producer_bad_arguments_exit_2():
    p = subprocess.run([sys.executable, "-m",
                        "official_bench.data.feeds.zmq_producer",
                        "--synthetic",
                        "--connect", "tcp://127.0.0.1:1", "--batch_size",
                        "0"], cwd=REPO, env=cli_env(), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and "--batch_size must be > 0" in p.stderr


def test_producer_binds_and_sends_max_batches():
    port = free_ports(1)[0]
    ep = f"tcp://127.0.0.1:{port}"
    with _producers(["--bind", ep, "--synthetic", "--name", "b1",
                     "--max_batches", "3"]) as (proc,):
        got = list(zip(range(3), zmq_feed.receive([ep], False, 30, SPEC)))
        assert proc.wait(30) == 0
        assert "sent 3 batches" in proc.stdout.read()
    assert len(got) == 3


def _trainer(endpoint, model_dir, *extra):
    override = ",".join([TINY_OVERRIDE, "train_dataset.builder=zmq",
                         f"train_dataset.zmq_endpoints=[{endpoint}]",
                         *extra])
    return subprocess.Popen(
        [sys.executable, "-m", "official_bench.classifier_trainer",
         "--mode=train", f"--model_dir={model_dir}",
         f"--params_override={override}"],
        cwd=REPO, env=cli_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_trains_from_two_producer_processes_mirrored(tmp_path, absl_messages):
    """trainer.run in this process (its two logical CPUs, tests/conftest),
    as the CLI runs it (the CLI itself: the tests below); what the CLI
    prints is in the absl records. In bfloat16: float32 on the wire, the
    model computes in bfloat16 on the device."""
    from official_bench import trainer
    ep = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    # 8 steps x 2 replicas take 16 batches; each producer sends 12, so
    # the run finishes only if both feed it. Its end waits one timeout:
    # TensorFlow stops the iterator in a receive that the spent producers
    # never answer (20 s was 20 s idle); their batches are queued before
    # the first receive, so no gap during the run comes near 5 s.
    override = ",".join([TINY_OVERRIDE, "train_dataset.builder=zmq",
                         f"train_dataset.zmq_endpoints=[{ep}]",
                         "runtime.distribution_strategy=mirrored",
                         "runtime.cpu_devices=2", "train.steps=8",
                         "train_dataset.zmq_timeout_seconds=5",
                         "runtime.mixed_precision_dtype=bfloat16"])
    with _producers(["--connect", ep, "--synthetic", "--name", "pa",
                     "--max_batches", "12"],
                    ["--connect", ep, "--synthetic", "--name", "pb",
                     "--seed", "1", "--max_batches", "12"]) as procs:
        for proc in procs:  # "connected ...": started, batches queued
            proc.stdout.readline()
        r = trainer.run(None, mode="train", model_dir=str(tmp_path),
                        params_override=override)
    text = "\n".join(absl_messages)
    assert r.stats.total_steps == 8, text[-3000:]  # the CLI's exit 0
    assert "2 replicas x 4 images" in text and "input wait" in text
    assert r.environment["dtype"] == "bfloat16"
    assert r.model.layers[1].compute_dtype == "bfloat16"
    assert np.isfinite(r.history["loss"][-1])


@pytest.mark.slow
def test_killed_producer_ends_the_run_within_the_timeout(tmp_path):
    ep = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    trainer = _trainer(ep, tmp_path, "train.steps=100000",
                       "train.time_history.log_steps=5",
                       "train_dataset.zmq_timeout_seconds=2")
    with _producers(["--connect", ep, "--synthetic", "--name",
                     "doomed"]) as (producer,):
        try:
            lines = []
            for line in trainer.stdout:  # wait until training is under way
                lines.append(line)
                if "TimeHistory:" in line:
                    break
            producer.kill()
            killed = time.monotonic()
            rest, _ = trainer.communicate(timeout=120)
        finally:
            _stop(trainer)
    took = time.monotonic() - killed
    out = "".join(lines) + rest
    assert trainer.returncode == 1, out[-3000:]
    assert re.search(r"error: official_bench: zmq: no batch for 2 s "
                     r"\(zmq_timeout_seconds\) on tcp://127.0.0.1:\d+ after "
                     r"\d+ batches; producers last heard from: 'doomed'", out)
    assert took < 2 + 30, took


@pytest.mark.slow
@pytest.mark.multiworker
def test_two_workers_each_bind_their_port_and_train(tmp_path):
    base = consecutive_free_port(2)
    workers = free_ports(2)
    hosts = ",".join(f"127.0.0.1:{p}" for p in workers)
    trainers = [
        _trainer(f"tcp://127.0.0.1:{base}", tmp_path / str(i),
                 "runtime.distribution_strategy=multi_worker_mirrored",
                 f"runtime.worker_hosts='{hosts}'", f"runtime.task_index={i}",
                 "runtime.all_reduce_alg=ring",
                 "runtime.peer_timeout_seconds=120", "train.steps=4",
                 "train_dataset.zmq_timeout_seconds=60")
        for i in range(2)]
    # Worker i's producer connects to base + i only.
    outs = []
    with _producers(*[["--connect", f"tcp://127.0.0.1:{base + i}",
                       "--synthetic", "--name", f"for-worker{i}"]
                      for i in range(2)]):
        try:
            for t in trainers:
                outs.append(t.communicate(timeout=400)[0])
        finally:
            for t in trainers:
                _stop(t)
    for t, out in zip(trainers, outs):
        assert t.returncode == 0, out[-3000:]
        assert "TimeHistory: " in out
    assert "global batch 8" in outs[0]  # 4 per replica x 2 workers


@pytest.mark.slow
def test_producer_sends_tfrecords_through_the_records_pipeline(tmp_path):
    from official_bench.data.build.example_proto import classic_example
    from official_bench.runtime.keras_setup import tf
    with tf.io.TFRecordWriter(str(tmp_path / "train-00000-of-00001")) as w:
        for i in range(8):
            jpeg = tf.io.encode_jpeg(tf.fill([20, 20, 3], tf.constant(
                30 * (i % 3), tf.uint8))).numpy()
            w.write(classic_example(jpeg, i % 3 + 1, 20, 20))  # 1-based
    ep = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    spec = batch_spec.BatchSpec(4, 16, 3, 3, "uint8")
    with _producers(["--bind", ep, "--records", str(tmp_path), "--dtype",
                     "uint8", "--num_classes", "3", "--name", "rec",
                     "--max_batches", "4"]) as (proc,):
        got = list(zip(range(4), zmq_feed.receive([ep], False, 90, spec)))
        assert proc.wait(60) == 0
    labels = np.concatenate([b[1][1] for b in got])
    assert labels.dtype == np.int32 and set(labels.tolist()) <= {0, 1, 2}
    assert len(set(labels.tolist())) > 1  # not one repeated batch
    assert got[0][1][0].shape == (4, 16, 16, 3)


def test_config_checks_the_zmq_keys():
    from official_bench.config import build_config
    with pytest.raises(ConfigError, match=r"train_dataset.zmq_endpoints.*"
                                          r"builder zmq needs at least one"):
        build_config([("t", {"train_dataset": {"builder": "zmq"}})])
    with pytest.raises(ConfigError,
                       match=r"train_dataset.zmq_timeout_seconds"
                             r".*must be > 0 and <= 604800, got 0"):
        build_config([("t", {"train_dataset": {
            "builder": "zmq", "zmq_endpoints": ["tcp://127.0.0.1:5555"],
            "zmq_timeout_seconds": 0}})])
