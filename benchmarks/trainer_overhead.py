"""Trainer overhead: official_bench's trainer against a bare tf.function loop.

Issue 2's benchmark: on this machine, the trainer's synthetic-data images/sec
for resnet_cifar and for ResNet-50 at a small image size, against a bare
`@tf.function` training loop of the same model, batch and precision, in the
same process. Target: trainer / bare >= 0.97 (the trainer costs nothing).

What both sides do per step (same work):
  * the model from the project's builder (`models.build_model`) for the same
    resolved config: same layers, L2 weight decay on conv/dense kernels
    (added to the loss), channels_last, float32;
  * SGD with momentum 0.875 and a constant learning rate;
  * categorical crossentropy with label smoothing 0.1 on one-hot labels;
  * the metrics the trainer compiles by default: the loss mean, top-1
    (CategoricalAccuracy) and top-5 (TopKCategoricalAccuracy) are updated in
    the step on both sides (so the ratio measures plumbing, not metrics).
What only the trainer does (what is measured): Keras `fit`, its data
handler and callbacks (TimeHistory, with the default 30 s progress line),
the distribution strategy's `run` and reductions, and the tf.data iterator
of a `distribute_datasets_from_function` pipeline over one repeated
synthetic batch with prefetch. The bare loop feeds one fixed batch that is
already a tensor on the device, and has no strategy.

Timing is the same on both sides: W warm-up steps (the first W/L intervals,
which hold tracing), then N timed steps in intervals of L steps; each
interval ends after reading the last step's loss back to the host (the
trainer's TimeHistory does exactly that). A run's images/sec is the mean of
its post-warm-up interval rates (the trainer's `average_examples_per_second`).
Variants run alternately (rotated order each repeat) and medians are
reported, so drift on a shared machine hits all of them.

    .venv/bin/python benchmarks/trainer_overhead.py  # ~10 min on 2 cores
    .venv/bin/python benchmarks/trainer_overhead.py --quick  # ~3 min, noisier
    .venv/bin/python benchmarks/trainer_overhead.py --configs tiny  # fixed
        per-step cost: a model with next to no compute (diagnostic)
    .venv/bin/python benchmarks/trainer_overhead.py --configs cifar \
        --strategies one_device,one_device:nosampler   # the utilisation
        sampler (runtime.sample_period_seconds, default 1 s) on vs off
"""

from __future__ import annotations

import argparse
import gc
import logging as std_logging
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Dict, List

