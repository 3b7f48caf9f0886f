"""runtime.backend jax on TFRecords, for real, with TensorFlow blocked in
the trainers (as on a GPU image): a run decoded by two input worker
processes trains and evaluates and names its decoder and workers in
result.json, a cut shard skipped and counted as on TensorFlow; a
truncated shard (strict) ends the run in one line naming the file,
with no worker left behind; two processes on 127.0.0.1 read disjoint
shards and train together (the same weights at the end); a Python
source's batches train too."""

import importlib.util
import io
import json
import os
import re
import sys
import time
import uuid

import numpy as np
import pytest

from official_bench.contracts import exit_status
from official_bench.contracts.trainer_command import trainer_argv
from official_bench.data.build.example_proto import classic_example
from official_bench.data.records.framing import frame
from support.helpers import REPO, free_ports, without_module_env
from support.launch_cli import run_together

pytestmark = [
    pytest.mark.multiworker,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("jax", "keras")),
        reason="the jax backend needs jax and keras (pip install -e .[jax])"),
]

FILES = re.compile(r"official_bench: train_dataset: (\d+) record file\(s\) "
                   r"for process (\d) of (\d) \((\S+) \.\.\. (\S+)\), (\d+) "
                   r"input worker\(s\)")


def _jpeg(seed, size=12):
    from PIL import Image
    pixels = np.random.default_rng(seed).integers(
        0, 256, (size, size, 3)).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", quality=95)
    return buf.getvalue()


def write_records(root, split, shards, per_shard):
    """Classic shards of 12x12 noisy JPEGs, labels 1..3 (3 classes);
    `per_shard` a count, or one per shard."""
    root.mkdir(exist_ok=True)
    counts = per_shard if isinstance(per_shard, list) else \
        [per_shard] * shards
    paths, k = [], 0
    for s in range(shards):
        path = root / f"{split}-{s:05d}-of-{shards:05d}"
        with open(path, "wb") as f:
            for _ in range(counts[s]):
                f.write(frame(classic_example(_jpeg(k), 1 + k % 3, 12, 12)))
                k += 1
        paths.append(path)
    return paths


def _override(**extra):
    tree = {
        "runtime": {"backend": "jax", "num_gpus": 0,
                    "distribution_strategy": "one_device"},
        "model": {"name": "resnet_cifar", "model_params": {"depth": 8}},
        "train_dataset": {"builder": "records", "image_size": 8,
                          "num_classes": 3, "batch_size": 4,
                          "num_examples": 32, "shuffle_buffer_size": 8,
                          "num_workers": 2},
        "validation_dataset": {"builder": "records", "image_size": 8,
                               "num_classes": 3, "batch_size": 4,
                               "num_examples": 8, "num_workers": 1},
        "train": {"steps": 6, "epochs": 1,
                  "time_history": {"log_steps": 2}},
        "evaluation": {"skip_eval": True}}
    for key, value in extra.items():
        node = tree
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return json.dumps(tree)


def _env(tmp_path, mark, **more):
    env = without_module_env(tmp_path, "tensorflow")
    return dict(env, PYTHONUNBUFFERED="1", OFFICIAL_BENCH_TEST_MARK=mark,
                **more)


