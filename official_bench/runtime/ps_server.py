"""The worker and ps tasks of a parameter-server cluster.

Under ParameterServerStrategy only the chief runs Python training code; the
workers execute steps the chief's ClusterCoordinator sends them and the ps
tasks hold variables. Both just run a TensorFlow server. Ours also watches
the chief: it must appear within runtime.peer_timeout_seconds, and when its
port stops answering the server ends, so no task is left running forever.
"""

from __future__ import annotations

import os
import time

from absl import logging

from official_bench.config import RuntimeConfig
from official_bench.contracts.throughput import timeout_message
from official_bench.runtime.cluster import (
    Cluster,
    ClusterError,
    PeerLost,
    can_connect,
)
from official_bench.runtime.keras_setup import tf

# The chief tells each task that the run finished by writing this file in
# the task's own process (an op placed on the task's CPU); a task whose
# chief disappears without it exits non-zero. /tmp, not $TMPDIR: the path is
# computed on the chief for another machine.
_MARKER_DIR = "/tmp"


def done_marker(job: str, index: int, address: str) -> str:
    """Where `job index` (serving at address) finds the chief's 'finished'."""
    port = address.rpartition(":")[2]
    return os.path.join(_MARKER_DIR,
                        f"official_bench-finished-{job}{index}-{port}")


def is_serving_task(cluster: Cluster) -> bool:
    """A worker or ps task of a cluster that has ps tasks: it serves the
    chief's coordinator instead of training (a cluster without ps tasks
    is not a parameter-server cluster; building the strategy says so)."""
    return cluster.task_type in ("worker", "ps") and \
        bool(cluster.jobs().get("ps"))


def report_finished(cluster: Cluster) -> None:
    """Chief, after a finished run: mark it on every worker and ps task."""
    for job in ("worker", "ps"):
        for i, address in enumerate(cluster.jobs().get(job, [])):
            with tf.device(f"/job:{job}/replica:0/task:{i}/device:CPU:0"):
                tf.io.write_file(done_marker(job, i, address), "finished")


def serve(rt: RuntimeConfig, cluster: Cluster,
          poll_seconds: float = 2.0, misses_to_stop: int = 3) -> None:
    """Runs this task's server until the chief has come and gone."""
    chief = cluster.jobs().get("chief", [None])[0]
    if chief is None:
        raise ClusterError("a parameter_server cluster needs a chief task "
                           "(runtime.chief_host or TF_CONFIG 'chief')")
    server = tf.distribute.Server(
        tf.train.ClusterSpec(cluster.jobs()), job_name=cluster.task_type,
        task_index=cluster.task_index, protocol="grpc", start=True)
    marker = done_marker(cluster.task_type, cluster.task_index,
                         cluster.address)
    if os.path.exists(marker):
        os.remove(marker)  # from an earlier run on this port
    logging.info("official_bench: %s serving at %s for chief %s",
                 cluster.describe(), cluster.address, chief)
    deadline = time.monotonic() + rt.peer_timeout_seconds
    while not can_connect(chief):
        if time.monotonic() >= deadline:
            raise ClusterError(timeout_message(
                cluster.describe(), rt.peer_timeout_seconds,
                [f"chief at {chief}"]))
        time.sleep(poll_seconds / 4)
    misses = 0
    while misses < misses_to_stop:
        time.sleep(poll_seconds)
        misses = 0 if can_connect(chief) else misses + 1
    del server
    if os.path.exists(marker):
        os.remove(marker)
        logging.info("official_bench: chief %s finished the run and is gone; "
                     "%s stops", chief, cluster.describe())
        return
    lost = [f"{n} at {a}" for n, a in cluster.peers().items()
            if n != "chief 0" and not can_connect(a)]
    raise PeerLost(
        f"official_bench: chief 0 at {chief} went away before it reported a "
        f"finished run{'; also gone: ' + ', '.join(lost) if lost else ''}; "
        f"{cluster.describe()} stops (see the chief's log)")
