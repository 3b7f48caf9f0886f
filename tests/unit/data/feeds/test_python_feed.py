"""builder: python: user sources through tf.data, errors naming the source,
the reference image-folder loader, and the input-wait measure.

The sources are tests/support/python_sources.py's.
"""

import json
import os
import re
import threading
import time

import numpy as np
import pytest

from official_bench.config import ConfigError, DatasetConfig
from official_bench.data.feeds import (
    batch_spec,
    python_batches,
    python_loader,
    python_source,
)
from support import python_sources
from support.helpers import REPO, TINY_OVERRIDE, cli, tiny

TESTS = os.path.join(REPO, "tests")
CLI_ENV = {"PYTHONPATH": os.pathsep.join([REPO, TESTS])}


# -- the spec ---------------------------------------------------------------

SPEC = batch_spec.BatchSpec(2, 4, 3, 10, "float32")


def _good():
    return np.zeros((2, 4, 4, 3), np.float32), np.array([0, 9], np.int64)


def test_check_batch_accepts_and_converts_labels():
    images, labels = batch_spec.check_batch(SPEC, *_good(), "src")
    assert images.shape == (2, 4, 4, 3) and labels.dtype == np.int32


@pytest.mark.parametrize("images,labels,field", [
    (np.zeros((3, 4, 4, 3), np.float32), np.zeros(2, np.int32),
     r"images shape \(3, 4, 4, 3\), expected \(2, 4, 4, 3\)"),
    (np.zeros((2, 4, 4, 3), np.float64), np.zeros(2, np.int32),
     r"images dtype float64, expected float32"),
    (np.zeros((2, 4, 4, 3), np.float32), np.zeros(3, np.int32),
     r"labels shape \(3,\), expected \(2,\)"),
    (np.zeros((2, 4, 4, 3), np.float32), np.zeros(2, np.float32),
     r"labels dtype float32, expected one of int32, int64"),
    (np.zeros((2, 4, 4, 3), np.float32), np.array([0, 10], np.int32),
     r"labels out of range 0..10, expected 0..9"),
    ([[0.0]], np.zeros(2, np.int32), r"images must be a numpy array"),
])
def test_check_batch_names_the_field(images, labels, field):
    with pytest.raises(batch_spec.BadBatch, match=r"^my-source: " + field):
        batch_spec.check_batch(SPEC, images, labels, "my-source")


# -- the dataset ------------------------------------------------------------

def _ds(source, **kw):
    values = dict(builder="python", python_source=source, image_size=8,
                  num_classes=10, batch_size=2, one_hot=False)
    values.update(kw)
    return DatasetConfig(**values)


def _dataset(ds, pipeline_id=1, training=True):
    from official_bench.runtime.keras_setup import tf
    ctx = tf.distribute.InputContext(num_input_pipelines=2,
                                     input_pipeline_id=pipeline_id)
    return python_source.python_dataset(ds, ctx, 2, training, 0)


def test_source_gets_its_context_and_batches_are_one_hot():
    data = _dataset(_ds("support.python_sources:context_source", one_hot=True))
    images, labels = next(iter(data))
    assert images.shape == (2, 8, 8, 3) and images.dtype.name == "float32"
    # pipeline 1 + 2 * is_training = class 3, one-hot over 10 classes.
    assert labels.numpy().argmax(axis=1).tolist() == [3, 3]
    assert labels.shape == (2, 10)


def test_transfer_uint8_and_bfloat16_sources():
    data = _dataset(_ds(
        "official_bench.data.feeds.python_loader:synthetic_source",
        transfer_uint8=True))
    assert next(iter(data))[0].dtype.name == "uint8"
    data = _dataset(_ds(
        "official_bench.data.feeds.python_loader:synthetic_source",
        dtype="bfloat16"))
    assert next(iter(data))[0].dtype.name == "bfloat16"


