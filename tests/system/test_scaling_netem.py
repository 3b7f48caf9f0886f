"""The scaling model against real runs (issue 14 §4): two "hosts" in
network namespaces joined by a veth pair (tests/system/test_launch_netns.py's
fixture), the link limited with `tc ... tbf` to a rate or left at the veth's
own speed. At each rate the run scripts measure the all-reduce of the
model's gradient, the latency of a small all-reduce and the number of small
collectives in the model's train step (BENCH=allreduce), then train on both
hosts; with 1n1g runs as the baseline the extractor predicts the 2n1g
speedup's bounds and prints its verdict at every rate (-s shows them, and
how long each phase took).

Asserted: at every rate the measured speedup is inside the predicted
bounds, a bound counting as met within twice the measurements' run-to-run
spread (each measurement runs RUNS times; extract/scaling.py) or within
the model's validated error (MODEL_ERROR), whichever is larger; the
all-reduce gets faster with the rate; the step's 6 small collectives were
counted from the traced step at every rate (the 6 metric-state reads
beside the 1 gradient pack; official_bench/allreduce/collectives.py) and their
latency measured; the step's communication in training's pattern and the
compute after a wait that long were measured on both workers and charged
(official_bench/allreduce/in_step.py, allreduce/compute_wait.py); at 20 Mbit/s
the communication outweighs a step's compute.

How it got there (BENCHMARKS.md, "Scaling model validated"): the model fell
5-25% below the no-overlap bound until (1) the communication in training's
pattern was taken from the one process that communicated least, not from each
phase's fastest process cycle by cycle, which dropped every stall twice, and
(2) the token bucket's burst was cut from 32 KB to 4 KB: a bucket refilled
during compute made the gradient's all-reduce bimodal (120 or 140-200 ms at 20
Mbit/s). Since then the prediction's error was -0.8% on average (24 rate-runs,
sd 8%), and a single run still moves by up to 10% (a ~10 ms step at unlimited;
one 1n1g run in nine ran 33% slow), which is why a bound is met within the
runs' spread rather than within a fixed 3%. On the 2-vCPU Xeon VM of 2026-11-29
one core's speed moved by 40% within a minute with nothing else running (a
pure-Python loop: 3,700-3,860 rounds per 2 s, then 5,230-5,400), and one of its
last six runs missed the unlimited rate's lower bound by 5% (measured 0.62,
bound 0.79 less 17%; its 2n1g workers computed at 12-13 ms a step beside the
all-reduce, the baseline at 8.3): a rate that misses is measured once more,
baseline and 2n1g back to back, and judged on that; a wrong model misses both
times.

What makes the experiment as fair as it can be on a CPU machine: each
process is pinned to its own core (taskset), the 1n1g baseline to one core
too, so a worker of the two-host run computes as fast as the baseline does
and the link is what differs. The model is small (resnet_cifar depth 8:
78,042 parameters, a 312 KB gradient), so that at 20 Mbit/s its all-reduce
(~0.14 s) outweighs a step's compute (~3.5 ms) forty times over, and
unlimited costs little: the two regimes the bounds must hold in.

What it was cut by (7 min 21 s on a quiet 2-core machine with 3 rates): each
phase is a fresh trainer per run (~10 s of start-up each), so the runs are
what cost. One 1n1g baseline serves both rates (it does not use the link:
copied into each rate's log tree; it was re-run before each rate; it now
runs right before the unlimited rate's 2n1g runs, whose bounds depend on
it, and the 20 Mbit/s ones follow), 2 runs of
each measurement instead of 3 (the verdict's spread still compares runs), no
interpreter check by the launcher (PYTHON_CHECK_TIMEOUT=0: its own tests
cover it), and no 100 Mbit/s rate: with a 3.5 ms step its all-reduce (~33
ms) was communication-dominated as at 20 Mbit/s, the same regime at twice
the cost of the others. At 20 Mbit/s the baseline's counted steps (20-60)
are few, but there T1 nearly cancels: the measured speedup and both bounds
scale with it alike.
"""

import json
import os
import shutil
import subprocess
import time

import pytest

from support.launch_cli import run_together
from support.netns import env_for
from support.run_scripts import PY, REPO

RATES = ("20mbit", None)  # None: the veth's own speed
BATCH = 16
LOG_STEPS, WARMUP = 10, 20
# Steps per rate: about a second of counted 1n1g steps per run where a
# step is short (~3.5 ms here; 40 counted steps would be 0.14 s, where one
# disturbed interval moves the result by a tenth).
STEPS = {"20mbit": 60, None: 400}
# Cycles of the step's communication in training's pattern and of compute
# after a wait (allreduce_bench --compute_wait_cycles): about 3 s each.
CYCLES = {"20mbit": 20, None: 250}
TINY = ",".join([
    "model.name=resnet_cifar", "model.model_params.depth=8",
    "train_dataset.image_size=16", "train_dataset.num_classes=10",
    "validation_dataset.image_size=16", "validation_dataset.num_classes=10",
    "evaluation.skip_eval=true", "runtime.sample_period_seconds=0",
])
# The launcher's check that the trainer's Python imports TensorFlow (~5 s
# per launcher) is tested elsewhere; here the interpreter is this one.
KNOBS = dict(LOG_STEPS=LOG_STEPS, PARAMS_OVERRIDE=TINY,
             PYTHON_CHECK_TIMEOUT=0)
