"""The outside-TensorFlow sources (python, zmq, service) under several
workers and Horovod ranks: each gets its own share.

Where each (source x strategy) pair is covered:

  source   strategy               covered by
  python   one_device             unit/data/feeds/test_python_feed
           mirrored               same
           multi_worker_mirrored  same (2 workers, pipeline ids)
           horovod                here (horovodrun, pipeline ids)
  zmq      one_device             system/test_zmq_feed
           mirrored               same (2 producers)
           multi_worker_mirrored  same (2 workers, port + i)
           horovod                here (horovodrun, port + rank)
  service  one_device             unit/data/feeds/test_service
           mirrored               here
           multi_worker_mirrored  here (2 workers, pipeline ids)
           horovod                here (horovodrun)
  records  one_device             unit/training/test_training and others
           mirrored               unit/data/records/test_records (sharding,
                                  in process)
           multi_worker_mirrored  through service (the trainer builds the
                                  pipeline)
           horovod                here (horovodrun)

"Own share" means: python sources are called with the worker's or rank's
input pipeline id (recorded by the source itself); a zmq worker or rank
binds port + its id and only its own producer connects there, so the run
finishes only if every rank got batches from its own producer; a service
job registered by pipeline i runs the records pipeline sharded for i (the
in-process test reads the labels of each pipeline's files back).

The Horovod runs need the venv scripts/install_horovod.sh builds (skip with
the reason otherwise; the CPU test of Distribution.dataset under a fake
Horovod covers the rank -> input pipeline decision here).
"""

import os
import re
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from official_bench import trainer
from official_bench.config import DatasetConfig
from official_bench.data.feeds import service_feed
from official_bench.runtime.keras_setup import tf
from support.helpers import (
    REPO,
    TINY_OVERRIDE,
    cli_env,
    consecutive_free_port,
    failure_text,
    free_ports,
    horovod_env,
    horovod_venv,
    horovodrun,
    kill_all,
    start_service,
)

TESTS = os.path.join(REPO, "tests")


# -- helpers ---------------------------------------------------------------

def _two_file_records(root, per_file=8):
    """train-0000{0,1}-of-00002: every record of file k has label k (after
    the classic layout's 1-based offset), so labels name the file read."""
    from official_bench.data.build.example_proto import classic_example
    from support.records import noisy_jpeg as _noisy_jpeg
    os.makedirs(root, exist_ok=True)
    for k in range(2):
        path = os.path.join(root, f"train-0000{k}-of-00002")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(per_file):
                writer.write(classic_example(_noisy_jpeg(10 * k + i), k + 1,
                                             12, 12))
    return str(root)


def _service_cluster(python, workers=1):
    """(dispatcher address, [process]): a dispatcher and `workers` workers
    on 127.0.0.1, built as the service CLI builds them, in one process
    (support/service_cluster.py), for trainers in other processes."""
    ports = [str(p) for p in free_ports(1 + workers)]
    proc = start_service(*ports, python=python, timeout=180,
                         env={"CUDA_VISIBLE_DEVICES": ""},
                         module="support.service_cluster")[0]
    return f"127.0.0.1:{ports[0]}", [proc]


# shuffle_buffer_size 16 (the 16 records), not 10000: filling the default
# buffer from 16 records cost each run (and service job) about 0.5 s.
SERVICE_DATA = (",train_dataset.image_size=8,train_dataset.num_classes=2,"
                "train_dataset.shuffle_buffer_size=16,"
                "validation_dataset.num_classes=2,"
                "validation_dataset.image_size=8,"
                "model.model_params.num_classes=2")


@pytest.fixture
def service_here():
    """The address of a tf.data service dispatcher and a worker on
    127.0.0.1 in this process, each built by service.start as the service
    CLI builds it (the CLI's own process: unit/data/feeds/test_service), for
    a reader in this process: no server process to start. (A trainer in
    another process gets servers in another process, _service_cluster:
    stopping a worker here whose jobs' reader exited without releasing them
    waits 10-30 s, measured.)"""
    from official_bench.data.feeds import service
    dispatcher, worker = free_ports(2)
    servers = [service.start(service.parse_args(
        ["--dispatcher", "--port", str(dispatcher)]))]
    try:
        servers.append(service.start(service.parse_args(
            ["--worker", "--dispatcher_address", f"127.0.0.1:{dispatcher}",
             "--port", str(worker), "--worker_address", "127.0.0.1"])))
        yield f"127.0.0.1:{dispatcher}"
    finally:
        for server in reversed(servers):
            server.stop()


