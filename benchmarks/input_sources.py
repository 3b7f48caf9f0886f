"""Every input source feeding the same small model, side by side.

    .venv/bin/python benchmarks/input_sources.py [--steps 90] [--seconds 12]
        [--image_size 32] [--batch 32] [--images 512] [--only a,b]

The question tensorpack's multi-GPU study asked (where the data comes from
changes throughput; its fastest way to bring data from outside TensorFlow
was a ZMQ pipe from other processes), asked of this suite on this machine.
One set of JPEGs (random colour fields with texture, 96x72 and 72x96) is
written both as an image folder and as classic TFRecords; then, for each
source, a fresh trainer process trains resnet_cifar depth 8 on
image_size x image_size crops (one_device, float32, --steps steps, the
first interval left out), and a fresh input_bench process pulls the same
pipeline alone for --seconds. Sources:

  synthetic device    synthetic_location: device (no input per step)
  synthetic host      one batch repeated, copied every step
  records             TFRecords: decode + crop + resize in tf.data threads
  records norm        the same, mean_subtract + standardize on the host
  records uint8       the same with transfer_uint8: uint8 sent, the model's
                      first layer normalises (compare with records norm)
  python generator    folder images decoded by Pillow in the trainer's
                      Python thread (from_generator, no pool)
  python pool         the same with python_loader's 2-process pool
  zmq 1 / zmq 2       1 or 2 producer processes (--folder, 1 pool worker
                      each) PUSHing to the trainer
  service 1 / 2       tf.data service on 127.0.0.1, 1 or 2 workers running
                      the records pipeline

Helpers (producers, dispatcher, workers) start before the trainer and stay
up for its input_bench run, then are killed. Prints a table and a JSON line.
The machine's cores are shared by everything here (and by other jobs), so
a source's helpers compete with its trainer: that is part of what is
measured.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
HERE = os.path.dirname(os.path.abspath(__file__))

from official_bench.contracts.hostport import free_ports  # noqa: E402
from official_bench.contracts.trainer_command import trainer_argv  # noqa: E402

TRAIN_RATE = re.compile(r"run finished: \d+ steps, average ([\d.]+) "
                        r"examples/second")
INPUT_RATE = re.compile(r"([\d.]+) images/second from this worker")
CLASSES = 10


def inline_folder_source(ctx):
    """python_source: python_loader's folder reader with no process pool:
    every image decoded in the generator's own thread."""
    from official_bench.data.feeds import python_loader
    ds = ctx.config
    return python_loader.folder_batches(
        ds.data_dir, ds.split, ctx.batch_size, ctx.image_size,
        ctx.num_channels, ctx.image_dtype, ctx.is_training, ctx.seed,
        ctx.input_pipeline_id, ctx.num_input_pipelines, workers=0)


def write_data(root: str, count: int):
    """(folder root, records dir): the same JPEGs twice."""
    from PIL import Image

    from official_bench.data.build.example_proto import classic_example
    from official_bench.runtime.keras_setup import tf
    rng = np.random.default_rng(0)
    folder, records_dir = os.path.join(root, "folder"), \
        os.path.join(root, "records")
    os.makedirs(records_dir)
    shards = 4
    writers = [tf.io.TFRecordWriter(os.path.join(
        records_dir, f"train-{s:05d}-of-{shards:05d}")) for s in range(shards)]
    for i in range(count):
        w, h = (96, 72) if i % 2 else (72, 96)
        base = rng.integers(0, 256, (4, 5, 3)).astype(np.uint8)
        smooth = np.asarray(Image.fromarray(base).resize((w, h),
                                                         Image.BICUBIC),
                            np.float32)
        pixels = np.clip(smooth + rng.normal(0, 15, (h, w, 1)), 0,
                         255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, "JPEG", quality=90)
        label = i % CLASSES
        class_dir = os.path.join(folder, "train", f"c{label:02d}")
        os.makedirs(class_dir, exist_ok=True)
        with open(os.path.join(class_dir, f"{i:05d}.jpg"), "wb") as f:
            f.write(buf.getvalue())
        writers[i % shards].write(classic_example(buf.getvalue(), label + 1,
                                                  h, w))
    for writer in writers:
        writer.close()
    return folder, records_dir


def _env():
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("TF_CONFIG", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [REPO, HERE] + [p for p in env.get("PYTHONPATH", "").split(
            os.pathsep) if p])
    return env


