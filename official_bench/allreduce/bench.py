"""All-reduce bandwidth through the trainer's own strategy and options.

The trainer's flags and config set up the strategy exactly as for training
(mirrored, multi_worker_mirrored, Horovod; 1, 2 or 4 nodes), so the
all-reduce measured is the one training pays: buffers of the model's
gradient size and a sweep of sizes (allreduce/bandwidth.py), and with
'model' what the scaling model charges a step (allreduce/collectives.py,
compute_wait.py, in_step.py). What it prints and writes is its --help
(USAGE below) and docs/allreduce.md. The run scripts run it with
BENCH=allreduce.
"""

from __future__ import annotations

import os
import statistics
import sys
import textwrap
import time
from typing import Callable, List, Optional, Tuple

from absl import app, flags, logging

from official_bench.allreduce import bandwidth
from official_bench.config import flags as trainer_flags  # the trainer's flags
from official_bench.contracts import exit_status

# --help's text: the command, what is measured, what is written.
USAGE = """All-reduce bandwidth through the trainer's own strategy and options.

    python -m official_bench.allreduce.bench \\
        --config_file=configs/examples/resnet/imagenet/gpu.yaml \\
        --params_override='runtime.num_gpus=8' --sizes=model,1M,64M

Takes the trainer's flags and config (so mirrored NCCL / hierarchical copy,
multi_worker_mirrored ring / NCCL and Horovod are set up exactly as for
training, on 1, 2 or 4 nodes the same way), all-reduces buffers of the
model's gradient size and of a sweep of sizes, and prints one line per size
and dtype (allreduce/bandwidth.py: time, algbw, busbw as nccl-tests defines
them). The chief writes them to model_dir/allreduce.json (with
model_parameters, the gradient's element count, when 'model' was measured:
that size is all-reduced as the optimizer does it, one tensor per trainable
weight in one batched call, so per-tensor costs are in its time;
the extractor's scaling model uses that size), the other processes to
allreduce_{task}.json. With 'model', the model is set up and compiled by
the trainer's own code, and two more numbers go in for the scaling model:
the small collectives one train step issues (counted in the traced Keras
train step, allreduce/collectives.py) and a 4-byte all-reduce's latency (a
result row with "latency": true and "per_step": that count). And one more
(--compute_wait_cycles): the step's communication timed in training's
pattern, each gradient all-reduce and its small collectives followed by a
compute step (allreduce/in_step.py), and the model's step on this process's
first device alone, after a wait that long and back to back, side by side
(allreduce/compute_wait.py); both go in the record's "compute_after_wait",
and the scaling model charges them in its no-overlap bound. The run scripts
run it with BENCH=allreduce.
"""

# --help's exit statuses (contracts/exit_status.help_text).
EXIT_STATUSES = {
    exit_status.OK: "every size measured",
    exit_status.FAILED: "a buffer of --sizes does not fit on the devices",
    exit_status.CONFIG: "bad flags or config",
    exit_status.CLUSTER: "a cluster (TF_CONFIG, worker hosts) that cannot "
                         "be used",
}

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
flags.DEFINE_integer("compute_wait_cycles", 20,
                     "With 'model' in --sizes: cycles of timing the step's "
                     "communication in training's pattern (gradient "
                     "all-reduce, small collectives, one compute step), "
                     "then as many of the model's step on one device after "
                     "a wait that long and back to back (the scaling "
                     "model's communication and compute penalty); 0 skips "
                     "both.")

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def _latency_entry(dist, counts, iters: int, warmup: int):
    """The result entry of a 4-byte all-reduce's latency (LATENCY_CHAIN of
    them chained in one call, seconds per all-reduce), with per_step: the
    small collectives one train step of the configured model issues (None
    where they were not counted)."""
    r = measure(dist, 4, "float32", iters, warmup, chain=LATENCY_CHAIN)
    per_step = counts.small if counts else None
    if dist.logs_throughput:
        logging.info(
            "AllReduce latency: %d bytes float32 over %d replicas: %.3f ms "
            "per all-reduce (%d chained in one call); one train step of the "
            "model issues %s small and %s large collective ops",
            r.nbytes, r.ranks, r.seconds * 1e3,
            LATENCY_CHAIN, "?" if per_step is None else per_step,
            counts.large if counts else "?")
    return dict(r.as_dict(), model=False, tensors=1, latency=True,
                chain=LATENCY_CHAIN, per_step=per_step)


