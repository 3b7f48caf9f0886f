"""SIGTERM before the training steps ends as a Ctrl-C there does: one last
line `error: official_bench: stopped by SIGTERM while <stage>; no result
written`, status 143, and (JAX) the input workers closed by the feed,
their shared memory unlinked, none left to multiprocessing's resource
tracker. The stall is a record shard that is a FIFO: the input worker
blocks opening it, as on a dead mount. TensorFlow reads its first batch
inside the first step, under the steps' handler: a stop that cannot reach
a step boundary still ends in an `error:` line after the grace."""

import io
import os
import signal
import time

import numpy as np
import pytest

from official_bench.contracts import exit_status
from support.helpers import LiveProcess, trainer_cmd

SHM_DIR = "/dev/shm"


def _stalling_records(folder):
    """Two classic shards of 12x12 JPEGs (labels 1..3), the second a FIFO
    nobody writes."""
    from PIL import Image

    from official_bench.data.build.example_proto import classic_example
    from official_bench.data.records.framing import frame
    with open(os.path.join(folder, "train-00000-of-00002"), "wb") as f:
        for i in range(4):
            buf = io.BytesIO()
            Image.fromarray(np.full((12, 12, 3), 9 * i, np.uint8)).save(
                buf, "JPEG")
            f.write(frame(classic_example(buf.getvalue(), 1 + i % 3, 12, 12)))
    os.mkfifo(os.path.join(folder, "train-00001-of-00002"))


def _override(data, backend, extra=""):
    keys = [f"runtime.backend={backend}", "runtime.num_gpus=0",
            "runtime.distribution_strategy=one_device",
            "model.name=resnet_cifar", "model.model_params.depth=8",
            "model.model_params.num_classes=4",
            "train_dataset.builder=records", f"train_dataset.data_dir={data}",
            "train_dataset.image_size=8", "train_dataset.num_classes=4",
            "train_dataset.batch_size=4", "train_dataset.num_examples=8",
            "train.steps=10", "evaluation.skip_eval=true"]
    return ",".join(keys) + extra


def _until_line(w, text, seconds=240):
    deadline = time.monotonic() + seconds
    while text not in w.output and w.proc.poll() is None and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    assert text in w.output, w.output[-3000:]


def _segments(pid):
    return [n for n in os.listdir(SHM_DIR)
            if n.startswith(f"official_bench_{pid}_")]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_jax_stalled_on_its_first_batch(tmp_path, sig):
    data = tmp_path / "data"
    data.mkdir()
    _stalling_records(str(data))
    w = LiveProcess(trainer_cmd(tmp_path / "run", _override(
        data, "jax", ",train_dataset.num_workers=1")))
    wait = "waiting for the first batch of train_dataset (1 input worker(s))"
    _until_line(w, f"stage: {wait} ...")
    assert "compiling the train step" not in w.output
    assert _segments(w.proc.pid), "the input worker's memory is there"
    w.proc.send_signal(sig)
    assert w.finish(60) == exit_status.by_signal(sig), w.output[-3000:]
    name = signal.Signals(sig).name
    assert w.last_line == (f"error: official_bench: stopped by {name} while "
                           f"{wait}; no result written"), w.output[-3000:]
    assert "leaked shared_memory" not in w.output
    assert "Traceback" not in w.output
    assert _segments(w.proc.pid) == []
    assert not (tmp_path / "run" / "result.json").exists()


def test_tensorflow_sigterm_while_it_loads_is_held_then_one_line(tmp_path):
    w = LiveProcess(trainer_cmd(tmp_path / "run", _override(
        tmp_path, "tensorflow")))
    _until_line(w, "stage: loading TensorFlow ...")
    w.proc.send_signal(signal.SIGTERM)  # TensorFlow's import takes seconds
    assert w.finish(120) == exit_status.TERMINATED, w.output[-3000:]
    assert w.last_line == ("error: official_bench: stopped by SIGTERM while "
                           "loading TensorFlow; no result written"), \
        w.output[-3000:]
    assert "official_bench: SIGTERM: stopping once loading TensorFlow is " \
        "done" in w.output
    assert "Traceback" not in w.output


def test_tensorflow_stalled_in_its_first_step_ends_after_the_grace(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _stalling_records(str(data))
    w = LiveProcess(trainer_cmd(tmp_path / "run", _override(
        data, "tensorflow", ",runtime.stop_grace_seconds=2")))
    _until_line(w, "stage: tracing and compiling the first step ...")
    w.proc.send_signal(signal.SIGTERM)
    assert w.finish(120) == exit_status.TERMINATED, w.output[-3000:]
    assert w.last_line == (
        "error: official_bench: stopped by SIGTERM before the first step "
        "ended (it did not stop in time); no result written"), \
        w.output[-3000:]
