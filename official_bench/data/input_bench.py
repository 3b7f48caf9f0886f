"""Is the run input-bound? The training input pipeline alone, no model.

    python -m official_bench.data.input_bench --config_file=cfg.yaml \\
        --params_override=... --seconds=30
    official-bench-input-bench --config_file=MODEL_DIR/params.yaml

It takes the trainer's flags that shape the training input (--config_file,
--params_override, --model_type, --dataset, --data_dir, --num_gpus, layered
as the trainer layers them); a run's params.yaml is its whole config. It
builds exactly the training pipeline this process would feed the model
(same builder, config, per-replica batch, input pipeline id from TF_CONFIG
or runtime.worker_hosts/task_index) and pulls elements as fast as it can
for --seconds (or the run's steps, whichever ends first). One "step" is one
element per local replica, as the trainer takes them, so the TimeHistory
lines and progress lines read like the trainer's; the rates are THIS
worker's images/second (run it on every worker and add them up for the
cluster). Compare with the trainer's examples/second per worker: if the
input alone is not clearly faster, the run is input-bound. The elements
stay on the host (no copy to a device), and nothing else competes for the
CPU, so on a CPU-only machine this is an upper bound for what the pipeline
delivers while training.

TensorFlow backend only: a `runtime.backend: jax` config is refused (CONFIG)
naming benchmarks/input_workers.py, the JAX input workers' benchmark.
"""

from __future__ import annotations

import re
import sys
import time
from typing import Optional

from absl import logging

from official_bench.config import strategies
from official_bench.contracts import exit_status
from official_bench.host.flag_errors import OneLineParser
from official_bench.host.terminal import help_formatter

# --help's exit statuses (contracts/exit_status.help_text).
EXIT_STATUSES = {
    exit_status.OK: "measured",
    exit_status.FAILED: "the pipeline failed (a bad record: its line)",
    exit_status.CONFIG: "bad flags or config, or a JAX config (this tool "
                        "measures tf.data)",
}


def parse_args(argv):
    p = OneLineParser(
        prog="official-bench-input-bench",
        description="Images/second of the training input pipeline alone.",
        epilog=exit_status.help_text(EXIT_STATUSES),
        formatter_class=help_formatter())
    p.add_argument("--config_file", default=None,
                   help="the trainer's YAML config")
    p.add_argument("--params_override", action="append", default=None,
                   help="as the trainer's (repeatable)")
    p.add_argument("--model_type", default="resnet",
                   help="as the trainer's (default resnet)")
    p.add_argument("--dataset", default="imagenet",
                   help="as the trainer's: picks the built-in defaults "
                        "(default imagenet)")
    p.add_argument("--data_dir", default=None,
                   help="as the trainer's: both datasets' data_dir")
    p.add_argument("--num_gpus", type=int, default=None,
                   help="as the trainer's: runtime.num_gpus (the replicas "
                        "this process feeds)")
    p.add_argument("--seconds", type=float, default=30.0,
                   help="how long to pull batches (default 30); it stops "
                        "sooner at the config's train.steps (or its "
                        "epochs' steps)")
    args = p.parse_args(argv)
    if args.seconds <= 0:
        p.error(f"--seconds must be > 0, got {args.seconds}")
    return args


def load_config(args):
    """The config the trainer would build from the same flags (its
    --data_dir and --num_gpus are a top layer, as in config/flags.py), in
    mode train: only the training pipeline is built, so a validation
    dataset the run's --mode did not read is not checked."""
    from official_bench import config as config_lib
    from official_bench.config.flags import flag_overrides
    return config_lib.load_config(
        config_file=args.config_file, params_override=args.params_override,
        overrides=flag_overrides({"mode": "train", "data_dir": args.data_dir,
                                  "num_gpus": args.num_gpus}),
        model_type=args.model_type, dataset=args.dataset)


def local_replicas(cfg, replica_devices) -> int:
    """Replicas this process feeds: one per device where the strategy runs a
    replica on each ((multi-worker) mirrored), one otherwise (one_device,
    off, horovod)."""
    if strategies.traits(
            cfg.runtime.distribution_strategy).replica_per_local_device:
        return len(replica_devices)
    return 1


