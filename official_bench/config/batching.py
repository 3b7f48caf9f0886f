"""What a dataset's batch_size means for a number of replicas.

Model Garden r2.3's semantics: `use_per_replica_batch_size: true` makes
batch_size per replica (the global batch is batch_size x replicas), false
makes it the global batch, which the replicas must divide. The batch plan,
the input benchmark and the all-reduce benchmark ask here.
"""

from __future__ import annotations

from official_bench.config.errors import ConfigError
from official_bench.config.schema import DatasetConfig


def global_batch_size(ds: DatasetConfig, num_replicas: int) -> int:
    """The global batch of `ds` over `num_replicas` replicas."""
    if ds.use_per_replica_batch_size:
        return ds.batch_size * num_replicas
    if ds.batch_size % num_replicas:
        raise ConfigError(
            f"global batch {ds.batch_size} is not divisible by {num_replicas} "
            f"replicas ({ds.split} batch_size with "
            "use_per_replica_batch_size: false)")
    return ds.batch_size
