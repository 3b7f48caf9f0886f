"""builder: service: a real tf.data service dispatcher on 127.0.0.1 (python
-m official_bench.data.feeds.service), a clear error while it has no worker,
then a CLI training run through two workers; a clear error when no
dispatcher is there."""

import time

import pytest

from official_bench.config import ConfigError, load_config
from official_bench.data.feeds import service
from support.helpers import (
    TINY_OVERRIDE,
    cli,
    free_ports,
    kill_all,
    start_service,
)

pytestmark = pytest.mark.slow


def _records(root):
    from support.records import write_records as write
    return write(root, count=16)


def _service_override(data_dir, address, *extra):
    return TINY_OVERRIDE + "".join(
        f",{o}" for o in ("train_dataset.builder=service",
                          f"train_dataset.data_dir={data_dir}",
                          f"train_dataset.data_service_address={address}",
                          *extra))


def test_missing_dispatcher_fails_within_the_timeout(tmp_path):
    """trainer.run in this process, as the CLI runs it (the CLI's exit and
    error line for a DataServiceError: the no-worker run below)."""
    from official_bench import trainer
    from official_bench.data.feeds.service_feed import DataServiceError
    data_dir = _records(tmp_path / "data")
    port = free_ports(1)[0]
    override = _service_override(data_dir, f"127.0.0.1:{port}",
                                 "train_dataset.data_service_timeout_seconds"
                                 "=1")
    start = time.monotonic()
    with pytest.raises(DataServiceError) as e:
        trainer.run(None, mode="train", model_dir=str(tmp_path / "m"),
                    params_override=override)
    assert f"no tf.data service dispatcher at 127.0.0.1:{port} after 1 s" \
        in str(e.value)
    assert f"--dispatcher --port {port}" in str(e.value)
    assert time.monotonic() - start < 120


def test_dispatcher_without_then_with_two_workers(tmp_path):
    """One dispatcher: first with no worker (TensorFlow's client would wait
    for one forever; the trainer's probe gives up after the timeout), then
    with two workers a CLI training run goes through them."""
    data_dir = _records(tmp_path / "data")
    dport, w1, w2 = free_ports(3)
    address = f"127.0.0.1:{dport}"
    procs = []
    try:
        dispatcher, dlines = start_service("--dispatcher", "--port",
                                           str(dport))
        procs.append(dispatcher)
        assert any("no authentication" in l for l in dlines), dlines
        _fails_without_workers(tmp_path / "alone", data_dir, address)
        for port in (w1, w2):
            procs.append(start_service("--worker", "--dispatcher_address",
                                address, "--port", str(port))[0])
        override = _service_override(
            data_dir, address, "train_dataset.image_size=8",
            "model.model_params.num_classes=3", "train_dataset.num_classes=3",
            "validation_dataset.num_classes=3",
            "validation_dataset.image_size=8",
            "runtime.distribution_strategy=one_device")
        r = cli(["--mode=train", f"--model_dir={tmp_path / 'm'}",
                 f"--params_override={override}"], timeout=600)
        assert r.returncode == 0, r.stdout[-4000:]
        assert "runs on the tf.data service at 127.0.0.1" in r.stdout
        assert "no authentication or encryption" in r.stdout
        assert "examples/second" in r.stdout
    finally:
        kill_all(procs)


def _fails_without_workers(model_dir, data_dir, address):
    """The trainer CLI against a dispatcher with no worker: exit FAILED
    within the 2 s timeout (plus start-up), naming the dispatcher and how
    to start a worker; no result.json."""
    from official_bench.contracts import exit_status
    override = _service_override(data_dir, address,
                                 "train_dataset.data_service_timeout_seconds"
                                 "=2")
    start = time.monotonic()
    r = cli(["--mode=train", f"--model_dir={model_dir}",
             f"--params_override={override}"], timeout=300)
    took = time.monotonic() - start
    assert r.returncode == exit_status.FAILED, r.stdout[-3000:]
    last = [l for l in r.stdout.splitlines() if l.strip()][-1]
    assert last.startswith(
        f"error: official_bench: the tf.data service dispatcher at "
        f"{address} answers, but no worker served a batch within 2 s "
        "(train_dataset.data_service_address; "
        "train_dataset.data_service_timeout_seconds)"), r.stdout[-3000:]
    assert f"--worker --dispatcher_address {address}" in last
    assert not (model_dir / "result.json").exists()
    assert took < 200, took


def test_cli_arguments_are_checked():
    with pytest.raises(SystemExit):
        service.parse_args(["--worker", "--port", "5000"])
    with pytest.raises(SystemExit):
        service.parse_args(["--dispatcher", "--port", "70000"])
    args = service.parse_args(["--worker", "--port", "5001",
                               "--dispatcher_address", "127.0.0.1:5000"])
    assert args.worker and args.worker_address == "localhost"


@pytest.mark.parametrize("override,message", [
    ("train_dataset.builder=service,train_dataset.data_dir=/d",
     r"train_dataset.data_service_address: builder service needs"),
    ("train_dataset.builder=service,train_dataset.data_dir=/d,"
     "train_dataset.data_service_address=nohost",
     r"'nohost' is not host:port"),
    ("train_dataset.builder=service,train_dataset.data_dir=/d,"
     "train_dataset.data_service_address=h:1,"
     "train_dataset.skip_bad_records=true",
     r"train_dataset.skip_bad_records: builder service cannot"),
])
def test_config_errors(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(params_override=override)
