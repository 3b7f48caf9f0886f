"""A tf.data service dispatcher and its workers in one process, each
server built by official_bench.data.feeds.service.start as the CLI builds
it: the system tests' cluster at one TensorFlow start instead of one per
server (the CLI itself, one server per process, is
tests/unit/data/feeds/test_service.py's).

    python -m support.service_cluster DISPATCHER_PORT WORKER_PORT...

Prints the CLI's ready line for every server once all of them are up,
then serves until killed."""

import sys

from official_bench.data.feeds import service


def main(argv):
    dispatcher, *workers = argv
    servers = [service.start(service.parse_args(
        ["--dispatcher", "--port", dispatcher]))]
    for port in workers:
        servers.append(service.start(service.parse_args(
            ["--worker", "--dispatcher_address", f"127.0.0.1:{dispatcher}",
             "--port", port, "--worker_address", "127.0.0.1"])))
    for role, port in [("dispatcher", dispatcher)] + [
            ("worker", p) for p in workers]:
        print(service.READY.format(role=role, port=port), flush=True)
    servers[0].join()


if __name__ == "__main__":
    main(sys.argv[1:])