def _timed_allreduce(dist, tensors: List[int], dtype: str, chain: int = 1):
    """A function running one all-reduce of a list of flat tensors (of
    these element counts), and one that waits for it.

    A list is all-reduced in one call, as the optimizer does with the
    gradients (tf.distribute batches it: ReplicaContext.all_reduce of a
    nest; Horovod: one allreduce per tensor, fused by its background
    thread, as DistributedOptimizer does), so the model's gradient is
    timed with the per-tensor costs training pays. With chain > 1 the call
    runs `chain` all-reduces one after the other, each of the last one's
    result (a latency measurement: the call's own overhead is shared).
    The function returns one scalar that depends on every result, so the
    wait reads back one value, not each tensor (29 eager reads cost as much
    as the all-reduce of a small model's gradient on a loaded core).
    """
    from official_bench.runtime.keras_setup import tf
    tf_dtype = tf.as_dtype(dtype)

    def checksum(reduced):
        return tf.add_n([t[0] for t in reduced])

    if dist.traits.horovod_allreduce:
        from official_bench.runtime.horovod_backend import collectives
        hvd = collectives()

        @tf.function
        def step():
            # made in the graph: Horovod names its op after the input
            # tensor, which a captured eager tensor does not have
            reduced = [tf.ones([n], tf_dtype) for n in tensors]
            for _ in range(chain):
                reduced = [hvd.allreduce(v, op=hvd.Sum) for v in reduced]
            return checksum(reduced)

        return step, lambda out: out.numpy()
    strategy = dist.strategy
    # The buffers are variables: an all-reduce of tensors made in the graph
    # (tf.ones) is constant-folded by grappler where it reduces with add_n
    # (ReductionToOneDevice on CPU replicas, hierarchical copy), and every
    # size then "took" the same 0.4 ms.
    with strategy.scope():
        buffers = [tf.Variable(tf.ones([n], tf_dtype), trainable=False)
                   for n in tensors]

    def replica_fn():
        ctx = tf.distribute.get_replica_context()
        reduced = [tf.identity(v) for v in buffers]
        for _ in range(chain):
            reduced = ctx.all_reduce(tf.distribute.ReduceOp.SUM, reduced)
        return checksum(reduced)

    @tf.function
    def step():
        return strategy.run(replica_fn)

    return step, lambda out: [t.numpy() for t in
                              strategy.experimental_local_results(out)]