@pytest.mark.parametrize("spec,message", [
    ("no_such_module_xyz:f", r"cannot import module 'no_such_module_xyz'"),
    ("support.python_sources:missing",
     r"module 'support.python_sources' has no callable 'missing'"),
    ("support.python_sources:NOT_CALLABLE",
     r"module 'support.python_sources' has no callable 'NOT_CALLABLE'"),
])
def test_bad_spec_is_a_config_error(spec, message):
    with pytest.raises(ConfigError, match=r"train_dataset.python_source '"
                       + re.escape(spec) + "': " + message):
        _dataset(_ds(spec))


def test_config_requires_a_source_for_builder_python():
    from official_bench.config import build_config
    with pytest.raises(ConfigError, match=r"train_dataset.python_source.*"
                                          r"builder python needs"):
        build_config([("t", {"train_dataset": {"builder": "python"}})])
    with pytest.raises(ConfigError, match=r"must be 'module:function', got "
                                          r"'nocolon'"):
        build_config([("t", {"train_dataset": {"builder": "python",
                                               "python_source": "nocolon"}})])


@pytest.mark.parametrize("source,message", [
    ("failing_source", r"batch 1 raised OSError: disk on fire"),
    ("float64_source", r"batch 0: images dtype float64, expected float32"),
])
def test_bad_batches_name_the_source_and_field(source, message):
    data = _dataset(_ds(f"support.python_sources:{source}"))
    with pytest.raises(Exception, match=r"official_bench: python_source "
                       rf"support.python_sources:{source}: {message}"):
        for _ in data.take(3):
            pass


def _spec_for(ds):
    return python_batches.batch_spec(ds, 2)


def _ctx(ds):
    return python_batches.SourceContext(2, 8, 3, 10, "float32", True, 0, 0,
                                        1, ds)


@pytest.mark.parametrize("source,message", [
    ("hanging_source", r"made no first batch within 0.5 s of being called "
                       r"\(validation_dataset.python_timeout_seconds\)"),
    ("stalling_source", r"made no batch 1 within 0.5 s "
                        r"\(validation_dataset.python_timeout_seconds\)"),
])
def test_a_source_that_stops_making_batches_times_out(source, message):
    ds = _ds(f"support.python_sources:{source}")
    before = _source_threads()
    fn = python_batches.load_source(ds.python_source)
    batches = python_batches.checked_batches(fn, ds.python_source, _ctx(ds),
                                             _spec_for(ds), 0.5,
                                             "validation_dataset")
    start = time.monotonic()
    try:
        with pytest.raises(python_batches.SourceError,
                           match=rf"^official_bench: python_source "
                                 rf"support.python_sources:{source}: "
                                 rf"{message}"):
            for _ in range(3):
                next(batches)
        assert time.monotonic() - start < 5
    finally:
        batches.close()
        # the source's thread then sees the stop and ends
        python_sources.RELEASE.set()
        _wait_for_source_threads(before)
        python_sources.RELEASE.clear()


def _source_threads():
    return {t for t in threading.enumerate() if t.name == "python_source"}


def _wait_for_source_threads(allowed, timeout=5):
    """Until no source thread is left but those in `allowed` (threads of
    earlier tests may end meanwhile)."""
    deadline = time.monotonic() + timeout
    while not _source_threads() <= allowed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _source_threads() <= allowed


def test_calling_the_source_fails_named_and_closing_stops_its_thread():
    ds = _ds("support.python_sources:call_failing_source")
    batches = python_batches.checked_batches(
        python_batches.load_source(ds.python_source), ds.python_source,
        _ctx(ds), _spec_for(ds))
    with pytest.raises(python_batches.SourceError,
                       match=r"call_failing_source: calling it failed: "
                             r"KeyError: 'no such split'"):
        next(batches)
    ds = _ds("official_bench.data.feeds.python_loader:synthetic_source")
    batches = python_batches.checked_batches(
        python_batches.load_source(ds.python_source), ds.python_source,
        _ctx(ds), _spec_for(ds))
    before = _source_threads()
    next(batches)
    assert len(_source_threads() - before) == 1
    batches.close()  # what tf.data does when it drops the generator
    _wait_for_source_threads(before)


