"""tf.distribute's per-device prefetch without tf.data's autotune thread
(official_bench/runtime/device_prefetch.py): the trainer's distributions
install it; the datasets TensorFlow makes per device go through it."""

import numpy as np

from official_bench.runtime import device_prefetch
from official_bench.runtime.keras_setup import tf


def test_each_device_dataset_is_built_without_autotuning(monkeypatch):
    built = []
    real = device_prefetch.without_autotune

    def spy(dataset):
        out = real(dataset)
        built.append(out.options().autotune.enabled)
        return out

    monkeypatch.setattr(device_prefetch, "without_autotune", spy)
    assert device_prefetch.install()
    assert device_prefetch.install()  # a second call adds no second layer
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    data = strategy.experimental_distribute_dataset(
        tf.data.Dataset.range(8).batch(4))
    got = [[t.numpy().tolist() for t in
            strategy.experimental_local_results(batch)] for batch in data]
    # one per device, each with autotuning off
    assert built == [False, False]
    # and the batches are split as before
    assert got == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]


def test_without_autotune_keeps_the_elements():
    data = device_prefetch.without_autotune(tf.data.Dataset.range(3))
    assert data.options().autotune.enabled is False
    assert np.array_equal(list(data.as_numpy_iterator()), [0, 1, 2])


def test_the_trainer_installs_it_before_building_a_strategy(monkeypatch):
    from tensorflow.python.data.ops import multi_device_iterator_ops as mdi
    bare = getattr(mdi._create_device_dataset, "__wrapped__",
                   mdi._create_device_dataset)
    monkeypatch.setattr(mdi, "_create_device_dataset", bare)

    from official_bench import config as config_lib
    from official_bench.runtime import distribute
    from official_bench.runtime.cluster import Cluster
    cfg = config_lib.build_config([(
        "--params_override", config_lib.parse_params_override(
            "runtime.num_gpus=0,runtime.distribution_strategy=one_device"))])
    distribute.build_distribution(cfg.runtime, Cluster(workers=[]),
                                  ["/cpu:0"])
    assert getattr(mdi._create_device_dataset,
                   "_official_bench_no_autotune", False)
