"""`builder: tfds`: a prepared tensorflow-datasets directory, never downloaded.

    train_dataset: {builder: tfds, name: imagenet2012, data_dir: /data/tfds}

`name` is the TFDS name (optionally `name:version`), `data_dir` the TFDS
data directory (default: TFDS's own, ~/tensorflow_datasets), `split` a TFDS
split (`train`, `validation`). Any image-classification dataset with an
image and a class label works (the supervised keys are used, else `image`
and `label`). TFDS only locates the files and checks the class count; the
records are read by the same pipeline as `builder: records` (sharding,
shuffling, augmentation, bad-record handling), so the two builders behave
alike. Nothing is downloaded or prepared at run time: a missing dataset is
an error that says how to prepare it.

tensorflow-datasets is an optional extra: pip install 'official_bench[tfds]'.
"""

from __future__ import annotations

import os
from typing import List, Tuple

from absl import logging

from official_bench.config import ConfigError, DatasetConfig
from official_bench.data.records import pipeline
from official_bench.data.records.record_sets import TFDS, Layout
from official_bench.runtime.keras_setup import tf


def _key(is_training: bool) -> str:
    return "train_dataset" if is_training else "validation_dataset"


def prepare_hint(name: str, data_dir: str) -> str:
    """How to prepare `name` once, offline."""
    base = name.split(":")[0]
    if base.startswith("imagenet2012"):
        return (f"tfds build {base} --data_dir={data_dir} "
                "--manual_dir=<directory with ILSVRC2012_img_train.tar and "
                "ILSVRC2012_img_val.tar>")
    return f"tfds build {base} --data_dir={data_dir}"


def _import_tfds():
    try:
        import tensorflow_datasets as tfds  # noqa: WPS433 (optional extra)
    except ImportError as e:
        raise ConfigError(
            "builder: tfds needs tensorflow-datasets: pip install "
            "'official_bench[tfds]' (or use builder: records with layout: "
            f"tfds to read the prepared files directly) ({e})") from e
    return tfds


def _builder(tfds, ds: DatasetConfig, key: str):
    """A builder for a prepared dataset, or a ConfigError saying what to do."""
    name = ds.name
    if not name:
        raise ConfigError(f"{key}.name must name the TFDS dataset "
                          "(e.g. imagenet2012) for builder: tfds")
    data_dir = ds.data_dir or os.path.expanduser(
        os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets"))
    # A data_dir that is already <root>/<name>/<version> works too.
    if tf.io.gfile.exists(os.path.join(data_dir, "dataset_info.json")):
        return tfds.builder_from_directory(data_dir), data_dir
    if ds.data_dir and not tf.io.gfile.isdir(ds.data_dir):
        raise ConfigError(
            f"{key}.data_dir {ds.data_dir!r} does not exist; prepare "
            f"{name} there first: {prepare_hint(name, ds.data_dir)}")
    try:
        builder = tfds.builder(name, data_dir=data_dir, try_gcs=False)
    except Exception as e:  # DatasetNotFoundError and friends
        raise ConfigError(
            f"{key}.name {name!r}: TFDS has no such dataset and {data_dir!r} "
            f"holds no prepared copy ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''})") from e
    if not builder.is_prepared():
        raise ConfigError(
            f"{key}: TFDS dataset {name!r} is not prepared in {data_dir!r} "
            f"(expected {builder.data_dir}); official_bench never downloads "
            f"at run time. Prepare it once: {prepare_hint(name, data_dir)}")
    return builder, data_dir


def tfds_files(ds: DatasetConfig, is_training: bool
               ) -> Tuple[List[str], Layout, int]:
    """(record files, layout with the dataset's keys, num_classes)."""
    key = _key(is_training)
    tfds = _import_tfds()
    builder, _ = _builder(tfds, ds, key)
    info = builder.info
    splits = info.splits
    if ds.split not in splits:
        raise ConfigError(f"{key}.split {ds.split!r} is not in TFDS dataset "
                          f"{info.name}; it has: {', '.join(sorted(splits))}")
    file_format = str(getattr(info, "file_format", "tfrecord") or "tfrecord")
    if "tfrecord" not in file_format.lower():
        raise ConfigError(
            f"{key}: TFDS dataset {info.name} is stored as {file_format}; "
            "official_bench reads TFRecord files: rebuild it with "
            "--file_format=tfrecord "
            f"({prepare_hint(ds.name, ds.data_dir or '')})")
    image_key, label_key = info.supervised_keys or ("image", "label")
    if not isinstance(image_key, str) or not isinstance(label_key, str):
        raise ConfigError(f"{key}: TFDS dataset {info.name} has supervised "
                          f"keys {info.supervised_keys}; need (image, label)")
    label_feature = info.features[label_key]
    num_classes = getattr(label_feature, "num_classes", None)
    if num_classes is not None and num_classes != ds.num_classes:
        raise ConfigError(f"{key}.num_classes is {ds.num_classes} but TFDS "
                          f"dataset {info.name} has {num_classes} classes")
    data_path = str(builder.data_dir)
    files = [os.path.join(data_path, f)
             for f in splits[ds.split].filenames]
    if not files:
        raise ConfigError(f"{key}: TFDS dataset {info.name} split "
                          f"{ds.split!r} has no files in {data_path}")
    layout = Layout(TFDS, image_key, label_key, 0, False)
    return files, layout, num_classes or ds.num_classes


def tfds_dataset(ds: DatasetConfig, ctx: tf.distribute.InputContext,
                 batch_size: int, is_training: bool,
                 seed: int = 0) -> tf.data.Dataset:
    """The `tfds` builder (see data.factory.BUILDERS)."""
    files, layout, _ = tfds_files(ds, is_training)
    missing = [f for f in files if not tf.io.gfile.exists(f)]
    if missing:
        raise ConfigError(f"{_key(is_training)}: TFDS dataset {ds.name} is "
                          f"incomplete: {missing[0]} does not exist "
                          f"({len(missing)} of {len(files)} files missing)")
    logging.info("%s: TFDS %s split %s, %d file(s) in %s", _key(is_training),
                 ds.name, ds.split, len(files), os.path.dirname(files[0]))
    return pipeline.build_dataset(files, layout, ds, ctx, batch_size,
                                 is_training, seed)