def test_config_checks_the_python_timeout():
    from official_bench.config import build_config
    with pytest.raises(ConfigError, match=r"train_dataset.python_timeout_"
                                          r"seconds: must be > 0"):
        build_config([("t", {"train_dataset": {
            "python_timeout_seconds": 0}})])


# -- the reference folder loader ------------------------------------------

def _image_folder(root, classes=3, per_class=4, size=(10, 12)):
    from PIL import Image
    for c in range(classes):
        folder = root / "train" / f"class_{c}"
        folder.mkdir(parents=True)
        for i in range(per_class):
            pixels = np.full(size + (3,), 40 * c + i, np.uint8)
            Image.fromarray(pixels).save(folder / f"{i}.jpg", quality=100)
    return str(root)


def test_folder_source_decodes_in_worker_processes(tmp_path):
    root = _image_folder(tmp_path)
    batches = python_loader.folder_batches(
        root, "train", 4, 8, 3, "float32", False, 0, workers=2)
    seen = list(batches)
    assert len(seen) == 3  # 12 images, batches of 4, one pass (evaluation)
    labels = np.concatenate([b[1] for b in seen])
    assert sorted(labels.tolist()) == [0] * 4 + [1] * 4 + [2] * 4
    images = np.concatenate([b[0] for b in seen])
    assert images.shape == (12, 8, 8, 3) and images.dtype == np.float32
    # Pixels of class c image i were 40c+i, scaled to [0, 1] (JPEG +-2).
    first = images[labels == 2][0]
    assert abs(first.mean() * 255 - 80) < 4


def test_folder_shards_split_the_files(tmp_path):
    root = _image_folder(tmp_path, classes=2, per_class=4)
    a = python_loader.folder_batches(root, "train", 2, 4, 3, "uint8", False,
                                     0, shard=0, num_shards=2, workers=0)
    b = python_loader.folder_batches(root, "train", 2, 4, 3, "uint8", False,
                                     0, shard=1, num_shards=2, workers=0)
    assert sum(len(x[1]) for x in a) == sum(len(x[1]) for x in b) == 4


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        python_loader.list_folder(str(tmp_path / "nowhere"), "train")


# -- training ---------------------------------------------------------------

def _train(strategy="one_device", **train_dataset):
    from official_bench import trainer
    runtime = {"distribution_strategy": strategy}
    if strategy == "mirrored":
        runtime["cpu_devices"] = 2
    return trainer.run(tiny(runtime=runtime, train_dataset=train_dataset))


@pytest.mark.parametrize("strategy", ["one_device", "mirrored"])
def test_trains_from_the_folder_loader(tmp_path, strategy):
    root = _image_folder(tmp_path, classes=3, per_class=8)
    r = _train(strategy, builder="python", data_dir=root, num_classes=3,
               python_source="official_bench.data.feeds.python_loader:"
                             "folder_source")
    assert r.stats.total_steps == 6
    assert r.stats.num_replicas == (2 if strategy == "mirrored" else 1)
    assert all(np.isfinite(r.history["loss"]))


def test_trains_in_bfloat16_with_images_cast_on_the_device(tmp_path,
                                                          absl_messages):
    """trainer.run in this process as the CLI runs it (its params_override;
    the CLI's own python-source run: system/test_multiworker_inputs);
    what the CLI prints is in the absl records."""
    from official_bench import trainer
    r = trainer.run(None, mode="train", model_dir=str(tmp_path),
                    params_override=",".join((
                        TINY_OVERRIDE, "train_dataset.builder=python",
                        "train_dataset.python_source=official_bench.data."
                        "feeds.python_loader:synthetic_source",
                        "runtime.distribution_strategy=one_device",
                        "runtime.mixed_precision_dtype=bfloat16")))
    text = "\n".join(absl_messages)
    assert "TimeHistory:" in text and "input wait" in text, text[-3000:]
    # The source sends float32; the model's layers compute in bfloat16.
    assert r.environment["dtype"] == "bfloat16"
    assert r.model.layers[1].compute_dtype == "bfloat16"
    assert r.stats.total_steps == 6 and np.isfinite(r.history["loss"][-1])


