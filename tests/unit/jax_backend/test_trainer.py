"""jax_backend/trainer.py called as a library (a notebook's
`official_bench.run`), in one child Python with Keras 3 on JAX that makes
every run below in turn, as a notebook's cells would (one child, not one
per test: each costs 2-3 CPU-s to start): a run that fails after its
input workers started leaves no worker process and no shared memory
behind (the CLI's exit cleans up; a notebook's kernel lives on); a peer
lost while the model is built is the lost peer's line, not JAX's
traceback. And, without a run, the input wait's warm-up skip."""

import io
import json
import multiprocessing
import os
import tempfile
import traceback
from types import SimpleNamespace

import numpy as np
import pytest

from support.helpers import keras3_child


def _records(folder, split, shards=2, per_shard=4):
    """Classic shards of 12x12 JPEGs, labels 1..3."""
    from PIL import Image

    from official_bench.data.build.example_proto import classic_example
    from official_bench.data.records.framing import frame
    for s in range(shards):
        with open(os.path.join(folder, f"{split}-{s:05d}-of-{shards:05d}"),
                  "wb") as f:
            for i in range(per_shard):
                buf = io.BytesIO()
                Image.fromarray(np.full((12, 12, 3), 9 * i, np.uint8)).save(
                    buf, "JPEG")
                f.write(frame(classic_example(buf.getvalue(), 1 + i % 3,
                                              12, 12)))


def _shared_memory():
    """This process's input workers' shared memory (other tests' pools,
    beside it on the machine, are not its)."""
    from official_bench.data.feeds import shm_workers
    ours = f"{shm_workers.SHM_PREFIX}{os.getpid()}_"
    return {n for n in os.listdir("/dev/shm") if n.startswith(ours)}


def _records_run(data, train_workers, val_examples):
    """run() of train_and_eval on the records in `data` (8 train, batch 4,
    2 steps): what it raised, as a notebook cell would show it, or None."""
    import official_bench
    dataset = {"builder": "records", "data_dir": data, "image_size": 8,
               "num_classes": 3, "batch_size": 4}
    cfg = official_bench.load_config(None, json.dumps({
        "mode": "train_and_eval", "model_dir": os.path.join(data, "run"),
        "runtime": {"backend": "jax", "num_gpus": 0,
                    "distribution_strategy": "one_device"},
        "model": {"name": "resnet_cifar", "model_params": {"depth": 8}},
        "train_dataset": dict(dataset, num_examples=8,
                              num_workers=train_workers),
        "validation_dataset": dict(dataset, num_examples=val_examples,
                                   num_workers=1),
        "train": {"steps": 2, "epochs": 1},
        "evaluation": {"skip_eval": False}}))
    try:
        official_bench.run(cfg)
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    return None


def failed_run_report():
    """train_and_eval on records with train files and no validation files:
    the validation feed's error comes after the train feed's input workers
    started. What was left once run() raised."""
    data = tempfile.mkdtemp()
    _records(data, "train")
    before = _shared_memory()
    error = _records_run(data, train_workers=2, val_examples=4)
    return {
        "error": error,
        "workers_alive": [p.pid for p in multiprocessing.active_children()],
        "shared_memory_left": sorted(_shared_memory() - before)}


def short_eval_report():
    """train_and_eval on records whose 4 validation records give one batch
    of 4 where the evaluation takes 3 (num_examples 12): what run() raised
    and whether a step ran (the feed used to say so at the first
    evaluation, after training)."""
    from official_bench.jax_backend import trainer
    data = tempfile.mkdtemp()
    _records(data, "train")
    _records(data, "validation", shards=1)
    steps = []
    real_epoch = trainer._epoch
    trainer._epoch = lambda *a: steps.append(1) or real_epoch(*a)
    try:
        error = _records_run(data, train_workers=1, val_examples=12)
    finally:
        trainer._epoch = real_epoch
    return {"error": error, "epochs_run": len(steps)}


def no_train_records_report():
    """train on a data_dir that holds validation records but no train
    records: what run() raised and whether the model was built (the feed
    used to find that out after the build, minutes on a GPU)."""
    from official_bench.jax_backend import trainer
    data = tempfile.mkdtemp()
    _records(data, "validation", shards=1)
    built, real_build = [], trainer.build_model
    trainer.build_model = lambda *a, **k: built.append(1)
    try:
        error = _records_run(data, train_workers=1, val_examples=4)
    finally:
        trainer.build_model = real_build
    return {"error": error, "data": data, "built": len(built)}


def no_decoder_report():
    """train_and_eval on records with simplejpeg not importable: what
    run() raised, whether the model was built and what model_dir holds
    (a missing decoder was each record's 'cannot be decoded as an
    image', found by the input workers after the build)."""
    import sys

    from official_bench.jax_backend import trainer
    data = tempfile.mkdtemp()
    _records(data, "train")
    _records(data, "validation", shards=1)
    missing = object()
    real_module = sys.modules.get("simplejpeg", missing)
    sys.modules["simplejpeg"] = None  # import raises
    built, real_build = [], trainer.build_model
    trainer.build_model = lambda *a, **k: built.append(1)
    try:
        error = _records_run(data, train_workers=1, val_examples=4)
    finally:
        trainer.build_model = real_build
        if real_module is missing:
            del sys.modules["simplejpeg"]
        else:
            sys.modules["simplejpeg"] = real_module
    run_dir = os.path.join(data, "run")
    return {"error": error, "built": len(built), "written": sorted(
        os.listdir(run_dir)) if os.path.isdir(run_dir) else []}


