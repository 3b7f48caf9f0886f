"""official-bench-data-service --worker whose dispatcher does not answer:
it says it waits, then exits 1 naming the address (TensorFlow's worker
waited silently forever, with no ready line); a dispatcher host that does
not resolve is named so, by the worker and by the trainer."""

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
        f"error: official_bench: tf.data service worker: no tf.data service "
        f"dispatcher at 127.0.0.1:{dispatcher} after 1 s "
        "(--dispatcher_timeout_seconds); start one with: python -m "
        f"official_bench.data.feeds.service --dispatcher --port {dispatcher}")


def test_a_dispatcher_host_that_does_not_resolve_is_named(capsys):
    """It used to get the 'start a dispatcher' hint, which cannot help."""
    status = service.main(["--worker", "--dispatcher_address",
                           "no-such-host.invalid:5050", "--port", "5051",
                           "--dispatcher_timeout_seconds", "1"])
    out, err = capsys.readouterr()
    assert status == 1
    assert "(0 s so far; its host 'no-such-host.invalid' does not resolve)" \
        in out
    assert err.strip().splitlines()[-1] == (
        "error: official_bench: tf.data service worker: no tf.data service "
        "dispatcher at no-such-host.invalid:5050 after 1 s "
        "(--dispatcher_timeout_seconds): its host 'no-such-host.invalid' "
        "does not resolve (no DNS or /etc/hosts entry); check the name")


def test_the_trainer_names_a_dispatcher_host_that_does_not_resolve():
    """The trainer's wait (service_feed.py) is the same one."""
    from official_bench.config import DatasetConfig
    from official_bench.data.feeds import service_feed
    ds = DatasetConfig(builder="service", data_dir="/d",
                       data_service_address="no-such-host.invalid:5050",
                       data_service_timeout_seconds=0.5)
    with pytest.raises(service_feed.DataServiceError) as e:
        service_feed.service_dataset(ds, None, 2, True)
    assert str(e.value) == (
        "official_bench: no tf.data service dispatcher at "
        "no-such-host.invalid:5050 after 0.5 s "
        "(train_dataset.data_service_address; "
        "train_dataset.data_service_timeout_seconds): its host "
        "'no-such-host.invalid' does not resolve (no DNS or /etc/hosts "
        "entry); check the name")


def test_negative_dispatcher_timeout_is_bad_usage(capsys):
    with pytest.raises(SystemExit) as e:
        service.parse_args(["--worker", "--dispatcher_address", "h:1",
                            "--port", "2", "--dispatcher_timeout_seconds",
                            "-1"])
    assert e.value.code == 2
    assert "--dispatcher_timeout_seconds must be >= 0" in \
        capsys.readouterr().err
