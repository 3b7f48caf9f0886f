"""builder: service: the records pipeline runs on tf.data service workers.

TensorFlow's tf.data service (`tf.data.experimental.service`) moves a
pipeline's preprocessing off the training host: the trainer serialises the
pipeline (records.py's, unchanged) and registers it with a dispatcher, which
hands it to every worker process; the trainer streams finished batches from
them over gRPC. Start the servers with `python -m
official_bench.data.feeds.service` (data/feeds/service.py); how to run it,
and what each choice means for a run: docs/data.md, `builder: service`.

Why it is shaped so:
- Processing mode `ShardingPolicy.OFF` ("parallel epochs"): dynamic sharding
  needs a source the dispatcher can split, and ours reads files through its
  own bad-record guard, so every worker runs its own copy of the stream.
- `skip_bad_records: true` is rejected by config.py: its logging runs Python
  (tf.numpy_function), which cannot be sent to a worker.
- TensorFlow's client waits forever for a dispatcher or for a worker, and
  nothing tells it how many workers there are. So the trainer first polls the
  dispatcher's port, then asks for one element of a one-element probe
  dataset, each for up to `data_service_timeout_seconds`, and fails naming
  the address and the start command (dispatcher_wait.py, shared with the
  service worker; a host that does not resolve is named so). The probe
  runs in a daemon thread (on a timeout it is left blocked inside
  TensorFlow); one probe per process and address. Security (no TLS, no
  authentication, every interface): docs/data.md and docs/security.md.
"""

from __future__ import annotations

import threading
import time

from absl import logging

from official_bench.config import DatasetConfig
from official_bench.data.feeds import dispatcher_wait
from official_bench.data.records.pipeline import records_dataset
from official_bench.runtime.keras_setup import tf

SECURITY_WARNING = (
    "official_bench: the tf.data service has no authentication or "
    "encryption and its servers listen on all interfaces; use it on a "
    "trusted network only (docs/data.md, 'builder: service')")


class DataServiceError(RuntimeError):
    """The dispatcher cannot be reached; names the address and the fix."""


_PROBED = set()  # dispatcher addresses whose workers answered a probe


def _distribute(address: str):
    return tf.data.experimental.service.distribute(
        processing_mode=tf.data.experimental.service.ShardingPolicy.OFF,
        service=f"grpc://{address}")


def _worker_command(address: str) -> str:
    return (f"python -m official_bench.data.feeds.service --worker "
            f"--dispatcher_address {address} --port <Q> --worker_address "
            "<this worker's host>")


def wait_for_a_worker(address: str, timeout: float, key: str) -> float:
    """Waits until a service worker serves one element of a probe dataset
    through the dispatcher at `address`; returns the seconds it took, or
    raises DataServiceError after `timeout` seconds (see module doc)."""
    if address in _PROBED:
        return 0.0
    out = {}

    def probe():
        try:
            probe_ds = tf.data.Dataset.range(1).apply(_distribute(address))
            out["elements"] = [int(x) for x in probe_ds.as_numpy_iterator()]
        except Exception as e:  # noqa: BLE001 - reported below
            out["error"] = e
    start = time.monotonic()
    thread = threading.Thread(target=probe, name="data_service_probe",
                              daemon=True)
    thread.start()
    thread.join(timeout)
    waited = time.monotonic() - start
    if thread.is_alive():
        raise DataServiceError(
            f"official_bench: the tf.data service dispatcher at {address} "
            f"answers, but no worker served a batch within {timeout:g} s "
            f"({key}.data_service_address; "
            f"{key}.data_service_timeout_seconds): are workers running and "
            "reachable from here at the address they registered with "
            "(--worker_address)? Start one with: "
            f"{_worker_command(address)}")
    if "error" in out:
        e = out["error"]
        raise DataServiceError(
            f"official_bench: the tf.data service at {address} failed a "
            f"probe: {type(e).__name__}: {str(e).splitlines()[0]}") from e
    _PROBED.add(address)
    return waited


def service_dataset(ds: DatasetConfig, ctx: tf.distribute.InputContext,
                    batch_size: int, is_training: bool,
                    seed: int = 0) -> tf.data.Dataset:
    """The `service` builder (see data.factory.BUILDERS)."""
    key = "train_dataset" if is_training else "validation_dataset"
    logging.warning(SECURITY_WARNING)
    missing = dispatcher_wait.wait_for_dispatcher(
        ds.data_service_address, ds.data_service_timeout_seconds,
        f"{key}.data_service_address; {key}.data_service_timeout_seconds",
        also=f", and workers with: {_worker_command(ds.data_service_address)}")
    if missing:
        raise DataServiceError(f"official_bench: {missing}")
    if tf.executing_eagerly():  # not inside a parameter-server tf.function
        waited = wait_for_a_worker(ds.data_service_address,
                                   ds.data_service_timeout_seconds, key)
        logging.info("%s: a tf.data service worker answered through %s "
                     "after %.1f s", key, ds.data_service_address, waited)
    dataset = records_dataset(ds, ctx, batch_size, is_training, seed)
    logging.info("%s: the records pipeline runs on the tf.data service at "
                 "%s (input pipeline %d)", key, ds.data_service_address,
                 ctx.input_pipeline_id)
    return dataset.apply(_distribute(ds.data_service_address))
