"""Reference ZMQ producer: reads data, PUSHes batches to a trainer.

    python -m official_bench.data.feeds.zmq_producer \\
        --connect tcp://127.0.0.1:5555 \\
        --synthetic --batch_size 32 --image_size 224 --num_classes 1000
    official-bench-zmq-producer --connect tcp://10.0.0.5:5555 \\
        --folder /data/imagenet --split train --workers 8 --batch_size 32

Sources: --synthetic (one random batch, repeated), --folder (an image
folder decoded by --workers processes, python_loader.py), --records (the
trainer's own TFRecord pipeline, records.py: TensorFlow's reader threads
decode and augment here instead of in the trainer), or
--python_source module:function (any Python source, called with a
SourceContext as the trainer would). --batch_size is the trainer's
PER-REPLICA batch; every batch is sent in zmq_wire.py's format. By default
the producer connects to a trainer that binds (the trainer's default);
--bind makes the producer bind and the trainer connect (zmq_bind: false).
Several producers may feed one trainer. No authentication: trusted network
only. A source is waited for without a deadline (the trainer's
zmq_timeout_seconds is the one), with a line each minute it makes no batch.

Its exit statuses are EXIT_STATUSES below, listed by --help from
contracts/exit_status.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from typing import Callable, Iterable, Optional

from official_bench.contracts import exit_status
from official_bench.data.feeds import batch_spec, python_loader, zmq_wire
from official_bench.host.flag_errors import OneLineParser
from official_bench.host.terminal import help_formatter

INSTALL_HINT = ("the ZMQ producer needs pyzmq: "
                "pip install 'official_bench[zmq]'")
WAIT_NOTE_SECONDS = 60.0  # a line each minute the source makes no batch

# --help's exit statuses (contracts/exit_status.help_text).
EXIT_STATUSES = {
    exit_status.OK: "after --max_batches (or when --send_timeout_seconds "
                    "pass with no trainer taking batches)",
    exit_status.FAILED: "a failing source (a bad record: its line)",
    exit_status.CONFIG: "bad arguments (pyzmq missing, an endpoint ZMQ "
                        "refuses, a --python_source that does not import)",
}


def parse_args(argv):
    p = OneLineParser(
        prog="official-bench-zmq-producer",
        # argparse's own usage puts the source group on one 118-column line.
        usage="%(prog)s (--connect ENDPOINT | --bind ENDPOINT)\n"
              "         (--synthetic | --folder DIR | --records DATA_DIR |\n"
              "          --python_source MODULE:FUNCTION) --batch_size N "
              "[options]",
        description="PUSH (images, labels) batches to an official_bench "
                    "trainer (builder: zmq).",
        epilog=exit_status.help_text(EXIT_STATUSES),
        formatter_class=help_formatter())
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--connect", action="append", metavar="ENDPOINT",
                       help="trainer endpoint to connect to (repeatable)")
    where.add_argument("--bind", action="append", metavar="ENDPOINT",
                       help="endpoint to bind (trainer zmq_bind: false); "
                            "give an interface address, e.g. "
                            "tcp://10.0.0.5:5555")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--synthetic", action="store_true",
                     help="one random batch, repeated")
    src.add_argument("--folder", metavar="DIR",
                     help="image folder DIR/<split>/<class>/*.jpg")
    src.add_argument("--records", metavar="DATA_DIR",
                     help="TFRecords (classic or tfds layout) in DATA_DIR, "
                          "through the records builder's pipeline")
    src.add_argument("--python_source", metavar="MODULE:FUNCTION",
                     help="batches from your own function, as the "
                          "trainer's train_dataset.python_source")
    p.add_argument("--split", default="train",
                   help="split to read from --folder, --records or "
                        "--python_source (default train)")
    p.add_argument("--batch_size", type=int, required=True,
                   help="the trainer's per-replica batch size")
    p.add_argument("--image_size", type=int, default=224,
                   help="image height and width; must match the trainer's "
                        "(default 224)")
    p.add_argument("--num_channels", type=int, default=3,
                   help="image channels (default 3)")
    p.add_argument("--num_classes", type=int, default=1000,
                   help="classes of the labels; must match the trainer's "
                        "(default 1000)")
    p.add_argument("--dtype", default="float32",
                   choices=("float32", "float16", "bfloat16", "uint8"),
                   help="image dtype; must match the trainer's "
                        "train_dataset.dtype (uint8 with transfer_uint8)")
    p.add_argument("--workers", type=int, default=-1,
                   help="decoding processes for --folder (default -1: "
                        "CPUs, at most 8; 0 decodes in this process)")
    p.add_argument("--shard", type=int, default=0,
                   help="this producer's share of the data, 0..num_shards-1 "
                        "(default 0)")
    p.add_argument("--num_shards", type=int, default=1,
                   help="producers splitting the data between them "
                        "(default 1)")
    p.add_argument("--skip_bad_records", action="store_true",
                   help="--records: skip and count bad records (the "
                        "dataset key skip_bad_records) instead of stopping")
    p.add_argument("--seed", type=int, default=0,
                   help="shuffle and crop seed (default 0)")
    p.add_argument("--name", default=None,
                   help="producer name in the trainer's errors "
                        "(default host:pid)")
    p.add_argument("--max_batches", type=int, default=0,
                   help="stop after this many batches (0: never)")
    p.add_argument("--send_timeout_seconds", type=float, default=0,
                   help="exit when no trainer takes a batch for this long "
                        "(0: wait forever)")
    args = p.parse_args(argv)
    for key in ("batch_size", "image_size", "num_channels", "num_classes"):
        if getattr(args, key) <= 0:
            p.error(f"--{key} must be > 0, got {getattr(args, key)}")
    for key in ("max_batches", "send_timeout_seconds"):
        if getattr(args, key) < 0:
            p.error(f"--{key} must be >= 0 (0: no limit), got "
                    f"{getattr(args, key):g}")
    if args.workers < -1:
        p.error(f"--workers must be -1 (CPUs, at most "
                f"{python_loader.MAX_WORKERS}), 0 or more, got {args.workers}")
    if args.num_shards <= 0:
        p.error(f"--num_shards must be > 0, got {args.num_shards}")
    if not 0 <= args.shard < args.num_shards:
        p.error(f"--shard {args.shard} must be in 0..{args.num_shards - 1}")
    return args


def make_batches(args) -> Iterable:
    """The source the flags choose, as an endless iterable of batches."""
    if args.synthetic:
        return python_loader.synthetic_batches(
            args.batch_size, args.image_size, args.num_channels,
            args.num_classes, args.dtype, args.seed + args.shard)
    if args.records:
        return _records(args)
    if args.folder:
        return python_loader.folder_batches(
            args.folder, args.split, args.batch_size, args.image_size,
            args.num_channels, args.dtype, True, args.seed, args.shard,
            args.num_shards, args.workers)
    return _user_source(args)


class RecordsError(Exception):
    """The records pipeline's own line for a bad record (FAILED)."""