# -- the share logic, in process (CPU) -------------------------------------

def test_each_service_pipeline_reads_its_own_files(tmp_path, service_here):
    """Pipeline 0 of 2 must see only file 0's labels, pipeline 1 only file
    1's."""
    data_dir = _two_file_records(tmp_path / "data")
    ds = DatasetConfig(builder="service", data_dir=data_dir, split="train",
                       image_size=8, num_classes=2, one_hot=False,
                       shuffle_buffer_size=16,
                       data_service_address=service_here,
                       data_service_timeout_seconds=60)
    seen = {}
    for pid in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2,
                                         input_pipeline_id=pid)
        dataset = service_feed.service_dataset(ds, ctx, 4, True, 0)
        seen[pid] = sorted({int(label) for _, labels in
                            dataset.take(4).as_numpy_iterator()
                            for label in labels})
    assert seen == {0: [0], 1: [1]}


class _FakeHorovod:
    """rank 1 of 2: what Distribution.dataset asks Horovod."""
    rank = staticmethod(lambda: 1)
    size = staticmethod(lambda: 2)


def test_horovod_rank_is_the_input_pipeline_id():
    """CPU sibling of the horovodrun tests: under horovod the dataset is
    built for input pipeline <rank> of <size>, with the global batch
    divided by size."""
    from official_bench.config.strategies import traits
    from official_bench.data.fit_input import fit_input
    from official_bench.runtime.distribute import Distribution
    dist = Distribution(traits=traits("horovod"),
                        strategy=tf.distribute.get_strategy(),
                        num_replicas=2, is_chief=False, logs_throughput=False,
                        hvd=_FakeHorovod())
    ds = DatasetConfig(builder="python", image_size=8, num_classes=4,
                       one_hot=False, python_source="support.python_sources:"
                                                    "pipeline_source")
    images, labels = next(iter(fit_input(dist, ds, 8, True, 0).data))
    assert images.shape == (4, 8, 8, 3)  # global 8 / 2 ranks
    assert labels.numpy().tolist() == [1, 1, 1, 1]


def test_zmq_first_batch_that_never_comes_is_a_timeout():
    """No producer at all: the first batch times out like any other."""
    pytest.importorskip("zmq")
    from official_bench.data.feeds import batch_spec, zmq_feed
    ep = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    spec = batch_spec.BatchSpec(4, 16, 3, 10, "float32")
    start = time.monotonic()
    with pytest.raises(zmq_feed.ZmqFeedError) as e:
        next(zmq_feed.receive([ep], True, 0.2, spec))
    assert time.monotonic() - start < 10
    assert re.search(r"no batch for 0\.2 s \(zmq_timeout_seconds\) on "
                     rf"{re.escape(ep)} after 0 batches; producers last "
                     r"heard from: none", str(e.value))


def test_zmq_interface_name_endpoint_gives_each_worker_its_port():
    """One config for every node: tcp://<interface>:port binds that
    interface on whichever host the worker runs, at port + its id."""
    zmq = pytest.importorskip("zmq")
    from official_bench.data.feeds import batch_spec, zmq_feed, zmq_wire
    base = consecutive_free_port(2)
    endpoints = zmq_feed.worker_endpoints([f"tcp://lo:{base}"], 1)
    assert endpoints == [f"tcp://lo:{base + 1}"]
    spec = batch_spec.BatchSpec(4, 16, 3, 10, "float32")
    feed = zmq_feed.receive(endpoints, True, 20.0, spec)
    sock = zmq.Context.instance().socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(f"tcp://127.0.0.1:{base + 1}")
    try:
        sock.send_multipart(zmq_wire.encode(
            np.zeros((4, 16, 16, 3), np.float32), np.arange(4, dtype=np.int32),
            "via-lo", 0))
        images, labels = next(feed)
    finally:
        sock.close(0)
        feed.close()
    assert images.shape == (4, 16, 16, 3) and labels.tolist() == [0, 1, 2, 3]


# -- service under mirrored (trainer.run) and multi_worker_mirrored (CLI) --

