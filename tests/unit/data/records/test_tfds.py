"""Section 3: builder: tfds reads a prepared TFDS directory, never
downloads."""

import os
import sys

import numpy as np
import pytest

from official_bench.config import ConfigError, DatasetConfig
from official_bench.data.records import tfds as tfds_builder
from official_bench.runtime.keras_setup import tf

CTX = tf.distribute.InputContext()


def cfg(data_dir, name, **kw):
    base = dict(name=name, data_dir=str(data_dir), builder="tfds",
                split="train", image_size=8, num_classes=3, batch_size=4,
                one_hot=False, shuffle_buffer_size=1)
    base.update(kw)
    return DatasetConfig(**base)


def test_missing_package_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
    with pytest.raises(ConfigError,
                       match=r"pip install 'official_bench\[tfds\]'"):
        tfds_builder.tfds_dataset(cfg(tmp_path, "imagenet2012"), CTX, 4, True)


def test_prepare_hint_names_the_manual_dir_for_imagenet():
    hint = tfds_builder.prepare_hint("imagenet2012", "/data/tfds")
    assert hint.startswith("tfds build imagenet2012 --data_dir=/data/tfds")
    assert "--manual_dir=" in hint
    assert tfds_builder.prepare_hint("mnist", "/d") == \
        "tfds build mnist --data_dir=/d"


# The rest needs tensorflow-datasets (the `tfds` extra).


@pytest.fixture(scope="module")
def tfds():
    return pytest.importorskip(
        "tensorflow_datasets",
        reason="tensorflow-datasets (the tfds extra) is not installed")


@pytest.fixture(scope="module")
def prepared(tfds, tmp_path_factory):
    """A tiny image-classification dataset generated (offline) by TFDS."""
    root = tmp_path_factory.mktemp("tfds")

    class ObTinyImages(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(
                builder=self,
                features=tfds.features.FeaturesDict({
                    "image": tfds.features.Image(shape=(None, None, 3)),
                    "label": tfds.features.ClassLabel(num_classes=3)}),
                supervised_keys=("image", "label"))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples(12),
                    "validation": self._generate_examples(6)}

        def _generate_examples(self, n):
            for i in range(n):
                yield i, {"image": np.full((10, 12, 3), 40 * (i % 3),
                                           np.uint8),
                          "label": i % 3}

    ObTinyImages(data_dir=str(root)).download_and_prepare()
    return root


def test_reads_a_prepared_dataset_with_its_labels(prepared):
    ds = cfg(prepared, "ob_tiny_images", split="validation", batch_size=3)
    data = tfds_builder.tfds_dataset(ds, CTX, 3, False)
    images, labels = [], []
    for x, y in data.as_numpy_iterator():
        images.append(x)
        labels.extend(y.tolist())
    assert sorted(labels) == [0, 0, 1, 1, 2, 2]  # 0-based, unchanged
    pixels = np.concatenate(images)
    assert pixels.shape == (6, 8, 8, 3)
    # The image of class c is 40*c grey (PNG inside: the generic decode).
    for x, y in zip(pixels, labels):
        assert abs(float(x.mean()) - 40 * y) < 2


def test_training_from_the_version_directory_itself(prepared):
    version_dir = prepared / "ob_tiny_images" / "1.0.0"
    data = tfds_builder.tfds_dataset(cfg(version_dir, "ob_tiny_images"),
                                     CTX, 4, True)
    x, y = next(iter(data))
    assert x.shape == (4, 8, 8, 3) and y.shape == (4,)


def test_not_prepared_says_tfds_build(tfds, tmp_path):
    with pytest.raises(ConfigError, match=r"not prepared.*never downloads.*"
                                          r"tfds build imagenet2012 "
                                          r"--data_dir=.*--manual_dir="):
        tfds_builder.tfds_dataset(cfg(tmp_path, "imagenet2012"), CTX, 4, True)
    with pytest.raises(ConfigError, match="does not exist"):
        tfds_builder.tfds_dataset(cfg(tmp_path / "nope", "imagenet2012"),
                                  CTX, 4, True)


def test_wrong_split_or_class_count_is_a_config_error(prepared):
    with pytest.raises(ConfigError, match=r"split 'test' is not in .*"
                                          r"train, validation"):
        tfds_builder.tfds_dataset(cfg(prepared, "ob_tiny_images",
                                      split="test"), CTX, 4, False)
    with pytest.raises(ConfigError, match=r"num_classes is 10 but .* has 3"):
        tfds_builder.tfds_dataset(cfg(prepared, "ob_tiny_images",
                                      num_classes=10), CTX, 4, True)


def test_records_builder_reads_the_same_files_without_tfds(prepared):
    from official_bench.data.records import pipeline, record_files
    version_dir = prepared / "ob_tiny_images" / "1.0.0"
    ds = cfg(version_dir, "ob_tiny_images", builder="records",
             split="validation", batch_size=6)
    files, layout = record_files.find_files(ds, False)
    assert layout.name == "tfds" and all(os.path.exists(f) for f in files)
    _, labels = next(iter(pipeline.records_dataset(ds, CTX, 6, False)))
    assert sorted(labels.numpy().tolist()) == [0, 0, 1, 1, 2, 2]