def _spawn(args, ready=None, timeout=120):
    """A helper process; waits for a `ready` line when given."""
    proc = subprocess.Popen([sys.executable, *args], cwd=REPO, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    if ready:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line or ready in line:
                break
    return proc


def _stop(procs):
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def sources(folder, records_dir, size, batch):
    """name -> (train_dataset overrides, helper starter)."""
    def producers(n):
        def start(port):
            return [_spawn(["-m", "official_bench.data.feeds.zmq_producer",
                            "--connect", f"tcp://127.0.0.1:{port}",
                            "--folder", folder, "--workers", "1",
                            "--batch_size", str(batch), "--image_size",
                            str(size), "--num_classes", str(CLASSES),
                            "--name", f"p{i}", "--seed", str(i)])
                    for i in range(n)]
        return start

    def service(n):
        def start(port):
            procs = [_spawn(["-m", "official_bench.data.feeds.service",
                             "--dispatcher", "--port", str(port)],
                            ready="ready on port")]
            for _ in range(n):
                procs.append(_spawn(
                    ["-m", "official_bench.data.feeds.service", "--worker",
                     "--dispatcher_address", f"127.0.0.1:{port}", "--port",
                     str(free_ports(1)[0])], ready="ready on port"))
            return procs
        return start

    def zmq(port):
        return {"builder": "zmq",
                "zmq_endpoints": [f"tcp://127.0.0.1:{port}"]}

    def svc(port):
        return {"builder": "service", "data_dir": records_dir,
                "data_service_address": f"127.0.0.1:{port}"}
    none = None
    return {
        "synthetic device": (lambda p: {"synthetic_location": "device"},
                             none),
        "synthetic host": (lambda p: {}, none),
        "records": (lambda p: {"builder": "records",
                               "data_dir": records_dir}, none),
        "records uint8": (lambda p: {"builder": "records",
                                     "data_dir": records_dir,
                                     "transfer_uint8": True,
                                     "mean_subtract": True,
                                     "standardize": True}, none),
        "records norm": (lambda p: {"builder": "records",
                                    "data_dir": records_dir,
                                    "mean_subtract": True,
                                    "standardize": True}, none),
        "python generator": (lambda p: {
            "builder": "python", "data_dir": folder,
            "python_source": "input_sources:inline_folder_source"}, none),
        "python pool": (lambda p: {
            "builder": "python", "data_dir": folder,
            "python_source": "official_bench.data.feeds.python_loader:"
                             "folder_source"}, none),
        "zmq 1": (zmq, producers(1)),
        "zmq 2": (zmq, producers(2)),
        "service 1": (svc, service(1)),
        "service 2": (svc, service(2)),
    }


def config(train_dataset, size, batch, steps, log_steps):
    common = {"image_size": size, "num_classes": CLASSES,
              "batch_size": batch, "num_examples": 10 ** 6}
    return {
        "mode": "train",
        "runtime": {"distribution_strategy": "one_device", "num_gpus": 0},
        "model": {"name": "resnet_cifar", "model_params": {"depth": 8},
                  "learning_rate": {"name": "constant", "initial_lr": 0.05,
                                    "warmup_epochs": 0}},
        "train_dataset": dict(common, **train_dataset),
        "validation_dataset": dict(common, num_examples=batch),
        "train": {"epochs": 1, "steps": steps,
                  "time_history": {"log_steps": log_steps,
                                   "progress_seconds": 3600}},
        "evaluation": {"skip_eval": True},
    }


def _run(argv, pattern, timeout):
    r = subprocess.run(argv, cwd=REPO, env=_env(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    m = pattern.search(r.stdout)
    if r.returncode != 0 or not m:
        tail = "\n".join(r.stdout.splitlines()[-6:])
        print(f"  failed (exit {r.returncode}):\n{tail}", flush=True)
        return None
    return float(m.group(1))


def measure(name, overrides, start, args, tmp):
    port = free_ports(1)[0]
    procs = start(port) if start else []
    try:
        cfg = json.dumps(config(overrides(port), args.image_size, args.batch,
                                args.steps, args.steps // 3))
        model_dir = os.path.join(tmp, name.replace(" ", "_"))
        train = _run(trainer_argv(sys.executable, model_dir=model_dir,
                                  params_override=cfg), TRAIN_RATE, 900)
        inputs = None
        if name != "synthetic device":  # nothing is fed per step
            inputs = _run([sys.executable, "-m",
                           "official_bench.data.input_bench",
                           f"--params_override={cfg}",
                           f"--seconds={args.seconds}"], INPUT_RATE, 600)
        return train, inputs
    finally:
        _stop(procs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=90,
                   help="training steps of each trainer run, logged in "
                        "intervals of steps // 3 (default 90)")
    p.add_argument("--seconds", type=float, default=12.0,
                   help="seconds each input_bench run pulls the source's "
                        "pipeline alone (default 12)")
    p.add_argument("--image_size", type=int, default=32,
                   help="height and width in pixels of the crops trained "
                        "on (default 32)")
    p.add_argument("--batch", type=int, default=32,
                   help="images a step, on the one device (default 32)")
    p.add_argument("--images", type=int, default=512,
                   help="JPEGs written, both as a folder and as TFRecords "
                        "(default 512)")
    p.add_argument("--only", default="",
                   help="comma-separated source names, as the module doc "
                        "lists them, e.g. 'records,zmq 1' (default: all)")
    args = p.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder, records_dir = write_data(tmp, args.images)
        table = sources(folder, records_dir, args.image_size, args.batch)
        if args.only:
            wanted = [w.strip() for w in args.only.split(",")]
            table = {k: v for k, v in table.items() if k in wanted}
        print(f"{args.images} JPEGs 96x72/72x96; resnet_cifar-8, "
              f"{args.image_size}x{args.image_size}, batch {args.batch}, "
              f"one_device float32, {args.steps} steps; input alone "
              f"{args.seconds:g} s; {os.cpu_count()} cores", flush=True)
        for name, (overrides, start) in table.items():
            print(f"{name} ...", flush=True)
            results[name] = measure(name, overrides, start, args, tmp)
            print(f"  train {results[name][0]}, input alone "
                  f"{results[name][1]}", flush=True)
    print(f"\n{'source':<18} {'train img/s':>12} {'input alone img/s':>18}")
    for name, (train, inputs) in results.items():
        fmt = lambda v: "failed" if v is None else f"{v:.0f}"  # noqa: E731
        print(f"{name:<18} {fmt(train):>12} "
              f"{'-' if name == 'synthetic device' else fmt(inputs):>18}")
    print(json.dumps({k: {"train": v[0], "input_alone": v[1]}
                      for k, v in results.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