TARGET = 0.97
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> model, data shape and batch, and (warm-up steps, timed steps,
# log_steps) for a normal and a --quick run.
CONFIGS = {
    "cifar": dict(
        title="resnet_cifar depth 20, 32x32, batch 64, fp32",
        model={"name": "resnet_cifar", "model_params": {"depth": 20}},
        image_size=32, num_classes=10, batch=64,
        steps=(10, 60, 10), quick_steps=(10, 30, 10)),
    "rn50": dict(
        title="ResNet-50 v1.5, 64x64, batch 16, fp32",
        model={"name": "resnet", "model_params": {"depth": 50}},
        image_size=64, num_classes=1000, batch=16,
        steps=(4, 16, 4), quick_steps=(2, 8, 2)),
    # Diagnostic, not in the default set: compute is next to nothing, so the
    # step time is the fixed per-step cost (dispatch, plumbing) in ms.
    "tiny": dict(
        title="diagnostic: resnet_cifar depth 8, 8x8, batch 2, fp32",
        model={"name": "resnet_cifar", "model_params": {"depth": 8}},
        image_size=8, num_classes=10, batch=2,
        steps=(100, 500, 100), quick_steps=(100, 300, 100)),
}
MOMENTUM = 0.875
LABEL_SMOOTHING = 0.1
LR = 0.01  # constant; the value does not change the work per step
SEED = 1


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] + " Prints images/sec per "
        "variant (median over repeats) and the trainer/bare ratio per "
        "config; exit code 0 whatever the ratio (a benchmark, not a test).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Variants: bare (tf.function loop, no strategy), and the "
        "trainer with each --strategies entry (one_device and mirrored over "
        "1 CPU device by default; mirrored is what the CPU smoke config "
        "uses).")
    p.add_argument("--quick", action="store_true",
                   help="1 repeat and fewer steps (~3 min); noisier")
    p.add_argument("--repeats", type=int, default=None,
                   help="alternating repeats per config (default 3; "
                        "--quick: 1)")
    p.add_argument("--configs", default="cifar,rn50",
                   help="comma list of: " + ", ".join(CONFIGS))
    p.add_argument("--strategies", default="one_device,mirrored",
                   help="trainer strategies to compare (off, one_device, "
                        "mirrored); a ':nosampler' suffix runs that "
                        "strategy with the utilisation sampler off "
                        "(runtime.sample_period_seconds=0)")
    p.add_argument("--steps", default=None,
                   help="override warm-up,timed,log_steps for every config, "
                        "e.g. 10,60,10")
    p.add_argument("--fixed-costs", action="store_true",
                   help="instead: measure the per-step cost of each piece "
                        "of plumbing (tf.function call, iterators, Keras "
                        "fit, TimeHistory) on a model with no compute")
    p.add_argument("--flops-cost", action="store_true",
                   help="instead: time the trainer's one-off FLOP count "
                        "(measure/mfu.py: layer shapes, then TensorFlow's "
                        "profiler check) per config, and ResNet-50 at 224")
    p.add_argument("--verbose", action="store_true",
                   help="show the trainer's absl INFO log (TimeHistory lines)")
    args = p.parse_args(argv)
    args.configs = [c for c in args.configs.split(",") if c]
    for c in args.configs:
        if c not in CONFIGS:
            p.error(f"unknown config {c!r}; choose from {', '.join(CONFIGS)}")
    args.strategies = [s for s in args.strategies.split(",") if s]
    for s in args.strategies:
        if s.split(":")[0] not in ("off", "one_device", "mirrored") or \
                s.split(":")[1:] not in ([], ["nosampler"]):
            p.error(f"unsupported strategy {s!r}")
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    if args.steps:
        try:
            w, n, l = (int(v) for v in args.steps.split(","))
        except ValueError:
            p.error("--steps wants three integers: warmup,timed,log_steps")
        if l < 1 or w < l or w % l or n < l or n % l:
            p.error("--steps: warm-up and timed steps must be positive "
                    "multiples of log_steps")
        args.steps = (w, n, l)
    return args


def trainer_config(spec: Dict, strategy: str, steps) -> Dict:
    strategy, _, sampler = strategy.partition(":")
    warmup, timed, log_steps = steps
    data = {"builder": "synthetic", "image_size": spec["image_size"],
            "num_classes": spec["num_classes"], "batch_size": spec["batch"],
            "num_examples": spec["batch"] * (warmup + timed),
            "dtype": "float32", "one_hot": True}
    return {
        "runtime": {"distribution_strategy": strategy, "num_gpus": 0,
                    "seed": SEED, "sample_period_seconds":
                        0 if sampler == "nosampler" else 1.0},
        "model": dict(spec["model"], **{
            "optimizer": {"name": "momentum", "momentum": MOMENTUM},
            "learning_rate": {"name": "constant", "initial_lr": LR,
                              "warmup_epochs": 0, "scale_by_batch_size": 0},
            "loss": {"label_smoothing": LABEL_SMOOTHING}}),
        "train_dataset": data,
        "validation_dataset": dict(data, split="validation"),
        "train": {"epochs": 1, "steps": warmup + timed,
                  "time_history": {"log_steps": log_steps,
                                   "warmup_steps": warmup}},
        "evaluation": {"skip_eval": True},
    }


class Measurement:
    """One run: interval rates after warm-up and CPU time per timed step."""

    def __init__(self, intervals, cpu_marks, warmup, batch):
        self.intervals = [i for i in intervals if i.start_step >= warmup]
        # images/sec as the trainer reports it: mean of interval rates.
        self.rate = statistics.fmean(
            i.examples_per_second for i in self.intervals)
        self.best = max(i.examples_per_second for i in self.intervals)
        # cpu_marks[k]: (process, main thread) CPU seconds when interval k
        # closed.
        first = warmup // (self.intervals[0].end_step -
                           self.intervals[0].start_step)
        steps = self.intervals[-1].end_step - warmup
        self.cpu_ms = self.host_ms = None
        if first >= 1 and len(cpu_marks) == len(intervals):
            a, b = cpu_marks[first - 1], cpu_marks[-1]
            self.cpu_ms = (b[0] - a[0]) / steps * 1e3
            self.host_ms = (b[1] - a[1]) / steps * 1e3
        self.batch = batch