def _records(args) -> Iterable:
    """The records builder's training batches, as numpy (imports TF).
    num_examples is the manifest's count, where there is one: the producer
    has no flag for it, and an endless stream does not use it."""
    from official_bench.config import DatasetConfig
    from official_bench.data.records import set_counts
    from official_bench.data.records.pipeline import records_dataset
    from official_bench.runtime.keras_setup import tf
    uint8 = args.dtype == "uint8"
    counted, _ = set_counts.read_counts(args.records, args.split)
    ds = DatasetConfig(builder="records", data_dir=args.records,
                       split=args.split, image_size=args.image_size,
                       num_channels=args.num_channels,
                       num_classes=args.num_classes, one_hot=False,
                       dtype="float32" if uint8 else args.dtype,
                       transfer_uint8=uint8,
                       skip_bad_records=args.skip_bad_records,
                       **({"num_examples": counted} if counted else {}))
    ctx = tf.distribute.InputContext(num_input_pipelines=args.num_shards,
                                     input_pipeline_id=args.shard)
    data = records_dataset(ds, ctx, args.batch_size, True, args.seed)
    return _numpy_batches(data, tf.errors.OpError)


def _numpy_batches(data, op_error) -> Iterable:
    """`data`'s batches as numpy; a bad record's op error (its message
    holds the pipeline's "official_bench: bad record ..." line) becomes a
    RecordsError with that line, the hint naming this tool's flag."""
    from official_bench.data.records.record_problems import SKIP_HINT
    try:
        for images, labels in data.as_numpy_iterator():
            yield images, labels.astype("int32")
    except op_error as e:
        ours = re.search(r"official_bench: ([^\]\n]*)", str(e))
        if not ours:
            raise
        raise RecordsError(ours.group(1).strip().replace(
            SKIP_HINT, "; run the producer with --skip_bad_records to skip "
            "bad records")) from None


def _user_source(args) -> Iterable:
    """A python_source run here instead of in the trainer: loaded and
    called as the trainer would (python_batches.py); a source that does
    not import is a ConfigError, one that raises a SourceError, each one
    line naming the source."""
    from official_bench.config import DatasetConfig
    from official_bench.data.feeds import python_batches
    fn = python_batches.load_source(args.python_source, "--python_source")
    ds = DatasetConfig(builder="python", python_source=args.python_source,
                       split=args.split, image_size=args.image_size,
                       num_channels=args.num_channels,
                       num_classes=args.num_classes, dtype=args.dtype
                       if args.dtype != "uint8" else "float32",
                       transfer_uint8=args.dtype == "uint8")
    ctx = python_batches.source_context(ds, args.batch_size, True, args.seed,
                                        args.shard, args.num_shards)
    # No deadline here (the producer waits for every source, SourceWatch
    # says so); the trainer's zmq_timeout_seconds is the one deadline.
    return python_batches.checked_batches(
        fn, args.python_source, ctx,
        python_batches.batch_spec(ds, args.batch_size), None)


def describe_source(args) -> str:
    """The source as its flag names it, for the producer's lines."""
    if args.synthetic:
        return "--synthetic"
    if args.records:
        return f"--records {args.records}"
    if args.folder:
        return f"--folder {args.folder}"
    return f"--python_source {args.python_source}"


