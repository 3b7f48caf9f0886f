"""Start a tf.data service dispatcher or worker (builder: service).

    python -m official_bench.data.feeds.service --dispatcher --port 5050
    python -m official_bench.data.feeds.service --worker \\
        --dispatcher_address 10.0.0.5:5050 --port 5051 \\
        [--worker_address 10.0.0.6]

One dispatcher per cluster, any number of workers (on hosts that see the
trainer's data_dir at the same path); trainers set
`train_dataset.builder: service` and
`train_dataset.data_service_address: <dispatcher host:port>`.
`--worker_address` is the host trainers use to reach this worker (the
dispatcher passes it on); TensorFlow's default, localhost, only works when
everything runs on one host.

Security: both servers listen on all interfaces with no authentication or
encryption (data/feeds/service_feed.py); a warning says so at start. Trusted,
firewalled networks only.

Prints one "ready" line when serving, then serves until killed. Its exit
statuses are EXIT_STATUSES below, listed by --help from
contracts/exit_status.
"""

from __future__ import annotations

import sys

from official_bench.contracts import exit_status
from official_bench.contracts.hostport import HostPortError, parse_hostport
from official_bench.host.flag_errors import OneLineParser
from official_bench.host.terminal import help_formatter

READY = "official_bench: tf.data service {role} ready on port {port}"
# --help's exit statuses (contracts/exit_status.help_text).
EXIT_STATUSES = {
    exit_status.OK: "the server stopped",
    exit_status.FAILED: "the server cannot start (port taken; a worker "
                        "whose dispatcher does not answer)",
    exit_status.CONFIG: "bad arguments",
}


def parse_args(argv):
    p = OneLineParser(
        prog="official-bench-data-service",
        description="Run a tf.data service dispatcher or worker for "
                    "official_bench's builder: service.",
        epilog=exit_status.help_text(EXIT_STATUSES),
        formatter_class=help_formatter())
    role = p.add_mutually_exclusive_group(required=True)
    role.add_argument("--dispatcher", action="store_true",
                      help="run the dispatcher (one per cluster)")
    role.add_argument("--worker", action="store_true",
                      help="run a worker (needs --dispatcher_address)")
    p.add_argument("--port", type=int, required=True,
                   help="port to listen on (all interfaces)")
    p.add_argument("--dispatcher_address", metavar="HOST:PORT",
                   help="the dispatcher (--worker only)")
    p.add_argument("--dispatcher_timeout_seconds", type=float, default=300,
                   metavar="S",
                   help="a worker gives up when the dispatcher does not "
                        "answer within S seconds (default 300; 0: wait "
                        "forever)")
    p.add_argument("--worker_address", default="localhost", metavar="HOST",
                   help="host name or address trainers reach this worker "
                        "at (--worker; default localhost: one host only)")
    args = p.parse_args(argv)
    if not 0 < args.port < 65536:
        p.error(f"--port must be in 1..65535, got {args.port}")
    if args.dispatcher_timeout_seconds < 0:
        p.error(f"--dispatcher_timeout_seconds must be >= 0, got "
                f"{args.dispatcher_timeout_seconds:g}")
    if args.worker:
        if not args.dispatcher_address:
            p.error("--worker needs --dispatcher_address HOST:PORT")
        try:
            parse_hostport(args.dispatcher_address)
        except HostPortError as e:
            p.error(f"--dispatcher_address {args.dispatcher_address!r} is "
                    f"not host:port: it {e.reason}")
    elif args.dispatcher_address:
        p.error("--dispatcher_address applies to --worker only")
    return args


def start(args):
    """Builds and starts the server; returns it."""
    from official_bench.runtime.keras_setup import tf
    service = tf.data.experimental.service
    if args.dispatcher:
        return service.DispatchServer(service.DispatcherConfig(
            port=args.port, fault_tolerant_mode=False))
    return service.WorkerServer(service.WorkerConfig(
        dispatcher_address=args.dispatcher_address, port=args.port,
        worker_address=f"{args.worker_address}:%port%"))


def main(argv=None) -> int:
    args = parse_args(argv)
    from official_bench.data.feeds.service_feed import SECURITY_WARNING
    print(f"WARNING: {SECURITY_WARNING}", file=sys.stderr, flush=True)
    role = "dispatcher" if args.dispatcher else "worker"
    if args.worker:
        from official_bench.data.feeds.dispatcher_wait import (
            wait_for_dispatcher,
        )
        missing = wait_for_dispatcher(
            args.dispatcher_address, args.dispatcher_timeout_seconds,
            "--dispatcher_timeout_seconds",
            say=lambda line: print(line, flush=True))
        if missing:
            print(f"error: official_bench: tf.data service worker: "
                  f"{missing}", file=sys.stderr, flush=True)
            return exit_status.FAILED
    try:
        server = start(args)
    except Exception as e:  # noqa: BLE001 - reported, exit 1
        print(f"official_bench: tf.data service {role} could not start on "
              f"port {args.port}: {e}", file=sys.stderr, flush=True)
        return exit_status.FAILED
    print(READY.format(role=role, port=args.port), flush=True)
    server.join()
    return exit_status.OK


def run_main() -> None:
    """Console-script entry (official-bench-data-service)."""
    sys.exit(main())


if __name__ == "__main__":
    run_main()