def _cpu_clocks():
    """Process CPU time (all threads) and the calling thread's CPU time.

    The calling thread is the one that runs the training loop: its CPU time
    per step is the host-side cost (Python, dispatch, callbacks, iterator
    plumbing); kernels run on TensorFlow's thread pools.
    """
    return time.process_time(), time.thread_time()


class _IntervalClock(std_logging.Handler):
    """Notes process CPU time when TimeHistory logs an interval.

    Reads the trainer's own log records (as DLPerf's tools read its log);
    nothing in the trainer is patched.
    """

    def __init__(self):
        super().__init__(std_logging.INFO)
        self.cpu_marks: List = []

    def emit(self, record):
        if record.getMessage().startswith("TimeHistory:"):
            self.cpu_marks.append(_cpu_clocks())


def run_trainer(spec, strategy, steps) -> Measurement:
    from absl import logging

    from official_bench import trainer
    clock = _IntervalClock()
    logging.get_absl_logger().addHandler(clock)
    try:
        result = trainer.run(trainer_config(spec, strategy, steps))
    finally:
        logging.get_absl_logger().removeHandler(clock)
    stats = result.stats
    m = Measurement(stats.intervals, clock.cpu_marks, steps[0],
                    spec["batch"])
    # Same statistic as the trainer reports (guards our reading of it).
    assert abs(m.rate - stats.average_examples_per_second) < 1e-6 * m.rate, \
        (m.rate, stats.average_examples_per_second)
    del result
    return m


def run_bare(spec, steps) -> Measurement:
    """A plain @tf.function step over a fixed on-device batch."""
    from official_bench import config as config_lib
    from official_bench.measure.timing import Interval
    from official_bench.models import build_model
    from official_bench.runtime.keras_setup import keras, tf

    warmup, timed, log_steps = steps
    cfg = config_lib.build_config(
        [("trainer_overhead", trainer_config(spec, "off", steps))])
    keras.backend.clear_session()
    keras.utils.set_random_seed(SEED)
    model = build_model(cfg, keras=keras)
    # The trainer's optimizer (training/optimizers.py): fused legacy SGD.
    optimizer = keras.optimizers.legacy.SGD(LR, momentum=MOMENTUM)
    loss_fn = keras.losses.CategoricalCrossentropy(
        label_smoothing=LABEL_SMOOTHING)
    loss_mean = keras.metrics.Mean(name="loss")
    top1 = keras.metrics.CategoricalAccuracy(name="accuracy")
    top5 = keras.metrics.TopKCategoricalAccuracy(k=5, name="top_5_accuracy")

    batch, size, classes = spec["batch"], spec["image_size"], \
        spec["num_classes"]
    gen = tf.random.Generator.from_seed(SEED * 1000003)
    with tf.device("/cpu:0"):
        images = gen.normal((batch, size, size, 3))
        labels = tf.one_hot(
            gen.uniform((batch,), 0, classes, dtype=tf.int32), classes)
    variables = model.trainable_variables

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            probs = model(x, training=True)
            loss = loss_fn(y, probs)
            if model.losses:
                loss = loss + tf.add_n(model.losses)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        loss_mean.update_state(loss)
        top1.update_state(y, probs)
        top5.update_state(y, probs)
        return loss

    intervals: List[Interval] = []
    cpu_marks: List = []
    start = time.perf_counter()
    first = 0
    for step in range(1, warmup + timed + 1):
        loss = train_step(images, labels)
        if step % log_steps == 0:
            float(loss)  # sync: the step's results are on the host
            now = time.perf_counter()
            cpu_marks.append(_cpu_clocks())
            seconds = now - start
            intervals.append(Interval(first, step, seconds,
                                       batch * (step - first) / seconds))
            start, first = now, step
    # Drop the references before the next variant builds its model (a
    # rebinding, not del: the step function closes over these names).
    model = optimizer = train_step = None
    return Measurement(intervals, cpu_marks, warmup, batch)


def machine_info() -> str:
    from official_bench.runtime.keras_setup import keras, tf
    try:
        load = os.getloadavg()
        load = "load average %.2f, %.2f, %.2f" % load
    except OSError:
        load = "load average unknown"
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                             cwd=REPO, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no",
             "official_bench"], cwd=REPO, capture_output=True, text=True,
            timeout=10).stdout.strip()
        if dirty:
            rev += " (+ uncommitted changes in official_bench/)"
    except (OSError, subprocess.SubprocessError):
        rev = "?"
    return (f"{os.cpu_count()} CPUs ({cpu}), "
            f"GPUs visible: {len(tf.config.list_physical_devices('GPU'))}; "
            f"Python {platform.python_version()}, TF {tf.__version__}, "
            f"tf-keras {keras.__version__}; git {rev}; {load}")


