"""The device end of the input: prefetch to the device for the strategies
that do not stage batches (data/device_stage.py), and transfer_uint8's cast
and normalisation inside the model (models/device_normalize.py)."""


import numpy as np
import pytest

from official_bench.config import ConfigError, DatasetConfig, load_config
from official_bench.data import device_stage
from official_bench.data.records import pipeline
from official_bench.runtime.keras_setup import tf
from support.helpers import tiny
from support.records import write_records

CTX = tf.distribute.InputContext()


# -- prefetch to the device ---------------------------------------------------

@pytest.mark.parametrize("kind,devices,want", [
    ("off", ["/gpu:0"], "/gpu:0"),
    ("horovod", ["/job:localhost/replica:0/task:0/device:GPU:0"],
     "/job:localhost/replica:0/task:0/device:GPU:0"),
    ("off", ["/cpu:0"], "/cpu:0"),
    ("off", [], None),  # no device read back: nothing to stage onto
    ("one_device", ["/gpu:0"], None),  # its MultiDeviceIterator stages
    ("mirrored", ["/gpu:0", "/gpu:1"], None),
    ("multi_worker_mirrored", ["/gpu:0"], None),
    ("parameter_server", ["/gpu:0"], None),
])
def test_stage_only_where_the_strategy_does_not(kind, devices, want):
    from official_bench.config.strategies import traits
    from official_bench.runtime.distribute import Distribution
    from official_bench.runtime.placement import Placement
    dist = Distribution(traits(kind), None, 1, True, True,
                        placement=Placement(devices))
    assert dist.stage_device == want


def _final_stages(dataset):
    """Class names from the last transformation backwards (two deep)."""
    inner = getattr(dataset, "_input_dataset", None)
    return type(dataset).__name__, type(inner).__name__


def _run_dataset(strategy):
    """The training dataset the trainer would give fit, for a strategy."""
    from official_bench.config import RuntimeConfig
    from official_bench.data.fit_input import fit_input
    from official_bench.runtime import distribute
    from official_bench.runtime.cluster import resolve_cluster
    rt = RuntimeConfig(distribution_strategy=strategy, num_gpus=0,
                       cpu_devices=2 if strategy == "mirrored" else 1)
    devices = ["/cpu:0", "/cpu:1"][:rt.cpu_devices]
    dist = distribute.build_distribution(rt, resolve_cluster(rt), devices)
    ds = DatasetConfig(image_size=4, num_classes=3, batch_size=2)
    return fit_input(dist, ds, 2 * dist.num_replicas, True, 0).data


def test_off_ends_in_a_device_prefetch_that_yields_the_same_batches():
    data = _run_dataset("off")
    assert _final_stages(data) == ("_PrefetchDataset", "_CopyToDeviceDataset")
    images, labels = next(iter(data))
    assert images.shape == (2, 4, 4, 3) and labels.shape == (2, 3)
    assert images.device.endswith("CPU:0")


def test_off_trains_and_evaluates_through_the_staged_pipeline():
    """fit and evaluate (Keras asks the plain dataset its cardinality each
    epoch) through the device prefetch, epochs re-iterating it."""
    from official_bench import trainer
    r = trainer.run(tiny(runtime={"distribution_strategy": "off"},
                         train={"epochs": 2, "steps": 3},
                         evaluation={"skip_eval": False}))
    assert r.stats.total_steps == 6 and len(r.history["loss"]) == 2
    assert all(np.isfinite(r.history["loss"]))
    assert r.evaluation and all(np.isfinite(list(r.evaluation.values())))


def test_unusable_stage_falls_back_to_the_host_with_a_warning(
        monkeypatch, absl_messages):
    def broken_stage(device, buffer_size):
        """A staged dataset whose cardinality fails, as a GPU-resident
        handle could."""
        def apply(dataset):
            staged = dataset.map(lambda x: x)

            def fail():
                raise tf.errors.InternalError(
                    None, None, "No unary variant device copy function found")
            staged.cardinality = fail
            return staged
        return apply

    monkeypatch.setattr(tf.data.experimental, "prefetch_to_device",
                        broken_stage)
    plain = tf.data.Dataset.range(3)
    assert device_stage.prefetch_to(plain, "/gpu:0") is plain
    assert any("prefetch to /gpu:0 is not usable here" in m and
               "No unary variant" in m for m in absl_messages)


