"""The JAX backend's trainer against a bare jitted train step, side by side.

Both train the same ResNet-50 v1.5 definition (models/resnet.py built with
Keras 3), at the same precision and per-device batch, on a synthetic batch:

  ours  official_bench.trainer.run with runtime.backend jax (its whole
        path: shard_map step, metrics, TimeHistory, sampler, result.json),
        images / time over the counted window;
  bare  one jax.jit of stateless_call + value_and_grad + the same
        optimizer's stateless_apply, batch kept on the device, timed over
        the same number of steps after the same warm-up.

Rounds alternate ours and bare; the ratio ours/bare per round and its
median are printed. With --location both, ours runs with the batch made
once on the device and with it fed from the host every step.

    python benchmarks/jax_vs_bare.py --dtype bf16 --batch 256 --steps 200
    python benchmarks/jax_vs_bare.py --cpu  # a quick check on a CPU
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def config(args, location: str, model_dir: str) -> dict:
    """The trainer's config for one `ours` round."""
    from official_bench.contracts import dtypes
    dtype = dtypes.tf_name(args.dtype)
    data = {"builder": "synthetic", "image_size": args.image_size,
            "num_classes": 1000, "batch_size": args.batch, "dtype": dtype,
            "synthetic_location": location}
    return {
        "runtime": {"backend": "jax", "num_gpus": 0 if args.cpu else 1,
                    "distribution_strategy": "one_device",
                    "sample_period_seconds": 1.0},
        "train_dataset": data,
        "validation_dataset": dict(data, synthetic_location="host"),
        "model": {"name": "resnet", "model_params": {"depth": args.depth},
                  "optimizer": {"name": "momentum", "momentum": 0.875},
                  "loss": {"label_smoothing": 0.1},
                  "learning_rate": {"initial_lr": 0.256, "warmup_epochs": 0,
                                    "examples_per_epoch": 1281167}},
        "train": {"steps": args.warmup + args.steps,
                  "time_history": {"log_steps": args.log_steps,
                                   "warmup_steps": args.warmup}},
        "evaluation": {"skip_eval": True}, "mode": "train",
        "history": {"enabled": False}, "model_dir": model_dir,
    }


def run_ours(args, location: str) -> float:
    from official_bench import trainer
    with tempfile.TemporaryDirectory() as model_dir:
        result = trainer.run(config(args, location, model_dir))
    return result.stats.images_per_second_over_window


class Bare:
    """The bare step: built and compiled once, timed per round."""

    def __init__(self, args):
        from official_bench.jax_backend import keras3
        loaded = keras3.load(0 if args.cpu else 1, 1)
        self.jax, keras = loaded.jax, loaded.keras
        from official_bench.config import DatasetConfig
        from official_bench.contracts import dtypes
        from official_bench.jax_backend import precision
        from official_bench.jax_backend.synthetic import host_batch
        from official_bench.models.resnet import resnet_v15
        dtype = dtypes.tf_name(args.dtype)
        precision.set_policy(keras, dtype)
        model = resnet_v15(args.depth, 1000, args.image_size, keras=keras,
                           input_dtype=dtype)
        opt = precision.wrap_optimizer(
            keras, keras.optimizers.SGD(0.1, momentum=0.875), dtype)
        opt.build(model.trainable_variables)
        loss_fn = keras.losses.CategoricalCrossentropy(label_smoothing=0.1)
        ds = DatasetConfig(image_size=args.image_size, batch_size=args.batch,
                           dtype=dtype)
        x, y = host_batch(ds, args.batch, 0, 0)
        jax, jnp = self.jax, self.jax.numpy
        self.x, self.y = jax.device_put(x), jax.device_put(y)

        def step(state, x, y):
            tv, ntv, ov = state

            def loss(tv):
                out, ntv2, losses = model.stateless_call(
                    tv, ntv, x, training=True, return_losses=True)
                value = loss_fn(y, out) + sum(losses, jnp.zeros(()))
                mapping = list(zip(opt.variables, ov))
                with keras.StatelessScope(state_mapping=mapping):
                    scaled = opt.scale_loss(value) \
                        if hasattr(opt, "scale_loss") else value
                return scaled, (value, ntv2)
            grads, (value, ntv2) = jax.grad(loss, has_aux=True)(tv)
            tv, ov = opt.stateless_apply(ov, grads, tv)
            return (tv, ntv2, ov), value
        self.state = ([v.value for v in model.trainable_variables],
                      [v.value for v in model.non_trainable_variables],
                      [v.value for v in opt.variables])
        self.step = jax.jit(step, donate_argnums=0)
        self.state, loss = self.step(self.state, self.x, self.y)
        float(loss)  # compiled and run once
        self.batch = args.batch

    def run(self, warmup: int, steps: int) -> float:
        loss = None
        for _ in range(warmup):
            self.state, loss = self.step(self.state, self.x, self.y)
        float(loss)
        start = time.perf_counter()
        for _ in range(steps):
            self.state, loss = self.step(self.state, self.x, self.y)
        float(loss)
        return self.batch * steps / (time.perf_counter() - start)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="bf16", choices=("fp32", "fp16", "bf16"),
                   help="precision of both sides (default bf16)")
    p.add_argument("--batch", type=int, default=256,
                   help="images a step on the one device (--cpu: at most "
                        "8; default 256)")
    p.add_argument("--image_size", type=int, default=224,
                   help="synthetic image height and width in pixels (--cpu: "
                        "at most 32; default 224)")
    p.add_argument("--depth", type=int, default=50,
                   help="ResNet v1.5 depth (default 50)")
    p.add_argument("--steps", type=int, default=200,
                   help="timed steps per side and round (default 200)")
    p.add_argument("--warmup", type=int, default=20,
                   help="untimed steps before them (default 20)")
    p.add_argument("--log_steps", type=int, default=20,
                   help="steps per TimeHistory interval of ours "
                        "(default 20)")
    p.add_argument("--rounds", type=int, default=2,
                   help="rounds of ours then bare; medians are printed "
                        "(default 2)")
    p.add_argument("--location", default="device",
                   choices=("device", "host", "both"),
                   help="ours' batch: made once on the device, copied from "
                        "the host every step, or both in turn (default "
                        "device)")
    p.add_argument("--cpu", action="store_true",
                   help="run on the CPU (a check of the script, not a speed)")
    p.add_argument("--json", help="write the numbers to this file")
    args = p.parse_args(argv)
    if args.cpu:
        args.image_size, args.batch = min(args.image_size, 32), \
            min(args.batch, 8)
    locations = ("device", "host") if args.location == "both" \
        else (args.location,)
    bare = Bare(args)
    rows = []
    for r in range(args.rounds):
        row = {"round": r + 1}
        for location in locations:
            row[f"ours_{location}"] = run_ours(args, location)
        row["bare"] = bare.run(args.warmup, args.steps)
        for location in locations:
            row[f"ratio_{location}"] = row[f"ours_{location}"] / row["bare"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {f"median_{k}": statistics.median(r[k] for r in rows)
               for k in rows[0] if k != "round"}
    summary.update(dtype=args.dtype, batch=args.batch,
                   image_size=args.image_size, steps=args.steps,
                   rounds=args.rounds, device=str(bare.jax.devices()[0]))
    print("summary", json.dumps(summary), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rounds": rows, "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