def bench(cfg, seconds: float, log_fn=logging.info):
    """Pulls the training pipeline for `seconds`; returns ThroughputStats
    of this worker's images/second."""
    from official_bench.config.batching import global_batch_size
    from official_bench.data import factory
    from official_bench.measure import stats, timing
    from official_bench.runtime import (
        cluster as cluster_lib,
        devices as devices_lib,
    )
    from official_bench.runtime.keras_setup import tf

    rt = cfg.runtime
    replica_devices = devices_lib.configure_devices(rt)
    cluster = cluster_lib.resolve_cluster(rt)
    local = local_replicas(cfg, replica_devices)
    workers = cluster.num_workers
    global_batch = global_batch_size(cfg.train_dataset,
                                             workers * local)
    ctx = tf.distribute.InputContext(
        num_input_pipelines=workers, input_pipeline_id=cluster.task_index,
        num_replicas_in_sync=workers * local)
    per_replica = ctx.get_per_replica_batch_size(global_batch)
    dataset = factory.per_replica_dataset(
        cfg.train_dataset, ctx, global_batch, True, rt.seed or 0,
        rt.dataset_num_private_threads)
    th = cfg.train.time_history
    worker_batch = per_replica * local
    total = cfg.train.steps or \
        cfg.train.epochs * (cfg.train_dataset.num_examples // global_batch)
    history = timing.TimeHistory(worker_batch, th.log_steps, total,
                                 progress_seconds=th.progress_seconds,
                                 log_fn=log_fn)
    log_fn("official_bench: input_bench: %s, worker %d of %d, %d local "
           "replica(s) x %d images, for %g s", measured(cfg.train_dataset),
           cluster.task_index, workers, local, per_replica, seconds)
    iterator = iter(dataset)
    history.on_train_begin()
    deadline = time.perf_counter() + seconds
    step = 0
    while step < total and time.perf_counter() < deadline:
        for _ in range(local):
            next(iterator)
        history.on_train_batch_end(step)
        step += 1
    if step < total:  # the deadline: close the run as the trainer would
        history.total_steps = step
        history._progress(history.clock())
    history.on_train_end()
    return stats.compute_stats(
        history.intervals, history.step_times, th.warmup_steps,
        total_steps=step, wall_time=history.wall_time,
        global_batch=worker_batch, num_replicas=local,
        log_steps=th.log_steps)


def measured(ds) -> str:
    """What was measured, so a wrong config shows: builder, data, image
    size."""
    where = f" from {ds.data_dir}" if ds.data_dir else ""
    return (f"{ds.builder} builder{where}, {ds.image_size}x{ds.image_size} "
            "images")


def summary(stats, ds) -> str:
    return (f"official_bench: input_bench: {stats.total_steps} steps, "
            f"{stats.average_examples_per_second:.2f} images/second from this "
            f"worker's input pipeline alone ({measured(ds)}; median "
            f"{stats.median_examples_per_second:.2f}; "
            f"{stats.num_replicas} local replica(s) x "
            f"{stats.per_replica_batch_size} images"
            + ("" if stats.basis == "intervals" else
               "; whole run, warm-up included") + ")")


def backend_refusal(backend: str) -> Optional[str]:
    """Why this tool cannot measure `backend`'s input; None for
    tensorflow, whose tf.data pipeline it builds."""
    if backend == "tensorflow":
        return None
    return (f"input_bench: runtime.backend {backend}: this tool measures "
            "the TensorFlow backend's tf.data pipeline, which a JAX run does "
            "not use; its input workers' benchmark is benchmarks/"
            "input_workers.py in the repository (python benchmarks/"
            "input_workers.py --workers 1,2), or drop runtime.backend=jax "
            "to measure tf.data")


def main(argv: Optional[list] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.use_absl_handler()  # the trainer's line format
    logging.set_verbosity(logging.INFO)
    from official_bench import config as config_lib
    try:
        cfg = load_config(args)
        refusal = backend_refusal(cfg.runtime.backend)
        if refusal:
            raise config_lib.ConfigError(refusal)
        stats = bench(cfg, args.seconds)
    except config_lib.ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return exit_status.CONFIG
    except Exception as e:  # noqa: BLE001 - our pipeline's line, else raise
        ours = re.search(r"official_bench:[^\]\n]*", str(e))
        if not ours:
            raise
        print(f"error: {ours.group(0).strip()}", file=sys.stderr)
        return exit_status.FAILED
    logging.info(summary(stats, cfg.train_dataset))
    return exit_status.OK


def run_main() -> None:
    """Console-script entry (official-bench-input-bench)."""
    sys.exit(main())


if __name__ == "__main__":
    run_main()
