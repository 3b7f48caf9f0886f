"""official-bench-data-service --worker whose dispatcher does not answer:
it says it waits, then exits 1 naming the address (TensorFlow's worker
waited silently forever, with no ready line)."""

import pytest

from official_bench.data.feeds import service
from support.helpers import free_ports


def test_worker_without_a_dispatcher_gives_up_naming_it(capsys):
    dispatcher, port = free_ports(2)
    status = service.main(["--worker", "--dispatcher_address",
                           f"127.0.0.1:{dispatcher}", "--port", str(port),
                           "--dispatcher_timeout_seconds", "1"])
    out, err = capsys.readouterr()
    assert status == 1
    assert f"waiting for the dispatcher at 127.0.0.1:{dispatcher}" in out
    assert err.strip().splitlines()[-1] == (
        f"error: official_bench: tf.data service worker: no dispatcher at "
        f"127.0.0.1:{dispatcher} after 1 s (--dispatcher_timeout_seconds); "
        "start it with: python -m official_bench.data.feeds.service "
        f"--dispatcher --port {dispatcher}")


def test_negative_dispatcher_timeout_is_bad_usage(capsys):
    with pytest.raises(SystemExit) as e:
        service.parse_args(["--worker", "--dispatcher_address", "h:1",
                            "--port", "2", "--dispatcher_timeout_seconds",
                            "-1"])
    assert e.value.code == 2
    assert "--dispatcher_timeout_seconds must be >= 0" in \
        capsys.readouterr().err