def _marked(mark):
    """Pids of live processes that inherited `mark` (a trainer's
    children do)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"OFFICIAL_BENCH_TEST_MARK={mark}".encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _none_left(mark, timeout=15.0):
    deadline = time.monotonic() + timeout
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _marked(mark) == []


def _run(tmp_path, override, data_dir, name="run", timeout=240,
         mode="train", **env):
    mark = uuid.uuid4().hex
    argv = trainer_argv(sys.executable, mode=mode,
                        model_dir=str(tmp_path / name),
                        params_override=override,
                        extra=[f"--data_dir={data_dir}"])
    (rc,), (out,) = run_together([(argv, _env(tmp_path, mark, **env))],
                                 str(tmp_path), timeout)
    return rc, out, mark


def _two_processes(tmp_path, override, mode, timeout, *extra):
    """Workers 0 and 1 of a JAX run on 127.0.0.1 (tests/ importable, for
    support's sources): ([returncode], [output], their mark)."""
    p0, p1 = free_ports(2)
    runs, mark = [], uuid.uuid4().hex
    for index in (0, 1):
        tf_config = json.dumps({
            "cluster": {"worker": [f"127.0.0.1:{p0}", f"127.0.0.1:{p1}"]},
            "task": {"type": "worker", "index": index}})
        argv = trainer_argv(sys.executable, mode=mode,
                            model_dir=str(tmp_path / f"w{index}"),
                            params_override=override, extra=list(extra))
        env = _env(tmp_path, mark, TF_CONFIG=tf_config)
        env["PYTHONPATH"] += os.pathsep + os.path.join(REPO, "tests")
        runs.append((argv, env))
    rcs, outs = run_together(runs, str(tmp_path), timeout)
    return rcs, outs, mark


def test_records_train_and_evaluate_on_jax_with_input_workers(tmp_path):
    """One run: train and evaluate from two input workers, with one train
    shard cut and skip_bad_records: true, so the run trains on and, before
    its results, the framing check (data/records/file_verdict.py) logs the
    cut file as skipped and the count, the TensorFlow path's lines."""
    data = tmp_path / "data"
    paths = write_records(data, "train", 4, 8)
    cut = paths[2]
    # Cut in its first half, and 12 steps (each worker's 6 batches are more
    # than a pass over its 2 files): the worker holding it meets the damage
    # in its first batches, so the skip reaches the trainer with a batch it
    # takes, however the load delays the workers (with 6 steps and the cut
    # near the end, it came after the last batch taken once in a full run).
    cut.write_bytes(cut.read_bytes()[:len(cut.read_bytes()) // 3])
    write_records(data, "validation", 2, 4)
    rc, out, mark = _run(tmp_path, _override(**{
        "evaluation.skip_eval": False, "train.steps": 12,
        "train.time_history.log_steps": 4,
        "train_dataset.skip_bad_records": True}), data,
        mode="train_and_eval")
    assert rc == 0, out[-4000:]
    assert _none_left(mark)
    from official_bench.data.records import host_examples
    m = FILES.search(out)
    assert m and m.groups() == ("4", "0", "1", "train-00000-of-00004",
                                "train-00003-of-00004", "2"), out[-3000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    feed = result["input"]
    assert (feed["builder"], feed["decoder"], feed["num_workers"]) == \
        ("records", host_examples.DECODER, 2)
    assert feed["images_decoded"] >= 6 * 4
    assert feed["decode_images_per_cpu_second"] > 0
    assert len(result["stats"]["intervals"]) == 3
    assert "val_loss" in result["history"]
    assert result["input_wait"] is not None
    skipped = [line for line in out.splitlines()
               if "skipped (skip_bad_records: true)" in line
               and str(cut) in line]
    assert skipped, out[-4000:]
    assert "official_bench: 1 of 4 record file(s) truncated or corrupt " \
        "in train" in out, out[-4000:]
    # The workers' skips reach result.json through their batch messages;
    # the framing check's line at the end (one per bad file) is not a
    # record skipped, and a worker's skips after its last batch are not
    # counted.
    assert 1 <= result["records_skipped"]["train"] <= len(skipped) - 1
    assert "bad record(s) skipped (train " in out, out[-4000:]


def test_a_truncated_shard_is_one_line_and_leaves_no_worker(tmp_path):
    data = tmp_path / "data"
    paths = write_records(data, "train", 2, 16)
    cut = paths[1]
    cut.write_bytes(cut.read_bytes()[:-300])
    rc, out, mark = _run(tmp_path, _override(**{"train.steps": 40}), data)
    assert exit_status.lookup(rc).code == exit_status.FAILED, out[-4000:]
    errors = [line for line in out.splitlines()
              if line.startswith("error: ")]
    assert len(errors) == 1, out[-4000:]
    assert str(cut) in errors[0] and "official_bench:" in errors[0], errors
    assert _none_left(mark)
    assert not (tmp_path / "run" / "result.json").exists()


@pytest.mark.slow
def test_two_processes_read_disjoint_shards_and_train_together(tmp_path):
    """...and evaluate on validation files that split unevenly: process 0
    gets files 0 and 2 (12 records, 3 batches of 4), process 1 file 1 (4
    records, 1 batch); num_examples 16 plans 2 global batches of 8, so
    both take the 1 that process 1 can give (one warning line each)
    instead of process 1 failing while process 0 waits; each process
    finds its validation files once."""
    data = tmp_path / "data"
    write_records(data, "train", 4, 8)
    write_records(data, "validation", 3, [6, 4, 6])
    override = _override(**{
        "runtime.distribution_strategy": "multi_worker_mirrored",
        "runtime.peer_timeout_seconds": 120, "runtime.seed": 3,
        "train_dataset.num_workers": 1, "evaluation.skip_eval": False,
        "validation_dataset.num_examples": 16})
    rcs, outs, mark = _two_processes(tmp_path, override, "train_and_eval",
                                     300, f"--data_dir={data}")
    assert rcs == [0, 0], "\n".join(o[-3000:] for o in outs)
    assert _none_left(mark)
    read = [FILES.search(out).groups() for out in outs]
    # four files, sharded by file as on TensorFlow: 0 and 2, then 1 and 3
    assert read == [("2", "0", "2", "train-00000-of-00004",
                     "train-00002-of-00004", "1"),
                    ("2", "1", "2", "train-00001-of-00004",
                     "train-00003-of-00004", "1")]
    mine = json.loads((tmp_path / "w0" / "result.json").read_text())
    theirs = json.loads((tmp_path / "w1" /
                         "result_worker1.json").read_text())
    assert mine["model"]["trainable_weights_sha256"] == \
        theirs["model"]["trainable_weights_sha256"]
    assert mine["stats"]["global_batch_size"] == 8
    taken = ("official_bench: validation_dataset: an evaluation takes 1 "
             "batches of 8, not 2: the processes' shares of the files give "
             "3, 1 batches")
    assert all(taken in out for out in outs), outs[0][-3000:]
    # the plan's count and the feed read the files found once
    assert [out.count("record file(s) for split validation")
            for out in outs] == [1, 1]
    assert "val_loss" in mine["history"]


@pytest.mark.slow
def test_one_process_failing_ends_both_in_one_line_each(tmp_path):
    """Process 1's source fails at its 8th batch while process 0 waits in
    the step's all-reduce. Process 1 says why and leaves at once (a
    normal exit waited at jax.distributed's shutdown for process 0, which
    waited in the collective: both hung for the shutdown's 300 s and
    more); process 0 sees the connection go and names the lost worker."""
    override = _override(**{
        "runtime.distribution_strategy": "multi_worker_mirrored",
        "runtime.peer_timeout_seconds": 120, "train.steps": 40,
        "train_dataset.builder": "python", "train_dataset.python_source":
            "support.python_sources:second_pipeline_failing_source",
        "train_dataset.num_workers": "auto"})  # records' key: refused here
    rcs, outs, mark = _two_processes(tmp_path, override, "train", 240)
    errors = [[line for line in out.splitlines()
               if line.startswith("error: ")] for out in outs]
    assert rcs == [exit_status.PEER_LOST, exit_status.FAILED], \
        "\n".join(o[-3000:] for o in outs)
    assert len(errors[1]) == 1 and "pipeline 1 failed" in errors[1][0], \
        outs[1][-3000:]
    assert len(errors[0]) == 1 and "lost worker 1 at 127.0.0.1:" in \
        errors[0][0], outs[0][-3000:]
    assert _none_left(mark)


def test_a_python_source_trains_on_jax(tmp_path):
    """builder: python on JAX: the reference synthetic source's numpy
    batches, one per replica per step, without TensorFlow."""
    source = "official_bench.data.feeds.python_loader:synthetic_source"
    rc, out, mark = _run(tmp_path, _override(**{
        "train_dataset.builder": "python",
        "train_dataset.python_source": source,
        "train_dataset.num_workers": "auto"}), tmp_path)  # records' key
    assert rc == 0, out[-4000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["input"] == {"builder": "python", "python_source": source}
    assert len(result["stats"]["intervals"]) == 3
    assert _none_left(mark)
