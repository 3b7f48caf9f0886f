"""synthetic_location: device (data/resident_batch.py): each replica's batch
is made once on its own device and no step copies an image batch."""

import numpy as np
import pytest

from official_bench.config import ConfigError, load_config
from official_bench.runtime.keras_setup import tf
from support.helpers import tiny

GET_NEXT_OPS = ("IteratorGetNext", "IteratorGetNextSync",
                "IteratorGetNextAsOptional", "OptionalGetValue",
                "MultiDeviceIteratorGetNextFromShard")


def _train(strategy="one_device", location="device", **sections):
    from official_bench import trainer
    runtime = dict({"distribution_strategy": strategy},
                   **sections.pop("runtime", {}))
    if strategy == "mirrored":
        runtime["cpu_devices"] = 2
    train_dataset = dict({"synthetic_location": location},
                         **sections.pop("train_dataset", {}))
    return trainer.run(tiny(runtime=runtime, train_dataset=train_dataset,
                            **sections))


def _graph_defs(function):
    """The traced train function's graph and every function it calls."""
    concrete = function._list_all_concrete_functions()  # noqa: SLF001
    assert concrete, "the train function was never traced"
    for c in concrete:
        graph_def = c.graph.as_graph_def()
        yield list(graph_def.node)
        for f in graph_def.library.function:
            yield list(f.node_def)


def _fed_shapes(model):
    """Ranks of everything the train step pulls from an iterator."""
    ranks = []
    for nodes in _graph_defs(model.train_function):
        for node in nodes:
            if node.op in GET_NEXT_OPS and "output_shapes" in node.attr:
                ranks += [len(s.dim) for s in
                          node.attr["output_shapes"].list.shape]
    return ranks


@pytest.mark.parametrize("strategy", ["one_device", "mirrored"])
def test_device_run_pulls_only_a_scalar_token_per_step(strategy):
    r = _train(strategy)
    assert r.stats.total_steps == 6 and all(np.isfinite(r.history["loss"]))
    ranks = _fed_shapes(r.model)
    assert ranks and all(rank == 0 for rank in ranks), ranks


def test_host_run_pulls_image_batches_per_step():
    """The contrast that makes the test above mean something."""
    r = _train("one_device", location="host")
    assert 4 in _fed_shapes(r.model)


def test_resident_batch_lives_on_each_replica_device_and_differs():
    from official_bench.config import DatasetConfig
    from official_bench.data.resident_batch import ResidentBatch
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    ds = DatasetConfig(image_size=8, num_classes=5, batch_size=3)
    batch = ResidentBatch(strategy, ds, 3, seed=7)
    parts = batch.components()
    assert [p[0].device.split("/")[-1] for p in parts] == [
        "device:CPU:0", "device:CPU:1"]
    assert [p[1].device for p in parts] == [p[0].device for p in parts]
    images = [p[0].numpy() for p in parts]
    assert images[0].shape == (3, 8, 8, 3) and images[0].dtype == np.float32
    assert not np.array_equal(images[0], images[1])  # replicas differ
    assert np.abs(images[0]).sum() > 0  # filled, not the zeros it began as

    seen = []

    @tf.function
    def read():
        def replica_fn():
            return batch.images.value()
        return strategy.run(replica_fn)
    for local in strategy.experimental_local_results(read()):
        seen.append(local.numpy())
    # Each replica reads its own component, on its own device.
    assert np.array_equal(seen[0], images[0])
    assert np.array_equal(seen[1], images[1])


def test_bfloat16_and_uint8_resident_batches():
    from official_bench.config import DatasetConfig
    from official_bench.data.resident_batch import ResidentBatch
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    bf16 = ResidentBatch(strategy, DatasetConfig(
        image_size=4, dtype="bfloat16", num_classes=3), 2)
    assert bf16.images.dtype == tf.bfloat16
    u8 = ResidentBatch(strategy, DatasetConfig(image_size=4, num_classes=3,
                                               transfer_uint8=True), 2)
    values = u8.images.numpy()
    assert u8.images.dtype == tf.uint8 and values.max() > 128


def test_trains_in_bfloat16_on_the_device():
    r = _train("one_device", runtime={"mixed_precision_dtype": "bfloat16"})
    assert r.environment["dtype"] == "bfloat16"
    assert all(np.isfinite(r.history["loss"]))


def test_weights_and_checkpoints_do_not_hold_the_batch():
    r = _train("one_device")
    names = [w.name for w in r.model.weights]
    assert not any("resident" in n for n in names), names


@pytest.mark.parametrize("override,message", [
    ("train_dataset.builder=records,train_dataset.data_dir=/x,"
     "train_dataset.synthetic_location=device",
     r"train_dataset.synthetic_location: device applies to builder "
     r"synthetic, the builder is 'records'"),
    ("validation_dataset.synthetic_location=device",
     r"validation_dataset.synthetic_location: device applies to "
     r"train_dataset only"),
    ("train_dataset.synthetic_location=gpu",
     r"train_dataset.synthetic_location.*'gpu'.*host, device"),
    ("runtime.distribution_strategy=parameter_server,"
     "train_dataset.synthetic_location=device",
     r"device is not supported with parameter_server"),
])
def test_config_rejects_what_device_cannot_do(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(params_override=override)
