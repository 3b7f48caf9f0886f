"""official-bench-zmq-producer in-process: --python_source loads and calls
the source as the trainer does, its failures are one line, bad numbers
are bad usage, and a bound endpoint is warned about."""

import re

import pytest

zmq = pytest.importorskip("zmq")

from official_bench.data.feeds import batch_spec, zmq_feed, zmq_producer  # noqa: E402
from support.helpers import free_ports  # noqa: E402

SPEC = batch_spec.BatchSpec(4, 16, 3, 10, "float32")
BASE = ["--batch_size", "4", "--image_size", "16", "--num_classes", "10"]


def _endpoint():
    return f"tcp://127.0.0.1:{free_ports(1)[0]}"


def test_python_source_sends_its_batches(capsys):
    ep = _endpoint()
    pull = zmq.Context.instance().socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    pull.bind(ep)
    try:
        status = zmq_producer.main(
            ["--connect", ep, "--python_source",
             "support.python_sources:context_source", "--max_batches", "2",
             "--shard", "1", "--num_shards", "2", *BASE])
        assert status == 0, capsys.readouterr().err
        assert pull.poll(10000)
        frames = pull.recv_multipart()
    finally:
        pull.close()
    images, labels, _, seq = zmq_feed.zmq_wire.decode(frames, ep)
    assert seq == 0 and images.shape == (4, 16, 16, 3)
    # context_source: input_pipeline_id (the shard) + 2 * is_training
    assert labels.tolist() == [3, 3, 3, 3]


@pytest.mark.parametrize("source, status, words", [
    ("no_such_module_xyz:f", 2,
     "--python_source 'no_such_module_xyz:f': cannot import module"),
    ("support.python_sources:nothing_here", 2,
     "module 'support.python_sources' has no callable 'nothing_here'"),
    ("support.python_sources:failing_source", 1,
     "python_source support.python_sources:failing_source: batch 1 raised "
     "OSError: disk on fire"),
    ("support.python_sources:float64_source", 1,
     "python_source support.python_sources:float64_source: batch 0: images "
     "dtype float64, expected float32"),  # the trainer's words
])
def test_python_source_failures_are_one_line(capsys, source, status, words):
    got = zmq_producer.main(["--connect", _endpoint(), "--python_source",
                             source, "--send_timeout_seconds", "2", *BASE])
    err = capsys.readouterr().err
    assert got == status, err
    assert words in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error: zmq_producer ")


@pytest.mark.parametrize("flag, value, words", [
    ("--max_batches", "-1", "--max_batches must be >= 0"),
    ("--send_timeout_seconds", "-2", "--send_timeout_seconds must be >= 0"),
    ("--workers", "-3", "--workers must be -1"),
    ("--num_shards", "0", "--num_shards must be > 0"),
])
def test_negative_numbers_are_bad_usage(capsys, flag, value, words):
    with pytest.raises(SystemExit) as e:
        zmq_producer.parse_args(["--connect", "tcp://127.0.0.1:1",
                                 "--synthetic", flag, value, *BASE])
    assert e.value.code == 2 and words in capsys.readouterr().err


def test_binding_warns_that_the_port_is_unauthenticated(capsys):
    ep = _endpoint()
    assert zmq_producer.main(["--bind", ep, "--synthetic",
                              "--send_timeout_seconds", "0.5", *BASE]) == 0
    err = capsys.readouterr().err
    assert "WARNING: zmq_producer" in err
    assert f"listening on {ep} with no authentication" in err


def test_trainer_warns_for_each_endpoint_it_binds(caplog):
    from official_bench.config import DatasetConfig
    from official_bench.runtime.keras_setup import tf
    ds = DatasetConfig(builder="zmq", zmq_endpoints=["tcp://127.0.0.1:7001"],
                       image_size=16, num_classes=10)
    ctx = tf.distribute.InputContext(num_input_pipelines=2,
                                     input_pipeline_id=1)
    with caplog.at_level("WARNING"):
        zmq_feed.zmq_dataset(ds, ctx, 4, True, 0)  # lazy: binds nothing
    assert "listening on tcp://127.0.0.1:7002 with no authentication" in \
        caplog.text


class _Socket:
    def __init__(self):
        self.sent = []

    def send_multipart(self, frames, copy=True):
        self.sent.append(frames)