def test_service_feeds_two_mirrored_replicas_in_bfloat16(
        tmp_path, service_here, absl_messages):
    """trainer.run in this process (its two logical CPUs, tests/conftest),
    as the CLI runs it; what the CLI prints is in the absl records."""
    import json
    data_dir = _two_file_records(tmp_path / "data")
    r = trainer.run(None, mode="train", model_dir=str(tmp_path / "m"),
                    params_override=(
                        TINY_OVERRIDE + SERVICE_DATA +
                        ",train_dataset.builder=service,train_dataset."
                        f"data_dir={data_dir},train_dataset."
                        f"data_service_address={service_here},"
                        "runtime.distribution_strategy=mirrored,"
                        "runtime.cpu_devices=2,train.steps=4,"
                        "runtime.mixed_precision_dtype=bfloat16"))
    text = "\n".join(absl_messages)
    assert "2 replicas x 4 images" in text, text[-3000:]
    assert f"runs on the tf.data service at {service_here} (input " \
        "pipeline 0)" in text
    assert r.stats.total_steps == 4
    result = json.load(open(tmp_path / "m" / "result.json"))
    assert result["environment"]["dtype"] == "bfloat16"


@pytest.mark.slow
@pytest.mark.multiworker
def test_service_feeds_two_multi_worker_mirrored_workers(tmp_path):
    """Two trainers on 127.0.0.1 share one dispatcher and two service
    workers; each registers its own job, for its own input pipeline."""
    data_dir = _two_file_records(tmp_path / "data")
    address, procs = _service_cluster(sys.executable, workers=2)
    hosts = ",".join(f"127.0.0.1:{p}" for p in free_ports(2))
    trainers = []
    try:
        for i in range(2):
            override = (
                TINY_OVERRIDE + SERVICE_DATA +
                ",runtime.distribution_strategy=multi_worker_mirrored,"
                f"runtime.worker_hosts='{hosts}',runtime.task_index={i},"
                "runtime.all_reduce_alg=ring,runtime.peer_timeout_seconds=180,"
                "train.steps=4,train_dataset.builder=service,"
                f"train_dataset.data_dir={data_dir},"
                f"train_dataset.data_service_address={address}")
            trainers.append(subprocess.Popen(
                [sys.executable, "-m", "official_bench.classifier_trainer",
                 "--mode=train", f"--model_dir={tmp_path / str(i)}",
                 f"--params_override={override}"], cwd=REPO,
                env=cli_env(), stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True))
        outs = [t.communicate(timeout=600)[0] for t in trainers]
    finally:
        kill_all(trainers + procs)
    for i, (t, out) in enumerate(zip(trainers, outs)):
        assert t.returncode == 0, failure_text(out)
        assert f"runs on the tf.data service at {address} (input pipeline " \
               f"{i})" in out, failure_text(out)
    assert "global batch 8" in outs[0]  # 4 per replica x 2 workers


# -- horovodrun -np 2 (the Horovod venv) -----------------------------------

def _hvd_env(venv):
    """horovod_env, with the tests' python sources importable by the ranks."""
    return horovod_env(venv, {"PYTHONPATH": os.pathsep.join(
        [REPO, TESTS] + [p for p in [os.environ.get("PYTHONPATH")] if p])})


def _has_zmq(venv):
    return subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                           "import zmq"], env=_hvd_env(venv),
                          capture_output=True).returncode == 0


def _run_sections(out, names):
    """{name: {rank: that run's lines on that rank}} from the output of
    support/horovod_runs.py under horovodrun ("[rank]..." lines)."""
    sections = {name: {0: "", 1: ""} for name in names}
    current = {0: None, 1: None}
    for line in out.splitlines():
        m = re.match(r"^\[(\d)\]", line)
        if not m or int(m.group(1)) not in current:
            continue
        rank = int(m.group(1))
        begin = re.search(r"RUN (\w+) BEGIN$", line)
        if begin:
            current[rank] = begin.group(1)
        elif current[rank] in sections:
            sections[current[rank]][rank] += line + "\n"
    return sections


@pytest.fixture(scope="module")
def hvd_runs(tmp_path_factory):
    """One horovodrun -np 2 --gloo whose ranks train once per source
    (support/horovod_runs.py): python, records, service, and zmq where the
    Horovod venv has pyzmq. Starting the ranks once instead of four times
    saves about 90 CPU-s; each test below asserts its own run's part.
    Its returncode and output, `sections` ({source: {rank: lines}}), the
    python source's folder and the service's address."""
    venv, tmp = horovod_venv(), tmp_path_factory.mktemp("hvd")
    procs = []
    try:
        return _horovod_runs(venv, tmp, procs)
    finally:
        kill_all(procs)