def lost_peer_while_building_report():
    """Worker 0 of two (as jax.distributed leaves it; the second process
    is not started) whose model building fails in a collective, as it did
    when worker 1 was killed during its own build (test_peers.GLOO_INIT).
    What run() raised."""
    import jax

    import official_bench
    from official_bench.jax_backend import devices, trainer
    from official_bench.runtime.cluster import Cluster
    real_start = devices.start

    def two_processes(rt):
        run = real_start(rt)
        run.cluster = Cluster(workers=["127.0.0.1:7000", "127.0.0.1:7001"])
        run.process_count = 2
        return run

    def collective_fails(*args, **kwargs):
        raise jax.errors.JaxRuntimeError(
            "UNKNOWN: Gloo context initialization failed: DEADLINE_EXCEEDED")

    real_build = trainer.build_model
    devices.start, trainer.build_model = two_processes, collective_fails
    cfg = official_bench.load_config(None, json.dumps({
        "model_dir": tempfile.mkdtemp(),
        "runtime": {"backend": "jax", "num_gpus": 0,
                    "distribution_strategy": "one_device"},
        "model": {"name": "resnet_cifar", "model_params": {"depth": 8}},
        "train_dataset": {"builder": "synthetic", "image_size": 8,
                          "num_classes": 3, "batch_size": 4},
        "train": {"steps": 2, "epochs": 1},
        "evaluation": {"skip_eval": True}}))
    try:
        official_bench.run(cfg)
        error = None
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    finally:
        devices.start, trainer.build_model = real_start, real_build
    return {"error": error}


# In the order they run: the first, in a process that has run nothing yet,
# is the one that counts what its run left behind.
REPORTS = ("failed_run_report", "short_eval_report",
           "no_train_records_report", "no_decoder_report",
           "lost_peer_while_building_report")


def all_reports():
    """Every report above in this process, in turn (each puts back what it
    patched); prints {name: report}, a report that raised as its
    traceback."""
    out = {}
    for name in REPORTS:
        try:
            out[name] = globals()[name]()
        except Exception:  # noqa: BLE001 - its test shows it
            out[name] = {"raised": traceback.format_exc()[-3000:]}
    print(json.dumps(out))


@pytest.fixture(scope="module")
def reports():
    """all_reports() in one child: {report name: its report}; a report
    that raised fails its own test with the traceback."""
    out = keras3_child(__file__, "all_reports")
    return {name: _not_raised(r) for name, r in out.items()}


class _Raised(dict):
    """A report that raised: any key read fails with its traceback."""

    def __getitem__(self, key):
        pytest.fail(f"the report raised:\n{dict.__getitem__(self, 'raised')}")


def _not_raised(report):
    return _Raised(report) if "raised" in report else report


def test_a_peer_lost_while_the_model_is_built_is_one_line(reports):
    r = reports["lost_peer_while_building_report"]
    assert r["error"] and r["error"].startswith(
        "PeerLost: official_bench: lost worker 1 at 127.0.0.1:7001 before "
        "the first step"), r


def test_a_run_failing_after_its_workers_started_leaves_none_behind(reports):
    r = reports["failed_run_report"]
    assert r["error"] and r["error"].startswith("ConfigError") and \
        "validation" in r["error"], r
    assert r["workers_alive"] == [], r
    assert r["shared_memory_left"] == [], r


def test_an_evaluation_longer_than_a_pass_is_refused_before_training(
        reports):
    r = reports["short_eval_report"]
    assert r["error"] == (
        "ConfigError: validation_dataset: one pass over its 1 file(s) gives "
        "at most 1 batches of 4 (4 records), the evaluation takes 3 "
        "(evaluation.steps, else this dataset's num_examples / the global "
        "batch): set validation_dataset.num_examples=4 (and "
        "evaluation.steps, if set, to at most 1)"), r
    assert r["epochs_run"] == 0, r


def test_a_data_dir_without_train_records_stops_before_the_model(reports):
    r = reports["no_train_records_report"]
    assert r["error"] == (
        f"ConfigError: train_dataset: no files for split 'train' in "
        f"data_dir {r['data']!r}; looked for train-* (classic) and "
        "*-train.tfrecord-* (TFDS, also under <name>/<version>/)"), r
    assert r["built"] == 0, r


def test_a_missing_decoder_stops_the_run_before_the_model(reports):
    r = reports["no_decoder_report"]
    assert r["error"] == (
        "ConfigError: train_dataset.decode: 'cpu': simplejpeg is not "
        "importable (ModuleNotFoundError: import of simplejpeg halted; None "
        "in sys.modules); install simplejpeg (pip install -e \".[jax]\")"), r
    assert (r["built"], r["written"]) == (0, []), r


def test_the_input_wait_skips_one_wait_per_warm_up_step(monkeypatch):
    """One host feed per process, one next() per step: warmup_skip with
    the config's warm-up steps and 1 (no JAX run: a meter and a config)."""
    pytest.importorskip("jax")
    from official_bench.jax_backend import trainer
    from official_bench.measure import wait_meter
    real, calls = wait_meter.warmup_skip, []

    def spy(*args):
        calls.append(args)
        return real(*args)
    monkeypatch.setattr(wait_meter, "warmup_skip", spy)
    meter = wait_meter.InputWaitMeter("test")
    for k in range(8):
        meter.record(k - 0.1, k)
    cfg = SimpleNamespace(
        train=SimpleNamespace(time_history=SimpleNamespace(warmup_steps=3)),
        train_dataset=SimpleNamespace(builder="synthetic"))
    wait = trainer._input_wait(cfg, SimpleNamespace(wait=meter))
    assert calls == [(3, 1)]
    assert (wait["skipped_elements"], wait["elements"]) == (3, 5)