def test_a_source_that_makes_no_batch_is_said_each_interval(capsys):
    """The producer has no deadline for its source (the trainer's
    zmq_timeout_seconds is the one); a silent wait used to look like a
    hang."""
    import time

    import numpy as np

    def slow():
        time.sleep(1.8)
        yield np.zeros((4, 16, 16, 3), np.float32), np.zeros(4, np.int32)
    sock = _Socket()
    assert zmq_producer.produce(sock, slow(), SPEC, "p1", 0,
                                "--python_source m:f",
                                wait_note_seconds=0.5) == 1
    lines = [line for line in capsys.readouterr().out.splitlines()
             if "still waiting" in line]
    assert lines[0].startswith(
        "zmq_producer p1: still waiting for batch 0 from --python_source "
        "m:f (")
    assert "the trainer's zmq_timeout_seconds ends its wait" in lines[0]
    # at 0.5 s and 1 s, with 0.8 s to spare for a loaded machine
    assert len(lines) >= 2


def _receiving(endpoint, timeout):
    """zmq_feed.receive's generator asked for one batch in a thread, as
    tf.data's prefetch asks: (thread, what it got)."""
    import threading
    got = {}

    def pull():
        gen = zmq_feed.receive([endpoint], True, timeout, SPEC)
        try:
            got["batch"] = next(gen)
        except StopIteration:
            got["ended"] = True
        except zmq_feed.ZmqFeedError as e:
            got["error"] = str(e)
    thread = threading.Thread(target=pull, daemon=True)
    thread.start()
    return thread, got


def test_a_receive_waiting_when_training_ends_returns_at_once(monkeypatch):
    """model.fit's teardown joins the pipeline's thread: a receive whose
    producers stopped sending held a run's end for zmq_timeout_seconds."""
    import threading
    import time
    waiting = threading.Event()
    next_frames = zmq_feed._next_frames

    def entered(*args):
        waiting.set()
        return next_frames(*args)
    monkeypatch.setattr(zmq_feed, "_next_frames", entered)
    thread, got = _receiving(_endpoint(), 60.0)
    # Inside the wait (not still starting: a start clears the end)
    assert waiting.wait(30)
    assert thread.is_alive()  # waiting for a batch
    began = time.monotonic()
    zmq_feed.end_of_training()
    thread.join(10)
    assert not thread.is_alive() and got == {"ended": True}
    assert time.monotonic() - began < 5 * zmq_feed.POLL_SECONDS + 1
    # The next receive (a new fit's) waits again, and its timeout holds.
    thread, got = _receiving(_endpoint(), 0.6)
    thread.join(10)
    assert "no batch for 0.6 s" in got["error"]


def _truncated_records(tmp_path):
    """8 classic records (12x12, labels 1..3) cut inside the fifth."""
    from support.records import write_records
    root = write_records(str(tmp_path / "rec"))
    path = tmp_path / "rec" / "train-00000-of-00001"
    data = path.read_bytes()
    path.write_bytes(data[:len(data) * 9 // 16])
    return root


def test_a_bad_record_is_one_line_naming_the_producers_flag(tmp_path,
                                                             capsys):
    """It was a 25-line TensorFlow traceback, its hint a dataset key the
    producer cannot set."""
    args = ["--records", _truncated_records(tmp_path), "--batch_size", "2",
            "--image_size", "12", "--num_classes", "3",
            "--send_timeout_seconds", "2", "--connect", _endpoint()]
    assert zmq_producer.main(args) == 1
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err
    assert re.match(r"error: zmq_producer \S+: bad record \d+ in \S+: "
                    "corrupt or truncated", last), last
    assert last.endswith("; run the producer with --skip_bad_records to skip "
                         "bad records"), last


def test_skip_bad_records_sends_the_good_ones(tmp_path, capsys):
    ep = _endpoint()
    pull = zmq.Context.instance().socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    pull.bind(ep)
    try:
        status = zmq_producer.main(
            ["--records", _truncated_records(tmp_path), "--batch_size", "2",
             "--image_size", "12", "--num_classes", "3", "--max_batches",
             "4", "--skip_bad_records", "--connect", ep])
        assert status == 0, capsys.readouterr().err
        for _ in range(4):
            assert pull.poll(10000)
            pull.recv_multipart()
    finally:
        pull.close()