def _horovod_runs(venv, tmp, procs):
    """The fixture's data, servers (appended to `procs`) and horovodrun."""
    data_dir = _two_file_records(tmp / "data")
    base = TINY_OVERRIDE + ",train.steps=4,runtime.distribution_strategy=" \
        "horovod,"
    # The servers run the venv's TensorFlow too: a pipeline serialised by
    # TensorFlow 2.18 is not sent to a 2.21 worker here.
    address, servers = _service_cluster(os.path.join(venv, "bin", "python"))
    procs += servers
    runs = {
        "python": "train_dataset.builder=python,train_dataset.python_source="
                  f"support.python_sources:recording_source,"
                  f"train_dataset.data_dir={tmp / 'python'}",
        "records": SERVICE_DATA.lstrip(",") + ",train_dataset.builder="
                   f"records,train_dataset.data_dir={data_dir}",
        "service": SERVICE_DATA.lstrip(",") + ",train_dataset.builder="
                   f"service,train_dataset.data_dir={data_dir},"
                   f"train_dataset.data_service_address={address}",
    }
    os.makedirs(tmp / "python")
    if _has_zmq(venv):
        # Rank r binds port + r; producer r connects to that port only.
        port = consecutive_free_port(2)
        runs["zmq"] = ("train_dataset.builder=zmq,train_dataset."
                       f"zmq_endpoints=[tcp://127.0.0.1:{port}],"
                       "train_dataset.zmq_timeout_seconds=120")
        procs += [subprocess.Popen(
            [sys.executable, "-m", "official_bench.data.feeds.zmq_producer",
             "--connect", f"tcp://127.0.0.1:{port + r}", "--synthetic",
             "--batch_size", "4", "--image_size", "16", "--num_classes",
             "10", "--name", f"for-rank{r}", "--send_timeout_seconds",
             "600"], cwd=REPO, env=cli_env(), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True) for r in range(2)]
    p = subprocess.run(
        horovodrun(venv, os.path.join(TESTS, "support/horovod_runs.py"),
                   str(tmp / "m"),
                   *(f"{name}={base}{o}" for name, o in runs.items())),
        cwd=REPO, env=_hvd_env(venv), text=True, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, timeout=900)
    return types.SimpleNamespace(
        returncode=p.returncode, output=p.stdout,
        sections=_run_sections(p.stdout, runs), python_dir=tmp / "python",
        address=address)


def _run_of(hvd_runs, name):
    """That source's run on both ranks, asserted to have ended."""
    out, sections = hvd_runs.output, hvd_runs.sections
    ended = [r for r in (0, 1) if f"RUN {name} END" in sections[name][r]]
    assert ended == [0, 1], failure_text(out)
    if all(f"RUN {n} END" in lines[r] for n, lines in sections.items()
           for r in (0, 1)):
        # every run ended: the exit status too
        assert hvd_runs.returncode == 0, failure_text(out)
    return sections[name][0] + sections[name][1]


@pytest.mark.slow
@pytest.mark.multiworker
def test_horovod_ranks_each_call_the_python_source_for_their_rank(hvd_runs):
    out = _run_of(hvd_runs, "python")
    folder = hvd_runs.python_dir
    seen = sorted(open(folder / f).read() for f in os.listdir(folder)
                  if f.startswith("pipeline-"))
    assert seen == ["0 of 2", "1 of 2"]
    assert "global batch 8" in out  # 4 per rank x 2 ranks


@pytest.mark.slow
@pytest.mark.multiworker
def test_horovod_ranks_each_bind_their_zmq_port(hvd_runs):
    """Rank r binds port + r; producer r connects to that port only, so
    both ranks finish only if each got its own producer's batches."""
    if "zmq" not in hvd_runs.sections:
        pytest.skip("pyzmq is not installed in the Horovod venv (re-run "
                    "scripts/install_horovod.sh: it installs the [test] "
                    "extra, which lists pyzmq)")
    out = _run_of(hvd_runs, "zmq")
    assert "global batch 8" in out


@pytest.mark.slow
@pytest.mark.multiworker
def test_horovod_ranks_each_register_their_service_pipeline(hvd_runs):
    out, address = _run_of(hvd_runs, "service"), hvd_runs.address
    for rank in range(2):
        assert re.search(rf"^\[{rank}\].*runs on the tf.data service at "
                         rf"{re.escape(address)} \(input pipeline {rank}\)",
                         out, re.M), failure_text(hvd_runs.output)


@pytest.mark.slow
@pytest.mark.multiworker
def test_horovod_ranks_train_from_records(hvd_runs):
    """The records builder itself under horovodrun (the service test above
    sends the same pipeline to the service instead)."""
    out = _run_of(hvd_runs, "records")
    assert "global batch 8" in out
    for rank in range(2):
        assert re.search(rf"^\[{rank}\].*train_dataset: 2 classic record "
                         r"file\(s\) for split train", out, re.M), \
            failure_text(hvd_runs.output)