@pytest.mark.parametrize("strategy", ["one_device", "mirrored"])
def test_staging_strategies_get_no_extra_stage(strategy):
    data = _run_dataset(strategy)
    # The strategy's own iterator stages the batches onto the devices.
    iterator = iter(data)
    inner = iterator._iterators[0]._iterator  # noqa: SLF001
    assert "MultiDeviceIterator" in type(inner).__name__


# -- transfer_uint8 ---------------------------------------------------------





def _batch(root, **kw):
    ds = DatasetConfig(data_dir=root, split="train", image_size=8,
                       num_classes=3, batch_size=4, one_hot=False,
                       deterministic=True, shuffle_buffer_size=1,
                       file_shuffle_buffer_size=1, **kw)
    images, _ = next(iter(pipeline.records_dataset(ds, CTX, 4, True, 5)))
    return ds, images


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_uint8_model_input_equals_the_host_normalised_images(tmp_path, dtype):
    from official_bench.models.device_normalize import model_input
    root = write_records(tmp_path)
    norm = dict(mean_subtract=True, standardize=True, dtype=dtype)
    _, host = _batch(root, **norm)
    ds, sent = _batch(root, transfer_uint8=True, **norm)
    assert sent.dtype == tf.uint8 and host.dtype.name == dtype
    input_dtype, layer = model_input(ds)
    assert input_dtype == "uint8"
    on_device = layer(sent)
    assert on_device.dtype.name == dtype
    # Only the rounding of resized pixels to integers differs: 0.5 / std.
    atol = 0.5 / 57.0 + (0.02 if dtype == "bfloat16" else 1e-5)
    np.testing.assert_allclose(tf.cast(on_device, tf.float32).numpy(),
                               tf.cast(host, tf.float32).numpy(), atol=atol)
    # And it is normalised, not raw pixels: the mean is near zero.
    assert abs(float(tf.reduce_mean(tf.cast(on_device, tf.float32)))) < 1.5


def test_model_built_for_uint8_normalises_in_its_first_layer():
    from official_bench.models import build_model
    from official_bench.models.device_normalize import model_input
    from official_bench.runtime.keras_setup import keras
    cfg = load_config(params_override=tiny(train_dataset={
        "transfer_uint8": True, "mean_subtract": True, "standardize": True}))
    input_dtype, input_layer = model_input(cfg.train_dataset)
    model = build_model(cfg, keras=keras, input_dtype=input_dtype,
                        input_layer=input_layer)
    assert model.input.dtype == tf.uint8
    first = model.get_layer("device_normalize")
    pixels = tf.constant(np.full((1, 16, 16, 3), 124, np.uint8))
    out = first(pixels).numpy()
    np.testing.assert_allclose(out[0, 0, 0], [(124 - 123.675) / 58.395,
                                              (124 - 116.28) / 57.12,
                                              (124 - 103.53) / 57.375],
                               atol=1e-5)
    assert not first.weights


def test_trains_from_uint8_synthetic_and_device_batches():
    from official_bench import trainer
    for location in ("host", "device"):
        r = trainer.run(tiny(train_dataset={
            "transfer_uint8": True, "mean_subtract": True,
            "standardize": True, "synthetic_location": location}))
        assert all(np.isfinite(r.history["loss"])), location
        assert r.model.input.dtype == tf.uint8


@pytest.mark.parametrize("override,message", [
    ("train_dataset.transfer_uint8=true,mode=train_and_eval,"
     "evaluation.skip_eval=false",
     r"validation_dataset.transfer_uint8: is False but "
     r"train_dataset.transfer_uint8 is True"),
    ("train_dataset.transfer_uint8=true,"
     "model.model_params.rescale_inputs=true",
     r"model.model_params.rescale_inputs: expects \[0, 1\] inputs"),
])
def test_config_rejects_mismatched_uint8(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(params_override=override)