def fixed_costs(repeats: int, steps: int) -> None:
    """Per-step cost of each piece of the trainer's plumbing, no compute.

    A Dense 4->10 softmax model (same optimizer, loss and metrics as above)
    makes the step's compute negligible, so what is left is what each layer
    of plumbing costs per step: the tf.function call, the tf.data and
    distributed iterators, Keras fit and the TimeHistory callback.
    """
    from official_bench.measure import timing
    from official_bench.runtime.keras_setup import keras, tf

    x = tf.random.normal((2, 4))
    y = tf.one_hot([1, 2], 10)

    def dataset(ctx=None):
        return tf.data.Dataset.from_tensors((x, y)).repeat().prefetch(
            tf.data.AUTOTUNE)

    def strategy(name):
        if name == "one_device":
            return tf.distribute.OneDeviceStrategy("/cpu:0")
        if name == "mirrored":
            return tf.distribute.MirroredStrategy(
                ["/cpu:0"],
                cross_device_ops=tf.distribute.ReductionToOneDevice())
        return tf.distribute.get_strategy()

    def compiled(st, steps_per_execution=1):
        with st.scope():
            model = keras.Sequential([
                keras.layers.Dense(10, activation="softmax",
                                   input_shape=(4,))])
            model.compile(
                optimizer=keras.optimizers.legacy.SGD(0.0, momentum=MOMENTUM),
                loss=keras.losses.CategoricalCrossentropy(
                    label_smoothing=LABEL_SMOOTHING),
                metrics=[keras.metrics.CategoricalAccuracy(),
                         keras.metrics.TopKCategoricalAccuracy(k=5)],
                steps_per_execution=steps_per_execution)
        return model

    def clocks():
        return time.perf_counter(), time.process_time(), time.thread_time()

    def per_step(a, b):
        return tuple((q - p) / steps * 1e6 for p, q in zip(a, b))

    def timed_loop(fn):
        for _ in range(20):
            out = fn()
        float(out)
        a = clocks()
        for _ in range(steps):
            out = fn()
        float(out)
        return per_step(a, clocks())

    def call_tensors():
        f = tf.function(lambda a, b: a[0, 0] + b[0, 0])
        return timed_loop(lambda: f(x, y))

    def call_iterator(name):
        st = strategy(name)
        it = iter(st.distribute_datasets_from_function(dataset)
                  if name else dataset())

        @tf.function
        def f(i):
            a, b = next(i)
            return st.run(lambda a, b: a[0, 0] + b[0, 0], args=(a, b))
        return timed_loop(lambda: f(it))

    def bare_step():
        model = compiled(strategy(None))
        loss_fn, opt = model.loss, model.optimizer
        mean = keras.metrics.Mean()
        metrics = [keras.metrics.CategoricalAccuracy(),
                   keras.metrics.TopKCategoricalAccuracy(k=5)]

        @tf.function
        def step(a, b):
            with tf.GradientTape() as tape:
                p = model(a, training=True)
                loss = loss_fn(b, p)
            v = model.trainable_variables
            opt.apply_gradients(zip(tape.gradient(loss, v), v))
            mean.update_state(loss)
            for m in metrics:
                m.update_state(b, p)
            return loss
        return timed_loop(lambda: step(x, y))

    def fit(name, callback, steps_per_execution=1):
        st = strategy(name)
        model = compiled(st, steps_per_execution)
        data = st.distribute_datasets_from_function(dataset) if name \
            else dataset()
        cbs = [timing.TimeHistory(2, 100, steps, progress_seconds=30,
                                  log_fn=lambda *a: None)] if callback else []
        model.fit(data, epochs=1, steps_per_epoch=20, verbose=0)  # trace
        a = clocks()
        model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0,
                  callbacks=cbs)
        return per_step(a, clocks())

    rows = [
        ("call tf.function(x, y), trivial body", call_tensors),
        ("call tf.function(dataset iterator)", lambda: call_iterator(None)),
        ("call tf.function(one_device distributed iterator) + run",
         lambda: call_iterator("one_device")),
        ("call tf.function(mirrored distributed iterator) + run",
         lambda: call_iterator("mirrored")),
        ("bare loop: tf.function train step (x, y)", bare_step),
        ("Keras fit, no strategy, tf.data, no callbacks",
         lambda: fit(None, False)),
        ("Keras fit, one_device, distributed data, no callbacks",
         lambda: fit("one_device", False)),
        ("Keras fit, one_device, distributed data, TimeHistory",
         lambda: fit("one_device", True)),
        ("Keras fit, mirrored 1 CPU, distributed data, TimeHistory",
         lambda: fit("mirrored", True)),
        # What the trainer could do (TimeHistory counts one step per
        # callback call today, so it is left out of this row).
        ("Keras fit, one_device, distributed, steps_per_execution=10",
         lambda: fit("one_device", False, 10)),
    ]
    print(f"\n== Fixed per-step costs (Dense 4->10, batch 2: no compute); "
          f"{steps} steps, median of {repeats} repeat(s), microseconds per "
          "step", flush=True)
    results = {name: [] for name, _ in rows}
    for r in range(repeats):
        for name, fn in rows[r % len(rows):] + rows[:r % len(rows)]:
            keras.backend.clear_session()
            results[name].append(fn())
            gc.collect()
    print(f"  {'what':<58} {'wall':>7} {'CPU':>7} {'loop':>7}")
    for name, _ in rows:
        med = [statistics.median(v[k] for v in results[name])
               for k in range(3)]
        print(f"  {name:<58} {med[0]:7.0f} {med[1]:7.0f} {med[2]:7.0f}")
    print("  wall: elapsed; CPU: process CPU time (all threads); loop: CPU "
          "time of the thread running the loop. Compare rows to see what a "
          "layer adds per step; divide by a real step time for its share.")
    print("  load average after: %.2f, %.2f, %.2f" % os.getloadavg())


