"""The worker and ps tasks of a parameter-server cluster.

Under ParameterServerStrategy only the chief runs Python training code; the
workers execute steps the chief's ClusterCoordinator sends them and the ps
tasks hold variables. Both just run a TensorFlow server. Ours also watches
the chief: it must appear within runtime.peer_timeout_seconds, and when its
port stops answering the server ends, so no task is left running forever.
"""

from __future__ import annotations

import time

from absl import logging

from official_bench.config import RuntimeConfig
from official_bench.runtime.cluster import Cluster, ClusterError, can_connect
from official_bench.runtime.keras_setup import tf


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
    logging.info("official_bench: %s serving at %s for chief %s",
                 cluster.describe(), cluster.address, chief)
    deadline = time.monotonic() + rt.peer_timeout_seconds
    while not can_connect(chief):
        if time.monotonic() >= deadline:
            raise ClusterError(
                f"official_bench: timeout: {cluster.describe()} waited "
                f"{rt.peer_timeout_seconds:.0f} s "
                f"(runtime.peer_timeout_seconds); not reachable: chief at "
                f"{chief}")
        time.sleep(poll_seconds / 4)
    misses = 0
    while misses < misses_to_stop:
        time.sleep(poll_seconds)
        misses = 0 if can_connect(chief) else misses + 1
    logging.info("official_bench: chief %s is gone; %s stops", chief,
                 cluster.describe())
    del server
