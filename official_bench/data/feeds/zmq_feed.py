"""`builder: zmq`: producer processes PUSH batches, the trainer PULLs them.

Each input pipeline (one per worker process) opens one PULL socket. By
default it binds on every endpoint of `zmq_endpoints` and producers
`--connect` to it; with `zmq_bind: false` it connects to producers that
`--bind`. Under several workers, worker i (its input pipeline id) uses each
tcp endpoint with its port + i: endpoints ['tcp://10.0.0.5:5555'] give
worker 0 port 5555 and worker 1 port 5556, so each worker's producers
connect to their own port. Any number of producers may feed one socket; ZMQ
fair-queues between them.

Batches arrive in zmq_wire.py's format and are checked like a Python
source's (batch_spec.py); then tf.data one-hot encodes them and the strategy
prefetches them to the devices. Errors stop the run with one line that
starts "official_bench: zmq" and names the producer and the field; when no
batch arrives for `zmq_timeout_seconds`, the line says how long, on which
endpoints, and when each producer last sent. Once training has ended
(`end_of_training`, from the trainer's last callback), a receive waiting
for a batch returns within POLL_SECONDS: model.fit's teardown joins the
pipeline's threads, and a producer that has stopped sending would
otherwise hold the run's end for a whole zmq_timeout_seconds.

ZMQ here has no CURVE authentication: anyone who can reach the endpoint can
send batches (never code: the format has no pickle). Bind to a trusted
network's address only.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Dict, Iterator, List

from absl import logging

from official_bench.config import ConfigError, DatasetConfig
from official_bench.data.feeds import python_source, zmq_wire
from official_bench.data.feeds.batch_spec import BadBatch, check_batch
from official_bench.runtime.keras_setup import tf

INSTALL_HINT = ("builder zmq needs pyzmq: pip install 'official_bench[zmq]' "
                "(or pip install pyzmq)")
_TCP_PORT = re.compile(r"^(tcp://.*):(\d+)$")
POLL_SECONDS = 0.25  # a waiting receive checks for the end of training
_TRAINING_ENDED = threading.Event()


def end_of_training() -> None:
    """Training is over: a receive waiting for a batch stops waiting (the
    next receive, a new fit's or an evaluation's, waits again)."""
    _TRAINING_ENDED.set()


class ZmqFeedError(RuntimeError):
    """No batch in time, or a batch that is not ours or does not fit."""


def import_zmq():
    """pyzmq, or a ConfigError with the install hint."""
    try:
        import zmq
    except ImportError as e:
        raise ConfigError(f"{INSTALL_HINT} ({e})") from e
    return zmq


def worker_endpoints(endpoints: List[str], pipeline_id: int) -> List[str]:
    """This worker's endpoints: tcp ports offset by its pipeline id."""
    out = []
    for ep in endpoints:
        m = _TCP_PORT.match(ep)
        if m:
            out.append(f"{m.group(1)}:{int(m.group(2)) + pipeline_id}")
        elif pipeline_id == 0:
            out.append(ep)
        else:
            raise ConfigError(
                f"zmq_endpoints {ep!r}: with several workers each needs its "
                "own endpoint; use tcp://host:port (worker i gets port + i)")
    return out


def _silence(endpoints: List[str], timeout: float, received: int,
             last_seen: Dict[str, float]) -> str:
    now = time.monotonic()
    seen = ", ".join(f"{p!r} {now - t:.1f} s ago" for p, t in
                     sorted(last_seen.items())) or "none"
    return (f"official_bench: zmq: no batch for {timeout:g} s "
            f"(zmq_timeout_seconds) on {', '.join(endpoints)} after "
            f"{received} batches; producers last heard from: {seen}; is "
            "every producer running and connected?")


def receive(endpoints: List[str], bind: bool, timeout: float, spec
            ) -> Iterator[tuple]:
    """Checked (images, labels) batches from a PULL socket, endless."""
    zmq = import_zmq()
    context = zmq.Context.instance()
    sock = context.socket(zmq.PULL)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, 4)
    sock.setsockopt(zmq.RCVTIMEO, int(min(timeout, POLL_SECONDS) * 1000))
    _TRAINING_ENDED.clear()
    try:
        for ep in endpoints:
            try:
                sock.bind(ep) if bind else sock.connect(ep)
            except zmq.ZMQError as e:
                verb = "bind" if bind else "connect"
                raise ZmqFeedError(f"official_bench: zmq: cannot {verb} {ep}: "
                                   f"{e}") from None
        received, last_seen = 0, {}
        where = ", ".join(endpoints)
        while True:
            frames = _next_frames(zmq, sock, timeout)
            if frames is None:
                if _TRAINING_ENDED.is_set():
                    return
                raise ZmqFeedError(_silence(endpoints, timeout, received,
                                            last_seen))
            try:
                images, labels, producer, seq = zmq_wire.decode(
                    [frames[0].bytes] + [f.buffer for f in frames[1:]],
                    where)
                images, labels = check_batch(
                    spec, images, labels,
                    f"producer {producer!r} batch {seq} on {where}")
            except BadBatch as e:
                raise ZmqFeedError(f"official_bench: zmq: {e}") from None
            last_seen[producer] = time.monotonic()
            received += 1
            yield images, labels
    finally:
        sock.close(0)


def _next_frames(zmq, sock, timeout: float):
    """The next message's frames; None after `timeout` s without one, or
    once training has ended."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            # copy=False: the arrays are views of ZMQ's buffers (one copy
            # fewer for a 19 MB ResNet batch); tf.data copies them.
            return sock.recv_multipart(copy=False)
        except zmq.Again:
            if _TRAINING_ENDED.is_set() or time.monotonic() >= deadline:
                return None


def zmq_dataset(ds: DatasetConfig, ctx: tf.distribute.InputContext,
                batch_size: int, is_training: bool,
                seed: int) -> tf.data.Dataset:
    """This worker's batches from its producers."""
    import_zmq()  # fail before training starts when pyzmq is missing
    endpoints = worker_endpoints(ds.zmq_endpoints, ctx.input_pipeline_id)
    if ds.zmq_bind:
        for ep in endpoints:
            logging.warning("official_bench: zmq: %s", zmq_wire.bind_warning(
                ep, "send this trainer batches (data only: nothing is "
                    "unpickled)"))
    spec = python_source.batch_spec(ds, batch_size)
    dataset = tf.data.Dataset.from_generator(
        lambda: receive(endpoints, ds.zmq_bind, ds.zmq_timeout_seconds,
                        spec),
        output_signature=python_source.signature(spec))
    return python_source.finish(dataset, ds)