def flops_cost(configs, repeats: int) -> None:
    """What the trainer's FLOP count costs, once per run, before the first
    step (so never inside a timed interval): the layer-shape count and
    TensorFlow's profiler check (a trace of the forward pass at batch 1),
    timed apart, median of `repeats`, on the configs' models and on
    ResNet-50 at 224."""
    from official_bench import config as config_lib
    from official_bench.measure import flops
    from official_bench.models import build_model
    from official_bench.runtime.keras_setup import keras

    specs = [(CONFIGS[c]["title"], CONFIGS[c]) for c in configs]
    specs.append(("ResNet-50 v1.5, 224x224, fp32", dict(
        CONFIGS["rn50"], image_size=224)))
    print(f"\n== FLOP count cost (median of {repeats}): layer shapes, "
          "TensorFlow's check, forward GMACs")
    for title, spec in specs:
        cfg = config_lib.build_config(
            [("flops_cost", trainer_config(spec, "off", (1, 1, 1)))])
        shapes, check = [], []
        for _ in range(repeats):
            keras.backend.clear_session()
            model = build_model(cfg, keras=keras)
            t0 = time.perf_counter()
            count = flops.count_forward(model)
            t1 = time.perf_counter()
            tf_gflop = flops.tf_cost_analysis(model)
            t2 = time.perf_counter()
            shapes.append(t1 - t0)
            check.append(t2 - t1)
        print(f"  {title:<44} {1e3 * statistics.median(shapes):7.1f} ms "
              f"{1e3 * statistics.median(check):8.1f} ms  "
              f"{count.gmacs:.4f} G (TensorFlow: {tf_gflop / 2:.4f} G)",
              flush=True)
    print("  load average after: %.2f, %.2f, %.2f" % os.getloadavg())


