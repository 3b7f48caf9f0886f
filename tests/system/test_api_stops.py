"""official_bench.run() in a long-lived process (a notebook's kernel): a
SIGTERM or Ctrl-C before the steps raises RunStopped / RunInterrupted
naming the stage, the input workers closed (no shared memory, no worker
left, no pipe of theirs held by the kept exception), the kernel's own
SIGTERM handler back, and the next run works; what run() returns carries
result.json's `input` and `input_wait`. One child Python: JAX on records
(a stall is a shard that is a FIFO), then TensorFlow stopped as it
loads."""

import io
import json
import os
import subprocess
import sys

import numpy as np

from support.helpers import REPO, cli_env

SCRIPT = r"""
import gc, json, logging, os, signal, sys, threading
import official_bench
from official_bench.runtime import stop_signals

good, stalled, runs = sys.argv[1:]
out = {}

def kernels(signum, frame):
    print("the kernel's handler", flush=True)

signal.signal(signal.SIGTERM, kernels)

class SignalOn(logging.Handler):
    armed = None

    def emit(self, record):
        if self.armed and self.armed[0] in record.getMessage():
            sig, self.armed = self.armed[1], None
            threading.Timer(0.3, os.kill, (os.getpid(), sig)).start()

trigger = SignalOn()
logging.getLogger("absl").addHandler(trigger)

def override(backend, data):
    keys = [f"runtime.backend={backend}", "runtime.num_gpus=0",
            "runtime.distribution_strategy=one_device",
            "model.model_params.depth=8", "model.model_params.num_classes=4",
            "train_dataset.builder=records", f"train_dataset.data_dir={data}",
            "train_dataset.image_size=16", "train_dataset.num_classes=4",
            "train_dataset.batch_size=4", "train_dataset.num_examples=8",
            "train.steps=4", "train.time_history.log_steps=2",
            "train.time_history.warmup_steps=1", "evaluation.skip_eval=true"]
    if backend == "jax":
        # a broken stop fails in a minute instead of hanging
        keys += ["train_dataset.num_workers=2",
                 "train_dataset.worker_timeout_seconds=60"]
    return ",".join(keys)

def run(tag, backend, data):
    return official_bench.run(None, model_type="resnet_cifar",
                              dataset="cifar10", mode="train",
                              model_dir=f"{runs}/{tag}",
                              params_override=override(backend, data))

def left():
    gc.collect()
    pid = os.getpid()
    shm = [n for n in os.listdir("/dev/shm")
           if n.startswith(f"official_bench_{pid}_")]
    workers = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{p}/cmdline") as f:
                cmd = f.read()
        except OSError:
            continue
        if ppid == pid and "resource_tracker" not in cmd:
            workers.append(p)
    return {"shm": shm, "workers": workers,
            "fds": len(os.listdir("/proc/self/fd")),
            "kernels": signal.getsignal(signal.SIGTERM) is kernels}

result = run("good", "jax", good)
with open(result.result_path) as f:
    record = json.load(f)
out["good"] = {"input": result.input, "json_input": record["input"],
               "input_wait": result.input_wait,
               "json_input_wait": record["input_wait"],
               "repr": repr(result), **left()}

kept = []  # as a kernel keeps the last exception (sys.last_value)
for tag, sig, backend, data, line in (
        ("jax_sigterm", signal.SIGTERM, "jax", stalled,
         "stage: waiting for the first batch"),
        ("jax_sigint", signal.SIGINT, "jax", stalled,
         "stage: waiting for the first batch"),
        ("tf_sigterm", signal.SIGTERM, "tensorflow", good,
         "stage: loading TensorFlow")):
    trigger.armed = (line, sig)
    try:
        run(tag, backend, data)
        out[tag] = {"raised": None}
    except BaseException as e:
        kept[:] = [e]
        out[tag] = {"raised": type(e).__name__, "message": str(e),
                    "runtime_error": isinstance(e, RuntimeError),
                    "keyboard_interrupt": isinstance(e, KeyboardInterrupt),
                    "step": e.step, **left()}
out["next"] = run("next", "jax", good).stats.total_steps
print("RESULT " + json.dumps(out), flush=True)
"""


def _records(folder, fifo):
    """Two classic shards of 16x16 JPEGs (labels 1..3); with `fifo` both
    are FIFOs nobody writes, so both input workers block opening them, as
    on a dead mount."""
    from PIL import Image

    from official_bench.data.build.example_proto import classic_example
    from official_bench.data.records.framing import frame
    os.makedirs(folder)
    for shard in range(2):
        path = os.path.join(folder, f"train-{shard:05d}-of-00002")
        if fifo:
            os.mkfifo(path)
            continue
        with open(path, "wb") as f:
            for i in range(4):
                buf = io.BytesIO()
                Image.fromarray(np.full((16, 16, 3), 9 * i, np.uint8)).save(
                    buf, "JPEG")
                f.write(frame(classic_example(buf.getvalue(), 1 + i % 3, 16,
                                              16)))
    return folder


def test_a_notebook_s_stops_before_the_steps_and_its_result(tmp_path):
    good = _records(str(tmp_path / "good"), fifo=False)
    stalled = _records(str(tmp_path / "stalled"), fifo=True)
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, good, stalled, str(tmp_path / "runs")],
        cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=600)
    lines = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert p.returncode == 0 and lines, (p.stdout + p.stderr)[-4000:]
    out = json.loads(lines[0][len("RESULT "):])

    good_run = out["good"]
    assert good_run["input"] == good_run["json_input"]
    assert good_run["input"]["num_workers"] == 2
    assert good_run["input"]["decoder"]
    assert good_run["input_wait"] == good_run["json_input_wait"]
    assert good_run["input_wait"] is not None
    assert "decoder" not in good_run["repr"]

    wait = "waiting for the first batch of train_dataset (2 input worker(s))"
    for tag, kind, name in (("jax_sigterm", "RunStopped", "SIGTERM"),
                            ("jax_sigint", "RunInterrupted", "SIGINT")):
        stop = out[tag]
        assert stop["raised"] == kind, stop
        assert stop["message"] == (f"official_bench: stopped by {name} "
                                   f"while {wait}; no result written")
        assert stop["runtime_error"] == (name == "SIGTERM")
        assert stop["keyboard_interrupt"] == (name == "SIGINT")
        assert stop["step"] is None
        # the workers closed on the way out, their pipes with them
        assert (stop["shm"], stop["workers"]) == ([], []), stop
        assert stop["fds"] == good_run["fds"], (stop, good_run)
        assert stop["kernels"], "the kernel's SIGTERM handler is back"
    tf = out["tf_sigterm"]
    assert tf["raised"] == "RunStopped", tf
    assert tf["message"] == ("official_bench: stopped by SIGTERM while "
                             "loading TensorFlow; no result written")
    assert tf["kernels"]
    assert "official_bench: SIGTERM: stopping once loading TensorFlow is " \
        "done" in p.stderr
    assert out["next"] == 4  # the kernel goes on to its next run
    assert "the kernel's handler" not in p.stdout
    assert "leaked shared_memory" not in p.stderr
