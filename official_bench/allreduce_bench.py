"""All-reduce bandwidth through the trainer's own strategy and options.

    python -m official_bench.allreduce_bench \\
        --config_file=configs/examples/resnet/imagenet/gpu.yaml \\
        --params_override='runtime.num_gpus=8' --sizes=model,1M,64M

Takes the trainer's flags and config (so mirrored NCCL / hierarchical copy,
multi_worker_mirrored ring / NCCL and Horovod are set up exactly as for
training, on 1, 2 or 4 nodes the same way), all-reduces buffers of the
model's gradient size and of a sweep of sizes, and prints one line per size
and dtype (results/bandwidth.py: time, algbw, busbw as nccl-tests defines
them). The chief writes them to model_dir/allreduce.json (with
model_parameters, the gradient's element count, when 'model' was measured:
that size is all-reduced as the optimizer does it, one tensor per trainable
weight in one batched call, so per-tensor costs are in its time;
the extractor's scaling model uses that size), the other processes to
allreduce_{task}.json. The run scripts run it with BENCH=allreduce.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import List

from absl import app, flags, logging

from official_bench.contracts import exit_status
from official_bench import classifier_trainer  # noqa: F401 (its flags)
from official_bench.results import bandwidth

FLAGS = flags.FLAGS
flags.DEFINE_string("sizes", "model,64K,1M,16M",
                    "Comma list of buffer sizes: 'model' (the configured "
                    "model's gradient: its trainable parameters, 4 bytes "
                    "each in float32, 2 in float16) or bytes with K/M/G.")
flags.DEFINE_string("dtypes", "float32,float16",
                    "Comma list of dtypes to all-reduce (float32, float16, "
                    "bfloat16).")
flags.DEFINE_integer("iters", 20, "Timed all-reduces per size and dtype "
                     "(each waited for; the median is reported).")
flags.DEFINE_integer("warmup", 3, "Untimed all-reduces before timing.")

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def model_gradient(cfg, dist) -> List[int]:
    """Element counts of the configured model's trainable weights: its
    gradient, tensor by tensor."""
    from official_bench.models import build_model
    with dist.strategy.scope():
        model = build_model(cfg, num_gpus=cfg.runtime.num_gpus)
    return [int(w.shape.num_elements()) for w in model.trainable_weights]


def _timed_allreduce(dist, tensors: List[int], dtype: str):
    """A function running one all-reduce of a list of flat tensors (of
    these element counts), and one that waits for all of them.

    A list is all-reduced in one call, as the optimizer does with the
    gradients (tf.distribute batches it: ReplicaContext.all_reduce of a
    nest; Horovod: one allreduce per tensor, fused by its background
    thread, as DistributedOptimizer does), so the model's gradient is
    timed with the per-tensor costs training pays.
    """
    from official_bench.runtime.keras_setup import tf
    tf_dtype = tf.as_dtype(dtype)
    if dist.traits.horovod_allreduce:
        hvd = dist.hvd
        values = [tf.ones([n], tf_dtype) for n in tensors]

        @tf.function
        def step():
            return [hvd.allreduce(v, op=hvd.Sum) for v in values]

        return step, lambda out: [t[0].numpy() for t in out]
    strategy = dist.strategy
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: [tf.ones([n], tf_dtype) for n in tensors])

    def replica_fn(v):
        ctx = tf.distribute.get_replica_context()
        return ctx.all_reduce(tf.distribute.ReduceOp.SUM, v)

    @tf.function
    def step():
        return strategy.run(replica_fn, args=(values,))

    return step, lambda out: [t[0].numpy() for r in
                              strategy.experimental_local_results(out)
                              for t in r]


def measure(dist, nbytes, dtype: str, iters: int,
            warmup: int) -> bandwidth.AllReduceResult:
    """Seconds of one all-reduce of nbytes (or of a list of tensors with
    these element counts): the median over `iters` calls, each timed until
    its results are read back.

    Each call is waited for before the next starts, as in training, where
    compute separates one step's all-reduce from the next: calls issued
    back to back overlap their round trips (the next one's messages leave
    while the last one's arrive), which makes a latency-bound all-reduce
    look faster than it is inside a training step.
    """
    tensors = list(nbytes) if isinstance(nbytes, (list, tuple)) else \
        [max(1, nbytes // DTYPE_BYTES[dtype])]
    step, wait = _timed_allreduce(dist, tensors, dtype)
    for _ in range(warmup):
        wait(step())
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        wait(step())
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return bandwidth.AllReduceResult(sum(tensors) * DTYPE_BYTES[dtype],
                                     dtype, dist.num_replicas, seconds)


MODEL = None  # plan_sizes' marker for the model's gradient


def plan_sizes(sizes: str) -> List:
    """The sizes to test: bytes, or MODEL for the model's gradient (its
    trainable parameters, in each dtype's width)."""
    from official_bench.config import ConfigError
    out = []
    for item in (s.strip() for s in sizes.split(",") if s.strip()):
        try:
            out.append(MODEL if item == "model" else
                       bandwidth.parse_size(item))
        except ValueError as e:
            raise ConfigError(f"--sizes: {e}") from e
    if not out:
        raise ConfigError(f"--sizes {sizes!r} names no size")
    return out


def run(cfg, sizes: str, dtypes: List[str], iters: int,
        warmup: int) -> List[bandwidth.AllReduceResult]:
    """Set up the runtime as the trainer does, then measure every size."""
    from official_bench import trainer
    from official_bench.runtime import distribute
    replica_devices, cluster = trainer.prepare_runtime(cfg.runtime)
    dist = distribute.build_distribution(cfg.runtime, cluster,
                                         replica_devices)
    planned = plan_sizes(sizes)
    gradient = model_gradient(cfg, dist) if MODEL in planned else None
    parameters = sum(gradient) if gradient else None
    results, entries = [], []
    for size in planned:
        for dtype in dtypes:
            r = measure(dist, gradient if size is MODEL else size, dtype,
                        iters, warmup)
            if dist.logs_throughput:
                logging.info(r.line() + (
                    f" (the model's gradient: {len(gradient)} tensors)"
                    if size is MODEL else ""))
            results.append(r)
            entries.append(dict(r.as_dict(), model=size is MODEL,
                                tensors=len(gradient) if size is MODEL
                                else 1))
    if cfg.model_dir:
        from official_bench.contracts.log_tree import allreduce_file_name
        from official_bench.results.run_record import write_run_record
        path = os.path.join(cfg.model_dir,
                            allreduce_file_name(dist.tag, dist.is_chief))
        write_run_record(path, {
            "config": cfg.as_dict(), "kind": "allreduce",
            "strategy": dist.kind, "replicas": dist.num_replicas,
            "workers": dist.num_workers, "is_chief": dist.is_chief,
            "model_parameters": parameters,
            "devices": dist.placement.devices if dist.placement else [],
            "results": entries})
        logging.info("official_bench: all-reduce results written to %s", path)
    return results


def main(argv) -> int:
    if len(argv) > 1:
        print(f"error: unexpected arguments {argv[1:]}; see --help",
              file=sys.stderr)
        return exit_status.CONFIG
    logging.set_verbosity(logging.INFO)
    from official_bench import config as config_lib
    from official_bench.runtime.cluster import ClusterError
    dtypes = [d.strip() for d in FLAGS.dtypes.split(",") if d.strip()]
    bad = [d for d in dtypes if d not in DTYPE_BYTES]
    try:
        if bad or not dtypes:
            raise config_lib.ConfigError(
                f"--dtypes: unknown {', '.join(bad) or '(none)'}; valid: "
                f"{', '.join(DTYPE_BYTES)}")
        plan_sizes(FLAGS.sizes)  # reject bad sizes before TF
        if FLAGS.iters < 1 or FLAGS.warmup < 0:
            raise config_lib.ConfigError(
                f"--iters must be >= 1 and --warmup >= 0, got "
                f"{FLAGS.iters} and {FLAGS.warmup}")
        cfg = classifier_trainer.config_from_flags()
        run(cfg, FLAGS.sizes, dtypes, FLAGS.iters, FLAGS.warmup)
    except config_lib.ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.CONFIG
    except ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.CLUSTER
    return exit_status.OK


def run_main() -> None:
    """Console-script entry (official-bench-allreduce)."""
    app.run(lambda argv: sys.exit(main(argv)))


if __name__ == "__main__":
    run_main()
