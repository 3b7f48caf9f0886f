"""Where the JAX backend's train step spends its device time: a profiler
trace of the trainer's own step and XLA's optimised HLO of it, read into
Markdown tables by official_bench/measure/kernel_profile.py.

The step is the one the trainer compiles (jax_backend/step.py's `build`,
fed by the same config, model factory, precision, schedule, optimizer and
loss as jax_backend/trainer.py), not benchmarks/jax_vs_bare.py's bare
step: the tables must say where *the suite's* number goes, and the bare
step measured the same speed anyway (BENCHMARKS.md, 0.998-1.000). The
batch is made once on the device (synthetic_location: device), so the
trace holds the step's kernels without the host copy's; warm-up steps run
first, then `--steps` steps are traced (jax.profiler.trace with
create_perfetto_trace, a Chrome-trace JSON), and runtime.xla_flags asks
XLA to dump the train step's module, after optimisation, as text (JAX's
persistent compilation cache is off here: a step it held would be dumped
by no compile).

    python benchmarks/jax_profile.py --dtype bf16 --out OUT/bf16     # GPU
    python benchmarks/jax_profile.py --cpu --dtype fp32 --out /tmp/p  # check
    python benchmarks/jax_profile.py --tables OUT/bf16 OUT/fp16       # again

Each --out folder gets trace/ (the profiler's files), hlo/ (the dump),
meta.json (what ran), profile.json (the numbers) and profile.md (its
tables); --tables reads finished folders again (a parser fixed after a
GPU run reads the same capture) and prints them, two side by side.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from official_bench.measure import kernel_profile  # noqa: E402

GPU_CONFIGS = {"fp32": "gpu.yaml", "fp16": "gpu_fp16.yaml",
               "bf16": "gpu_bf16.yaml"}
CONFIG_DIR = os.path.join(REPO, "configs", "examples", "resnet", "imagenet")
STEP_MODULE = "replica_train"  # jax_backend/step.py's train function
# A model that compiles in seconds on a CPU (--cpu).
CPU_MODEL = ("model.name=resnet_cifar,model.model_params.depth=8,"
             "train_dataset.image_size=16,train_dataset.num_classes=10,"
             "runtime.num_gpus=0")


def config(args, out: str):
    """The run's config: step_config's, the HLO dump asked."""
    flags = [f"--xla_dump_to={os.path.join(out, 'hlo')}",
             "--xla_dump_hlo_as_text",
             f"--xla_dump_hlo_module_re=.*{STEP_MODULE}.*"]
    dump = "runtime.xla_flags=[" + ",".join(f"'{f}'" for f in flags) + "]"
    return step_config(args.dtype, args.batch, args.cpu,
                       ",".join([dump] + ([args.override] if args.override
                                          else [])))


def step_config(dtype: str, batch: int, cpu: bool, override: str = ""):
    """The trainer's config for a step built outside it (here and in
    jax_step_ab.py): the run scripts' GPU YAML for the precision (a tiny
    model on `cpu`), synthetic data on the device, `override` last."""
    from official_bench import config as C
    from official_bench.contracts import dtypes
    parts = ["runtime.backend=jax", "runtime.distribution_strategy=one_device",
             "train_dataset.builder=synthetic", "evaluation.skip_eval=true",
             "train_dataset.synthetic_location=device", "mode=train",
             f"train_dataset.batch_size={batch}",
             f"train_dataset.dtype={dtypes.tf_name(dtype)}",
             CPU_MODEL if cpu else "runtime.num_gpus=1"]
    if override:
        parts.append(override)
    yaml = None if cpu else os.path.join(CONFIG_DIR, GPU_CONFIGS[dtype])
    return C.load_config(yaml, ",".join(parts))


def build_step(cfg, compilation_cache: bool = False):
    """The trainer's steps 1-5 (jax_backend/trainer.py) for `cfg`: the
    compiled train step, its state and one batch on the device. Also the
    in-process A/B's (jax_step_ab.py), which keeps JAX's compilation
    cache on."""
    from jax.sharding import NamedSharding, PartitionSpec

    from official_bench import config as C
    from official_bench.jax_backend import (
        devices,
        keras3,
        precision,
        schedules,
        step as step_lib,
    )
    from official_bench.jax_backend.synthetic import host_batch
    from official_bench.models import build_model
    from official_bench.training import lr_math, objectives
    from official_bench.training.batch_plan import batch_plan
    from official_bench.training.optimizers import build_optimizer
    run = devices.start(cfg.runtime)
    keras, jax = run.keras, run.jax
    # JAX's persistent cache leaves the dump flags out of its key: a step
    # compiled before (the A/B, the run scripts) would come from the cache,
    # and XLA, not compiling, would dump nothing.
    jax.config.update("jax_enable_compilation_cache", compilation_cache)
    keras3.set_seed(keras, 0)
    dtype = C.compute_dtype(cfg)
    precision.set_policy(keras, dtype)
    plan = batch_plan(cfg, len(run.devices))
    model = build_model(cfg, cfg.runtime.num_gpus, keras=keras,
                        backend="jax")
    lr = cfg.model.learning_rate
    schedule = schedules.build_schedule(keras, lr_math.schedule_of(
        lr, plan.global_batch, plan.total_steps))
    optimizer = precision.wrap_optimizer(
        keras, build_optimizer(cfg.model.optimizer, schedule, keras), dtype)
    optimizer.build(model.trainable_variables)
    _name_the_update(jax, optimizer)
    steps = step_lib.build(jax, keras, model, optimizer,
                           objectives.build_loss(cfg, keras), run.mesh,
                           cfg.train_dataset.one_hot,
                           cfg.runtime.loss_scale_update)
    sharding = NamedSharding(run.mesh, PartitionSpec(step_lib.AXIS))
    batch = tuple(jax.make_array_from_process_local_data(sharding, part)
                  for part in host_batch(cfg.train_dataset,
                                         plan.global_batch, 0, 0))
    train = steps.train.lower(steps.state, *batch).compile()
    return jax, train, steps.state, batch, plan.global_batch


def _name_the_update(jax, optimizer) -> None:
    """The optimizer's stateless_apply under kernel_profile.OPTIMIZER_SCOPE,
    so that the HLO op_names of its ops say where they come from (names
    only: the compiled program is the trainer's); a loss-scale optimizer's
    inner one too, which runtime.loss_scale_update select calls itself."""
    for opt in (optimizer, getattr(optimizer, "inner_optimizer", None)):
        if opt is not None:
            opt.stateless_apply = _scoped(jax, opt.stateless_apply)


def _scoped(jax, apply):
    def scoped(*args, **kwargs):
        with jax.named_scope(kernel_profile.OPTIMIZER_SCOPE):
            return apply(*args, **kwargs)
    return scoped


def capture(args) -> dict:
    """Compile, warm up, trace `args.steps` steps; what was measured."""
    os.makedirs(args.out, exist_ok=True)
    cfg = config(args, args.out)
    start = time.perf_counter()
    jax, train, state, batch, global_batch = build_step(cfg)
    ready = time.perf_counter() - start
    loss = None
    for _ in range(args.warmup):
        state, loss = train(state, *batch)
    float(loss)
    trace_dir = os.path.join(args.out, "trace")
    begin = time.perf_counter()
    try:
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            for _ in range(args.steps):
                state, loss = train(state, *batch)
            float(loss)
    except ValueError as e:  # no perfetto copy: its *.trace.json.gz is read
        print(f"note: {e}", file=sys.stderr)
    traced = time.perf_counter() - begin
    return {"dtype": args.dtype, "batch": global_batch, "steps": args.steps,
            "warmup": args.warmup, "device": str(jax.devices()[0]),
            "device_kind": jax.devices()[0].device_kind,
            "jax": jax.__version__, "seconds_to_first_step": ready,
            "traced_seconds": traced, "xla_flags": cfg.runtime.xla_flags}


def find_files(out: str):
    """(trace file, HLO text file) in a --out folder."""
    folder = os.path.join(out, "trace", "plugins", "profile", "*")
    traces = sorted(glob.glob(os.path.join(
        folder, "perfetto_trace.json.gz"))) or sorted(
        glob.glob(os.path.join(folder, "*.trace.json.gz")))
    hlos = sorted(glob.glob(os.path.join(
        out, "hlo", f"*{STEP_MODULE}*after_optimizations.txt*")))
    if not traces or not hlos:
        raise SystemExit(f"{out}: no perfetto_trace.json.gz under trace/ or "
                         f"no *{STEP_MODULE}*after_optimizations.txt(.gz) "
                         "under hlo/ (did the capture finish?)")
    return traces[-1], hlos[-1]


def analyse(out: str) -> kernel_profile.Profile:
    """The capture in `out` (meta.json, the trace, the dump) read into a
    Profile; profile.json and profile.md written beside them."""
    with open(os.path.join(out, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    trace, hlo = find_files(out)
    opener = gzip.open if hlo.endswith(".gz") else open
    with opener(hlo, "rt", encoding="utf-8") as f:
        ops = kernel_profile.parse_hlo(f.read())
    profile = kernel_profile.summarise(
        kernel_profile.load_trace(trace), ops, steps=meta["steps"],
        label=f"{meta['dtype']} b{meta['batch']}",
        module=f"jit_{STEP_MODULE}")
    with open(os.path.join(out, "profile.json"), "w") as f:
        json.dump(profile.as_dict(), f, indent=1)
    with open(os.path.join(out, "profile.md"), "w") as f:
        f.write(kernel_profile.markdown(profile))
    return profile


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="bf16", choices=sorted(GPU_CONFIGS),
                   help="precision; on a GPU also the run scripts' YAML "
                        "for it (default bf16)")
    p.add_argument("--batch", type=int, default=256,
                   help="images a step on the one device (--cpu: at most "
                        "8; default 256)")
    p.add_argument("--steps", type=int, default=5,
                   help="traced steps (default 5)")
    p.add_argument("--warmup", type=int, default=10,
                   help="untraced steps before the traced ones "
                        "(default 10)")
    p.add_argument("--out", help="folder for the trace, dump and tables")
    p.add_argument("--override", help="more of the trainer's "
                                      "--params_override, appended")
    p.add_argument("--cpu", action="store_true",
                   help="a tiny model on the CPU (a check of the flow)")
    p.add_argument("--tables", nargs="+", metavar="OUT",
                   help="read finished --out folders again and print their "
                        "tables (two: side by side, the first as A)")
    args = p.parse_args(argv)
    try:
        return _run(p, args)
    except ValueError as e:  # a trace without device work
        print(f"error: {e}", file=sys.stderr)
        return 1


def _run(p, args) -> int:
    if args.tables:
        print(kernel_profile.markdown(*map(analyse, args.tables)), end="")
        return 0
    if not args.out:
        p.error("--out is needed to capture")  # exits 2
    if args.cpu:
        args.batch = min(args.batch, 8)
    meta = capture(args)
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta), flush=True)
    print(kernel_profile.markdown(analyse(args.out)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