def test_input_bound_warning_for_a_slow_source_only(tmp_path, caplog):
    import logging
    caplog.set_level(logging.WARNING)
    from official_bench import trainer
    slow = trainer.run(tiny(
        train_dataset={"builder": "python",
                       "python_source": "support.python_sources:slow_source"},
        train={"steps": 10}), model_dir=str(tmp_path / "slow"))
    warned = [r.getMessage() for r in caplog.records
              if "input-bound" in r.getMessage()]
    assert warned and "python -m official_bench.data.input_bench" in warned[0]
    record = json.load(open(slow.result_path))
    assert record["input_wait"]["fraction"] > 0.5
    # ~150 ms per batch from the source, all of it waited for.
    assert record["input_wait"]["mean_wait_ms"] > 75
    caplog.clear()
    # 48x48 images (~0.1 s a step, 2 cores): a few ms of the input thread
    # descheduled on a loaded machine stay far below the 10% bound (at
    # 16x16, 13 ms a step, they once made 17%)
    fast = trainer.run(tiny(train={"steps": 10},
                            train_dataset={"image_size": 48}),
                       model_dir=str(tmp_path / "fast"))
    assert not [r for r in caplog.records if "input-bound" in r.getMessage()]
    assert json.load(open(fast.result_path))["input_wait"]["fraction"] < 0.1


# -- the CLI ----------------------------------------------------------------

def _override(*extra):
    return "--params_override=" + ",".join((TINY_OVERRIDE,) + extra)


@pytest.mark.slow
def test_cli_bad_source_exits_nonzero_naming_it(tmp_path):
    p = cli([_override("train_dataset.builder=python",
                       "train_dataset.python_source=support.python_sources:"
                       "float64_source"),
             f"--model_dir={tmp_path}", "--mode=train"], env=CLI_ENV)
    assert p.returncode == 1, p.stdout[-3000:]
    assert re.search(r"error: official_bench: python_source "
                     r"support.python_sources:"
                     r"float64_source: batch 0: images dtype float64, "
                     r"expected float32", p.stdout), p.stdout[-3000:]
    p = cli([_override("train_dataset.builder=python",
                       "train_dataset.python_source=nope_mod:f"),
             f"--model_dir={tmp_path}", "--mode=train"], env=CLI_ENV)
    assert p.returncode == 2
    assert "cannot import module 'nope_mod'" in p.stdout
    # said before TensorFlow starts (config/paths.check_python_sources)
    assert "stage: loading TensorFlow" not in p.stdout, p.stdout[-2000:]


@pytest.mark.slow
def test_cli_source_without_a_first_batch_ends_with_the_timeout(tmp_path):
    from official_bench.contracts import exit_status
    start = time.monotonic()
    p = cli([_override("train_dataset.builder=python",
                       "train_dataset.python_source=support.python_sources:"
                       "hanging_source",
                       "train_dataset.python_timeout_seconds=1"),
             f"--model_dir={tmp_path}", "--mode=train"], env=CLI_ENV)
    assert p.returncode == exit_status.FAILED, p.stdout[-3000:]
    last = [l for l in p.stdout.splitlines() if l.strip()][-1]
    assert last == ("error: official_bench: python_source "
                    "support.python_sources:"
                    "hanging_source: made no first batch within 1 s of being "
                    "called (train_dataset.python_timeout_seconds); is it "
                    "blocked (a lock, a dead mount, a worker pool that never "
                    "answers)?"), p.stdout[-3000:]
    assert time.monotonic() - start < 200