def buffer(size, dtype: str) -> Tuple[List[int], int]:
    """(the tensors' element counts, their bytes) of one buffer: `size`
    bytes as one tensor, or a list of element counts (the gradient)."""
    width = DTYPE_BYTES[dtype]
    tensors = list(size) if isinstance(size, (list, tuple)) else \
        [max(1, size // width)]
    return tensors, sum(tensors) * width


def measure(dist, size, dtype: str, iters: int, warmup: int,
            chain: int = 1) -> bandwidth.AllReduceResult:
    """Seconds of one all-reduce of a buffer (see `buffer`): the median
    over `iters` calls, each timed until its result is read back; with
    chain > 1, a call's time / chain.

    Each call is waited for before the next starts, as in training, where
    compute separates one step's all-reduce from the next: calls issued
    back to back overlap their round trips (the next one's messages leave
    while the last one's arrive), which makes a latency-bound all-reduce
    look faster than it is inside a training step.
    """
    tensors, nbytes = buffer(size, dtype)
    step, wait = _timed_allreduce(dist, tensors, dtype, chain)
    for _ in range(warmup):
        wait(step())
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        wait(step())
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times) / chain
    return bandwidth.AllReduceResult(nbytes, dtype, dist.num_replicas,
                                     seconds)


LATENCY_CHAIN = 8  # small all-reduces per timed call of the latency row


MODEL = None  # plan_sizes' marker for the model's gradient


def plan_sizes(sizes: str, say: Optional[Callable[[str], None]] = None
               ) -> List:
    """The sizes to test, each once: bytes, or MODEL for the model's
    gradient (its trainable parameters, in each dtype's width). A size
    given twice (model,model; 1M,1048576) is timed once, and `say` is told
    so in one line."""
    from official_bench.config import ConfigError
    out, repeated = [], []
    for item in (s.strip() for s in sizes.split(",") if s.strip()):
        try:
            size = MODEL if item == "model" else bandwidth.parse_size(item)
        except ValueError as e:
            raise ConfigError(f"--sizes: {e}") from e
        if size in out:
            repeated.append(item)
        else:
            out.append(size)
    if not out:
        raise ConfigError(f"--sizes {sizes!r} names no size")
    if repeated and say is not None:
        say(f"official_bench: --sizes {sizes!r} repeats "
            f"{', '.join(map(str, repeated))}; each size is timed once")
    return out


def check_sizes(planned: List, dtypes: List[str]) -> None:
    """ConfigError for a size that is not a whole number of elements of a
    dtype (it would be measured, and reported, as another size)."""
    from official_bench.config import ConfigError
    for size in planned:
        for dtype in dtypes:
            width = DTYPE_BYTES[dtype]
            if size is not MODEL and size % width:
                raise ConfigError(
                    f"--sizes: {size} bytes is not a whole number of "
                    f"{dtype} elements ({width} bytes each); use a multiple "
                    f"of {max(DTYPE_BYTES[d] for d in dtypes)}")


class OutOfMemory(RuntimeError):
    """A buffer of --sizes does not fit on the devices."""


def _measure(dist, size, dtype: str, iters: int, warmup: int):
    """measure(), with an allocation failure as one line naming the size
    (TensorFlow's error is a page of allocator state)."""
    from official_bench.runtime.keras_setup import tf
    try:
        return measure(dist, size, dtype, iters, warmup)
    except (tf.errors.ResourceExhaustedError,
            tf.errors.InvalidArgumentError) as e:
        # A buffer past TensorFlow's 2 GiB graph-constant limit fails to
        # build ("Cannot parse tensor from proto") before any allocation.
        if isinstance(e, tf.errors.InvalidArgumentError) and \
                "Cannot parse tensor" not in str(e):
            raise
        nbytes = buffer(size, dtype)[1]
        devices = ", ".join(dist.placement.devices) if dist.placement \
            else "the devices"
        raise OutOfMemory(
            f"official_bench: --sizes: a buffer of {nbytes} bytes {dtype} "
            f"cannot be made on {devices} (TensorFlow: {type(e).__name__}: "
            "out of memory, or past its 2 GiB limit for a graph constant); "
            "use smaller --sizes") from None


def _setup(cfg, planned, wait_cycles: int = 0):
    """(dist, gradient element counts or None, StepCollectives or None,
    the one-device step to time after a wait or None).

    With the model's size planned, the trainer's own set-up builds the
    strategy and compiles the model (so the gradient and the step's
    collectives are the training run's); otherwise only the strategy.
    With wait_cycles too, the model is compiled a second time on this
    process's first device alone (compute_wait.local_step), under the same
    precision policy.
    """
    from official_bench import config as config_lib
    from official_bench.allreduce import collectives, compute_wait
    from official_bench.runtime import distribute, precision
    from official_bench.training import setup
    replica_devices, cluster = setup.prepare_runtime(cfg.runtime)
    if MODEL not in planned:
        return distribute.build_distribution(cfg.runtime, cluster,
                                             replica_devices), None, None, \
            None
    dtype = config_lib.compute_dtype(cfg)
    policy = precision.set_policy(dtype)
    try:
        # model_dir None: the trainer's set-up writes no params.yaml here.
        local = config_lib.replace_keys(cfg, {"model_dir": None})
        prep = setup.setup_run(local, cluster, replica_devices, dtype,
                               policy)
        gradient = [int(w.shape.num_elements())
                    for w in prep.model.trainable_weights]
        counts = None
        if prep.dist.traits.collectives_in_step_graph:
            counts = collectives.of_train_step(
                prep.model, prep.dist, cfg, prep.plan.global_batch)
        else:
            logging.info("official_bench: collectives per step are counted "
                         "for tf.distribute strategies only, not %s",
                         prep.dist.kind)
        local = compute_wait.local_step(
            cfg, replica_devices, dtype, policy,
            prep.dist.num_replicas) if wait_cycles > 0 else None
    finally:
        precision.reset_policy()
    return prep.dist, gradient, counts, local


def _gather_rows(dist, row: List[float]) -> List[List[float]]:
    """Every process's row of floats (all of one length), process 0 (the
    chief) first: all-gathered through the strategy (Horovod: its
    allgather), so every process holds them all. One process, or
    parameter server (whose workers run no benchmark code): this
    process's alone."""
    from official_bench.runtime.keras_setup import tf
    if dist.num_workers < 2 or dist.traits.remote_replicas:
        return [list(row)]
    mine = tf.constant([row], tf.float32)
    if dist.traits.horovod_allreduce:
        from official_bench.runtime.horovod_backend import collectives
        rows = collectives().allgather(mine).numpy()
    else:
        def replica_fn():
            return tf.distribute.get_replica_context().all_gather(mine, 0)

        gathered = tf.function(
            lambda: dist.strategy.run(replica_fn))()
        rows = dist.strategy.experimental_local_results(gathered)[0].numpy()
        # one row per replica; a worker's replicas share its row
        per = dist.num_replicas // dist.num_workers
        rows = rows[::per]
    return [[float(x) for x in r] for r in rows]


def _gather_pairs(dist, first: List[float], second: List[float]):
    """Every process's (first, second) lists of per-cycle times, the
    chief's first (_gather_rows of both, cut to the shorter length)."""
    n = min(len(first), len(second))
    return [(r[:n], r[n:]) for r in
            _gather_rows(dist, list(first[:n]) + list(second[:n]))]


def _comm_in_step(dist, gradient, counts, local, cycles: int):
    """The step's communication timed in training's pattern
    (allreduce/in_step.py): the gradient's all-reduce, the step's small
    collectives, one compute step of the model, on every process at
    once."""
    from official_bench.allreduce import in_step
    k = counts.small if counts else 0
    gstep, gwait = _timed_allreduce(dist, gradient, "float32")
    sstep, swait = _timed_allreduce(dist, [1], "float32", chain=k) \
        if k else (None, None)
    mine = in_step.measure(
        lambda: gwait(gstep()), (lambda: swait(sstep())) if k else None,
        local, cycles)
    r = in_step.summarize(k, [
        in_step.Timings(g, s) for g, s in
        _gather_pairs(dist, mine.gradient, mine.small)])
    if dist.logs_throughput:
        logging.info(r.line())
    return r


def _compute_wait_entry(dist, local, communication, cycles: int):
    """The record's compute_after_wait: the one-device step after a sleep
    as long as the step's communication in training's pattern
    (communication, an in_step.CommInStep), and back to back, on every
    process at once; the slowest process's after-wait time counts.
    communication goes into the record too, as communication_in_step."""
    from official_bench.allreduce import compute_wait
    gap = communication.seconds
    logging.info("official_bench: timing the model's step on one device "
                 "after a %.1f ms wait and back to back (%d cycles)",
                 gap * 1e3, cycles)
    mine = compute_wait.measure(local, gap, cycles)
    r = compute_wait.summarize(gap, [
        compute_wait.Cycles(a, b) for a, b in
        _gather_pairs(dist, mine.after, mine.back)])
    r.device = dist.placement.devices[0] if dist.placement and \
        dist.placement.devices else ""
    if dist.logs_throughput:
        logging.info(r.line())
    return dict(r.as_dict(), communication_in_step=communication.as_dict())


def run(cfg, sizes: str, dtypes: List[str], iters: int, warmup: int,
        wait_cycles: int = 0) -> List[bandwidth.AllReduceResult]:
    """Set up the runtime as the trainer does, then measure every size;
    with the model's size, also the latency of a small all-reduce, how
    many small collectives the model's train step issues and (wait_cycles
    > 0) its compute after a wait."""
    planned = plan_sizes(sizes, logging.warning)
    dist, gradient, counts, local = _setup(cfg, planned, wait_cycles)
    parameters = sum(gradient) if gradient else None
    results, entries = [], []
    for size in planned:
        for dtype in dtypes:
            r = _measure(dist, gradient if size is MODEL else size, dtype,
                         iters, warmup)
            if dist.logs_throughput:
                logging.info(r.line() + (
                    f" (the model's gradient: {len(gradient)} tensors)"
                    if size is MODEL else ""))
            results.append(r)
            entries.append(dict(r.as_dict(), model=size is MODEL,
                                tensors=len(gradient) if size is MODEL
                                else 1))
    wait = None
    if gradient is not None:
        entries.append(_latency_entry(dist, counts, iters, warmup))
        if local is not None:
            communication = _comm_in_step(dist, gradient, counts, local,
                                          wait_cycles)
            wait = _compute_wait_entry(dist, local, communication,
                                       wait_cycles)
    if cfg.model_dir:
        from official_bench.contracts.log_tree import allreduce_file_name
        from official_bench.contracts.result_json import write_run_record
        path = os.path.join(cfg.model_dir,
                            allreduce_file_name(dist.tag, dist.is_chief))
        write_run_record(path, {
            "config": cfg.as_dict(), "kind": "allreduce",
            "strategy": dist.kind, "replicas": dist.num_replicas,
            "workers": dist.num_workers, "is_chief": dist.is_chief,
            "model_parameters": parameters,
            "step_collectives": counts.as_dict() if counts else None,
            "devices": dist.placement.devices if dist.placement else [],
            "results": entries, "compute_after_wait": wait})
        logging.info("official_bench: all-reduce results written to %s", path)
    return results


def main(argv) -> int:
    refused = trainer_flags.start_main(argv)
    if refused is not None:
        return refused
    from official_bench import config as config_lib
    from official_bench.runtime.cluster import ClusterError
    dtypes = [d.strip() for d in FLAGS.dtypes.split(",") if d.strip()]
    bad = [d for d in dtypes if d not in DTYPE_BYTES]
    try:
        if bad or not dtypes:
            raise config_lib.ConfigError(
                f"--dtypes: unknown {', '.join(bad) or '(none)'}; valid: "
                f"{', '.join(DTYPE_BYTES)}")
        check_sizes(plan_sizes(FLAGS.sizes), dtypes)  # before TF
        if FLAGS.iters < 1 or FLAGS.warmup < 0 or \
                FLAGS.compute_wait_cycles < 0:
            raise config_lib.ConfigError(
                f"--iters must be >= 1, --warmup and --compute_wait_cycles "
                f">= 0, got {FLAGS.iters}, {FLAGS.warmup} and "
                f"{FLAGS.compute_wait_cycles}")
        cfg = trainer_flags.config_from_flags()
        from official_bench.runtime.cluster import resolve_cluster
        resolve_cluster(cfg.runtime, quiet=True)  # before TensorFlow too
        # The model's compute step runs with the trainer's CPU kernels.
        from official_bench.runtime import cpu_kernels
        cpu_kernels.apply(cfg.runtime.cpu_kernels, cfg.runtime.num_gpus)
        run(cfg, FLAGS.sizes, dtypes, FLAGS.iters, FLAGS.warmup,
            FLAGS.compute_wait_cycles)
    except config_lib.ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.CONFIG
    except ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.CLUSTER
    except OutOfMemory as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.FAILED
    return exit_status.OK


def run_main() -> None:
    """Console-script entry (official-bench-allreduce)."""
    usage = USAGE + "\n" + textwrap.fill(
        exit_status.help_text(EXIT_STATUSES), 76)
    if trainer_flags.answer_help(
            sys.argv, usage, ("all-reduce flags", sys.modules[__name__])):
        sys.exit(exit_status.OK)
    app.run(lambda argv: sys.exit(main(argv)),
            flags_parser=trainer_flags.parse_flags)


if __name__ == "__main__":
    run_main()