def _fmt(value, digits):
    return "-" if value is None else f"{value:.{digits}f}"


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main(argv=None) -> int:
    args = parse_args(argv)
    from absl import logging
    # INFO reaches our interval clock; the console shows it only if asked.
    logging.set_verbosity(logging.INFO)
    if not args.verbose:
        absl_logger = logging.get_absl_logger()
        absl_logger.propagate = False
        console = std_logging.StreamHandler(sys.stderr)
        console.setLevel(std_logging.WARNING)
        absl_logger.addHandler(console)
    from official_bench.runtime.keras_setup import keras  # noqa: F401

    print("trainer_overhead:", time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    print("command:", " ".join([os.path.relpath(sys.argv[0], REPO)]
                               + sys.argv[1:]))
    print("machine:", machine_info(), flush=True)
    if args.fixed_costs:
        fixed_costs(args.repeats, 300 if args.quick else 1000)
        return 0
    if args.flops_cost:
        flops_cost(args.configs, args.repeats)
        return 0
    variants = ["bare"] + args.strategies
    began = time.perf_counter()
    summary = []
    for name in args.configs:
        spec = CONFIGS[name]
        steps = args.steps or (spec["quick_steps"] if args.quick
                               else spec["steps"])
        print(f"\n== {spec['title']}: warm-up {steps[0]} steps, then "
              f"{steps[1]} timed steps in intervals of {steps[2]}; "
              f"{args.repeats} repeat(s), order rotated each repeat",
              flush=True)
        runs: Dict[str, List[Measurement]] = {v: [] for v in variants}
        for r in range(args.repeats):
            order = variants[r % len(variants):] + variants[:r % len(variants)]
            for v in order:
                t0 = time.perf_counter()
                m = run_bare(spec, steps) if v == "bare" else \
                    run_trainer(spec, v, steps)
                runs[v].append(m)
                gc.collect()
                cpu = (f", CPU {m.cpu_ms:.1f} ms/step, loop thread "
                       f"{m.host_ms:.2f} ms/step") if m.cpu_ms else ""
                print(f"  repeat {r + 1} {v:>10}: {m.rate:8.2f} images/s "
                      f"(best interval {m.best:.2f}{cpu}; "
                      f"{time.perf_counter() - t0:.0f} s with build and "
                      "trace)", flush=True)
        bare = statistics.median(m.rate for m in runs["bare"])
        bare_best = max(m.best for m in runs["bare"])
        print(f"\n  {'variant':<19} {'img/s':>8} {'ms/step':>8} {'ratio':>6} "
              f"{'paired':>6} {'best':>8} {'ratio':>6} {'CPU ms':>7} "
              f"{'loop ms':>7}  runs (img/s)")
        for v in variants:
            med = statistics.median(m.rate for m in runs[v])
            best = max(m.best for m in runs[v])
            cpu = _median(m.cpu_ms for m in runs[v])
            host = _median(m.host_ms for m in runs[v])
            label = "bare tf.function" if v == "bare" else f"trainer {v}"
            cols = ["", "", ""]
            if v != "bare":
                paired = statistics.median(
                    t.rate / b.rate for t, b in zip(runs[v], runs["bare"]))
                cols = [f"{med / bare:.3f}", f"{paired:.3f}",
                        f"{best / bare_best:.3f}"]
                summary.append((spec["title"], v, med, bare, med / bare,
                                paired, best / bare_best))
            print(f"  {label:<19} {med:8.2f} {1e3 * spec['batch'] / med:8.1f} "
                  f"{cols[0]:>6} {cols[1]:>6} {best:8.2f} {cols[2]:>6} "
                  f"{_fmt(cpu, 1):>7} {_fmt(host, 2):>7}  "
                  + ", ".join(f"{m.rate:.2f}" for m in runs[v]))
        print("  img/s: median over repeats of each run's mean interval rate "
              "after warm-up (the trainer's average_examples_per_second); "
              "ratio: trainer median / bare median; paired: median of "
              "per-repeat ratios; best: fastest interval of any repeat (the "
              "least disturbed by other processes) and its ratio; CPU ms: "
              "process CPU time per timed step (all threads); loop ms: CPU "
              "time per step of the thread running the training loop "
              "(host-side cost: Python, dispatch, callbacks, iterator).")
        print("  load average after this config: %.2f, %.2f, %.2f"
              % os.getloadavg(), flush=True)
    print(f"\n== Summary (target trainer/bare >= {TARGET}); "
          f"{time.perf_counter() - began:.0f} s total; "
          f"load average now {'%.2f, %.2f, %.2f' % os.getloadavg()}")
    for title, v, med, bare, ratio, paired, best in summary:
        verdict = "met" if ratio >= TARGET else "NOT met"
        print(f"  {title} | trainer {v}: {med:.2f} vs bare {bare:.2f} "
              f"images/s -> ratio {ratio:.4f} (paired {paired:.3f}, best "
              f"interval {best:.3f}): target {verdict}")
    for title, v, med, *_ in summary:
        off = next((m for t, w, m, *_ in summary
                    if t == title and w == v + ":nosampler"), None)
        if off:
            print(f"  {title} | sampler on ({v}) / off: {med:.2f} / "
                  f"{off:.2f} images/s = {med / off:.4f}")
    print("  On a shared machine wall-clock ratios scatter by more than the "
          "3 % being tested; the CPU ms and loop ms columns (and "
          "--fixed-costs) show the trainer's own cost per step.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