RUNS = 2  # of each measurement: the verdict allows their spread
# How far a bound may be missed even when the two runs agree closely: the
# prediction's error over 24 rate-runs had a mean of -0.8% and an sd of 8%
# (BENCHMARKS.md, "Scaling model validated"); with the verdict's own
# tolerance alone (as little as twice a 2% spread) the test failed 2 times
# in 12 runs on 2026-11-25 and 26, 6% and 14% off a bound.
MODEL_ERROR = 0.15


def tc(ns, dev, rate):
    """Egress of `dev` in `ns` limited to `rate` (both ends get one, so
    both directions are limited); None removes the limit."""
    base = ["ip", "netns", "exec", ns, "tc", "qdisc"]
    subprocess.run(base + ["del", "dev", dev, "root"], capture_output=True)
    if rate:
        # A small burst: a 32 KB bucket refilled while the workers computed
        # and made the next all-reduce 10% faster than the one after it.
        out = subprocess.run(base + ["add", "dev", dev, "root", "tbf",
                                     "rate", rate, "burst", "4kb",
                                     "latency", "400ms"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            pytest.skip(f"tc tbf not possible here: {out.stderr.strip()}")


def both(tmp_path, hosts, log_dir, **knobs):
    """RUNS runs of run_two_node.sh in each namespace, host k pinned to
    core k."""
    commands = []
    for k, ns in enumerate(hosts):
        env = env_for(tmp_path, ns, **KNOBS, **knobs)
        env["LOG_DIR"] = str(log_dir)
        commands.append((
            ["ip", "netns", "exec", ns, "taskset", "-c", str(k % 2),
             "timeout", "-k", "10", "500", "bash",
             os.path.join(REPO, "run_two_node.sh"), str(BATCH), "fp32",
             str(RUNS)], env))
    returncodes, outs = run_together(commands, tmp_path, timeout=540)
    assert returncodes == [0, 0], "\n".join(outs)


def baseline(tmp_path, log_dir, **knobs):
    """RUNS 1n1g runs, on core 0 alone."""
    env = env_for(tmp_path, "base", **KNOBS, **knobs)
    env["LOG_DIR"] = str(log_dir)
    out = subprocess.run(
        ["taskset", "-c", "0", "bash",
         os.path.join(REPO, "run_single_node.sh"), str(BATCH), "fp32",
         str(RUNS)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=500)
    assert out.returncode == 0, out.stdout + out.stderr


def extract(tree, steps, out_dir):
    """The extractor's scaling model for the tree's 2n1g case."""
    out = subprocess.run(
        [PY, os.path.join(REPO, "extract_tensorflow_logs.py"),
         "--log_dir", str(tree), "--warmup_batches", str(WARMUP),
         "--train_batches", str(steps), "--output_dir", str(out_dir),
         "--no_plot", "--json_only"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["rn50"]["2n1g"]["scaling_model"]


def inside(m):
    """The issue's check: the measured speedup is inside the bounds,
    within the verdict's tolerance (twice the runs' spread, at least 3%)
    or, where the two runs agreed more closely than the model is
    accurate, within MODEL_ERROR."""
    tolerance = max(m["tolerance"], MODEL_ERROR)
    return m["lower"] * (1 - tolerance) <= m["measured"] <= \
        m["upper"] * (1 + tolerance)


@pytest.mark.slow
@pytest.mark.serial  # it measures speedups: nothing else may run
@pytest.mark.multiworker
def test_measured_speedup_inside_predicted_bounds(tmp_path, two_hosts):
    if shutil.which("tc") is None or shutil.which("taskset") is None:
        pytest.skip("needs tc (iproute2) and taskset (util-linux)")
    tag = two_hosts[0][:-1]
    devs = (f"{tag}va", f"{tag}vb")
    took = {}
    case = os.path.join("tensorflow", "resnet50", f"bz{BATCH}")

    def timed(name, fn, *args, **kwargs):
        start = time.monotonic()
        fn(*args, **kwargs)
        took[name] = time.monotonic() - start

    def limit(rate):
        for ns, dev in zip(two_hosts, devs):
            tc(ns, dev, rate)

    def two_node(rate, logs, again=False):
        """The rate's 2n1g runs into `logs`, after one baseline for every
        rate (long enough for the longest window) when none was run yet:
        right before the last rate's runs, the one whose bounds depend on
        the 1-device step (at 20 Mbit/s T1 nearly cancels)."""
        base = tmp_path / ("baseline-again" if again else "baseline")
        label = " again" if again else ""
        if not base.exists():
            timed(f"1n1g baseline{label}", baseline, tmp_path, base,
                  STEPS=max(STEPS.values()))
        timed(f"{rate or 'unlimited'} 2n1g{label}", both, tmp_path,
              two_hosts, logs, STEPS=STEPS[rate])
        return base

    trees = {}
    for rate in RATES:
        limit(rate)
        logs = tmp_path / f"rate-{rate or 'unlimited'}"
        timed(f"{rate or 'unlimited'} all-reduce", both, tmp_path, two_hosts,
              logs, BENCH="allreduce",
              ALLREDUCE_ARGS="--sizes=model --dtypes=float32 --iters=20 "
              f"--compute_wait_cycles={CYCLES[rate]}")
        if rate == RATES[-1]:
            two_node(rate, logs)
        trees[rate] = logs / case
    for rate in RATES[:-1]:  # after the baseline, which they share
        limit(rate)
        two_node(rate, tmp_path / f"rate-{rate or 'unlimited'}")
    models = {}
    for rate in RATES:
        shutil.copytree(tmp_path / "baseline" / case / "1n1g",
                        trees[rate] / "1n1g")
        models[rate] = extract(trees[rate], STEPS[rate],
                               tmp_path / "result" / str(rate))
    # A rate outside its bounds is measured once more, the baseline right
    # before its 2n1g runs (the all-reduce measurements kept; unlimited
    # first, whose bounds depend on the baseline), and judged
    # on that: on a 2-vCPU VM one core's speed moved by 40% within a
    # minute while nothing else ran (docs/testing.md), and the baseline
    # and a rate's 2n1g runs are minutes apart. A model that is wrong
    # misses twice.
    missed = {}
    for rate in [r for r in reversed(RATES) if not inside(models[r])]:
        limit(rate)
        logs = tmp_path / f"again-{rate or 'unlimited'}"
        shutil.copytree(trees[rate] / "2n1g", logs / case / "2n1g",
                        ignore=shutil.ignore_patterns("rn50_*"))
        base = two_node(rate, logs, again=True)
        shutil.copytree(base / case / "1n1g", logs / case / "1n1g")
        missed[rate] = models[rate]
        models[rate] = extract(logs / case, STEPS[rate],
                               tmp_path / "result-again" / str(rate))
    report = "\n".join(f"{r or 'unlimited'} (tolerance "
                       f"{m['tolerance']:.0%}): {m['explanation']}"
                       for r, m in models.items())
    report += "".join(f"\n{r or 'unlimited'}, first measurement (missed: "
                      f"measured again): {m['explanation']}"
                      for r, m in missed.items())
    report += "\nphases: " + ", ".join(f"{k} {v:.0f} s"
                                       for k, v in took.items())
    print(report)
    # The link is what the rates change: the all-reduce gets faster.
    times = [models[r]["allreduce_ms"] for r in RATES]
    assert all(a > b for a, b in zip(times, times[1:])), report
    # The count comes from the traced step, and the latency was measured.
    for rate, m in models.items():
        assert m["small_collectives"] == 6, report
        assert m["latency_ms"] > 0, report
    # At 20 Mbit/s the communication outweighs a step's compute: a model
    # without it (speedup 2) would be far off.
    slow = models[RATES[0]]
    assert slow["allreduce_ms"] + slow["small_collectives"] * \
        slow["latency_ms"] > slow["compute_ms"], report
    # The all-reduce benchmark timed the step's communication in
    # training's pattern and the model's compute after a wait that long,
    # on both workers (the run scripts carry both to the extractor, which
    # charges them): the gap is the in-step A + k L.
    for rate, m in models.items():
        wait = m["compute_wait"]
        assert wait is not None and wait["measured_penalty"] > 0, report
        assert m["allreduce_in_step_ms"] > 0 and \
            m["small_in_step_ms"] > 0, report
        # (medians over the runs: of the sums, against the sum of medians)
        assert wait["gap_ms"] == pytest.approx(
            m["allreduce_in_step_ms"] + m["small_in_step_ms"],
            rel=0.15), report
        assert "on average between compute steps as in training" in \
            m["explanation"], report
        assert "compute after a %.1f ms wait" % wait["gap_ms"] in \
            m["explanation"], report
    # The test: at every rate the measured speedup is inside the
    # bounds (inside(), above).
    for rate, m in models.items():
        assert m["run_spread"] > 0, report  # RUNS runs were compared
        assert inside(m), report
        if m["tolerance"] >= MODEL_ERROR:
            assert m["verdict"] == "inside", report