class SourceWatch:
    """Says every `every` s that the producer waits for its source.

    The producer sets no deadline on its source (a records shuffle buffer
    filling, or a large folder listed, is slow, not wrong); the trainer's
    zmq_timeout_seconds ends the trainer's wait. A line naming the source
    and the seconds waited tells the producer's operator where it stands.
    Time blocked sending to a trainer is not counted.
    """

    def __init__(self, name: str, source: str, every: float,
                 say: Callable[[str], None]):
        self._name, self._source, self._every, self._say = (
            name, source, every, say)
        self._since: Optional[float] = None  # waiting since, or None
        self._index = 0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="zmq_producer-source-watch")
        self._thread.start()

    def waiting(self, index: int) -> None:
        with self._lock:
            self._since, self._index = time.monotonic(), index

    def got(self) -> None:
        with self._lock:
            self._since = None

    def close(self) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        told_for, told = None, 0  # the wait told about, lines said for it
        while not self._done.wait(min(1.0, self._every / 4)):
            with self._lock:
                since, index = self._since, self._index
            if since is None:
                continue
            if since != told_for:
                told_for, told = since, 0
            waited = time.monotonic() - since
            if waited >= self._every * (told + 1):
                told += 1
                self._say(f"zmq_producer {self._name}: still waiting for "
                          f"batch {index} from {self._source} ({waited:.0f}"
                          " s so far; no deadline here, the trainer's "
                          "zmq_timeout_seconds ends its wait)")


def produce(sock, batches: Iterable, spec: batch_spec.BatchSpec, name: str,
            max_batches: int = 0, source: str = "the source",
            wait_note_seconds: float = WAIT_NOTE_SECONDS) -> int:
    """Checks and sends batches; returns how many were sent. Every
    `wait_note_seconds` that `source` makes no batch, a line says so
    (SourceWatch).

    Checking here too means a broken source fails in the producer, with
    its own traceback, rather than as a rejected batch in the trainer.
    """
    sent = 0
    iterator = iter(batches)
    watch = SourceWatch(name, source, wait_note_seconds,
                        lambda line: print(line, flush=True))
    try:
        while not max_batches or sent < max_batches:
            watch.waiting(sent)
            try:
                images, labels = next(iterator)
            except StopIteration:
                break
            watch.got()
            images, labels = batch_spec.check_batch(
                spec, images, labels, f"producer {name!r} batch {sent}")
            sock.send_multipart(zmq_wire.encode(images, labels, name, sent),
                                copy=False)
            sent += 1
    finally:
        watch.close()
    return sent


def main(argv: Optional[list] = None) -> int:
    from official_bench.config import ConfigError
    from official_bench.data.feeds.python_batches import SourceError
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import zmq
    except ImportError:
        print(f"error: {INSTALL_HINT}", file=sys.stderr)
        return exit_status.CONFIG
    name = args.name or f"{socket.gethostname()}:{os.getpid()}"
    spec = batch_spec.BatchSpec(args.batch_size, args.image_size,
                                args.num_channels, args.num_classes,
                                args.dtype)
    sock = zmq.Context.instance().socket(zmq.PUSH)
    # With --max_batches the last batches may still be queued at exit:
    # wait up to 30 s for the trainer to take them.
    sock.setsockopt(zmq.LINGER, 30000 if args.max_batches else 2000)
    sock.setsockopt(zmq.SNDHWM, 4)
    if args.send_timeout_seconds > 0:
        sock.setsockopt(zmq.SNDTIMEO, int(args.send_timeout_seconds * 1000))
    try:
        for ep in args.bind or []:
            sock.bind(ep)
            print(f"WARNING: zmq_producer {name}: "
                  f"{zmq_wire.bind_warning(ep, 'take the batches')}",
                  file=sys.stderr, flush=True)
        for ep in args.connect or []:
            sock.connect(ep)
        print(f"zmq_producer {name}: {'bound' if args.bind else 'connected'}"
              f" {', '.join(args.bind or args.connect)}", flush=True)
        sent = produce(sock, make_batches(args), spec, name,
                       args.max_batches, describe_source(args))
    except zmq.Again:
        print(f"zmq_producer {name}: no trainer took a batch for "
              f"{args.send_timeout_seconds:g} s; exiting", flush=True)
        return exit_status.OK
    except zmq.ZMQError as e:
        print(f"error: zmq_producer {name}: {e}", file=sys.stderr)
        return exit_status.CONFIG
    except ConfigError as e:  # a --python_source that does not import
        print(f"error: zmq_producer {name}: {e}", file=sys.stderr)
        return exit_status.CONFIG
    except (batch_spec.BadBatch, SourceError, RecordsError,
            FileNotFoundError, ValueError) as e:
        print(f"error: zmq_producer {name}: {e}", file=sys.stderr)
        return exit_status.FAILED
    finally:
        sock.close()
    print(f"zmq_producer {name}: sent {sent} batches", flush=True)
    return exit_status.OK


def run_main() -> None:
    """Console-script entry (official-bench-zmq-producer)."""
    sys.exit(main())


if __name__ == "__main__":
    run_main()
