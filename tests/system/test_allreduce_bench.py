"""All-reduce bandwidth benchmark: the nccl-tests arithmetic, one process
over 2 logical CPU devices, and 2 multi_worker_mirrored workers on
127.0.0.1."""

import json
import subprocess
import sys

import pytest

from official_bench.allreduce import bandwidth
from support.bandwidth_line import parse_line
from support.helpers import REPO, cli_env, free_ports

TINY = ("runtime.num_gpus=0,model.name=resnet_cifar,"
        "model.model_params.depth=8,train_dataset.image_size=16,"
        "train_dataset.num_classes=10")
# resnet_cifar depth 8, 10 classes, width 1: 78,042 trainable parameters.
TINY_MODEL_BYTES = 4 * 78042


def bench(args, timeout=300, env=None):
    return subprocess.run(
        [sys.executable, "-m", "official_bench.allreduce.bench"] + args,
        cwd=REPO, env=cli_env(env), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=timeout)


def test_bus_bandwidth_is_nccl_tests_definition():
    r = bandwidth.AllReduceResult(nbytes=8_000_000, dtype="float32",
                                  ranks=8, seconds=0.001)
    assert r.algbw == pytest.approx(8.0)
    assert r.busbw == pytest.approx(8.0 * 2 * 7 / 8)
    assert bandwidth.bus_factor(1) == 0.0
    again = parse_line("I1123 x] " + r.line())
    assert (again.nbytes, again.dtype, again.ranks) == (8_000_000,
                                                         "float32", 8)
    assert again.seconds == pytest.approx(0.001)


@pytest.mark.parametrize("text,want", [("4096", 4096), ("64K", 65536),
                                       ("16M", 16 << 20), ("1g", 1 << 30)])
def test_sizes(text, want):
    assert bandwidth.parse_size(text) == want


def test_one_process_two_replicas(tmp_path):
    p = bench([f"--model_dir={tmp_path}", "--sizes=model,64K",
               "--dtypes=float32,float16", "--iters=3", "--warmup=1",
               "--compute_wait_cycles=3",
               f"--params_override={TINY},runtime.distribution_strategy="
               "mirrored,runtime.cpu_devices=2"])
    assert p.returncode == 0, p.stdout[-3000:]
    lines = [parse_line(l) for l in p.stdout.splitlines()]
    lines = [l for l in lines if l]
    assert [(l.nbytes, l.dtype, l.ranks) for l in lines] == [
        (TINY_MODEL_BYTES, "float32", 2), (TINY_MODEL_BYTES // 2,
                                             "float16", 2),
        (65536, "float32", 2), (65536, "float16", 2)]
    data = json.load(open(tmp_path / "allreduce.json"))
    assert data["replicas"] == 2 and data["strategy"] == "mirrored"
    assert len(data["results"]) == 5
    assert data["model_parameters"] == TINY_MODEL_BYTES // 4
    assert [r["model"] for r in data["results"]] == [True, True, False,
                                                     False, False]
    assert all(r["seconds"] > 0 and r["busbw_gbps"] > 0
               for r in data["results"])
    # Mirrored over CPU devices reduces on one device with plain ops: the
    # traced train step holds no collective op, so nothing to charge.
    assert data["step_collectives"] == {"small": 0, "large": 0,
                                        "by_type": {}}
    latency = data["results"][-1]
    assert (latency["latency"], latency["nbytes"], latency["chain"],
            latency["per_step"]) == (True, 4, 8, 0)
    # The step's communication in training's pattern (the float32
    # gradient between compute steps; no small collectives here), then the
    # model's step on one device after a wait that long.
    wait = data["compute_after_wait"]
    in_step = wait["communication_in_step"]
    assert (in_step["small_collectives"], in_step["small_seconds"],
            in_step["cycles"], in_step["processes"]) == (0, 0.0, 3, 1)
    assert in_step["gradient_seconds"] > 0
    assert wait["gap_seconds"] == pytest.approx(in_step["gradient_seconds"])
    assert wait["after_wait_seconds"] > 0 and wait["back_to_back_seconds"] > 0
    assert wait["penalty"] == pytest.approx(
        wait["after_wait_seconds"] / wait["back_to_back_seconds"])
    assert wait["cycles"] == 3
    assert "Compute after wait: " in p.stdout


def test_bad_arguments_are_named(tmp_path):
    p = bench([f"--model_dir={tmp_path}", "--sizes=12X",
               f"--params_override={TINY}"])
    assert p.returncode == 2
    assert "--sizes: size '12X'" in p.stdout
    p = bench([f"--model_dir={tmp_path}", "--dtypes=float64",
               f"--params_override={TINY}"])
    assert p.returncode == 2
    assert "--dtypes: unknown float64; valid: float32, float16, bfloat16" \
        in p.stdout
    p = bench([f"--model_dir={tmp_path}", "--compute_wait_cycles=-1",
               f"--params_override={TINY}"])
    assert p.returncode == 2
    assert "--iters must be >= 1, --warmup and --compute_wait_cycles >= 0, " \
        "got 20, 3 and -1" in p.stdout


@pytest.mark.multiworker
def test_two_workers_on_loopback(tmp_path):
    ports = free_ports(2)
    hosts = ",".join(f"127.0.0.1:{p}" for p in ports)
    procs = [subprocess.Popen(
        [sys.executable, "-m", "official_bench.allreduce.bench",
         f"--model_dir={tmp_path}", "--sizes=model,256K", "--dtypes=float32",
         "--iters=5", "--compute_wait_cycles=5",
         f"--params_override={TINY},runtime.distribution_"
         f"strategy=multi_worker_mirrored,runtime.all_reduce_alg=ring,"
         f"runtime.worker_hosts='{hosts}',runtime.task_index={i},"
         "runtime.peer_timeout_seconds=60"],
        cwd=REPO, env=cli_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True) for i in (0, 1)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=240)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    for out in outs:  # each worker times the same collectives
        lines = [parse_line(l) for l in out.splitlines()]
        assert [(l.nbytes, l.ranks) for l in lines if l] == [
            (TINY_MODEL_BYTES, 2), (262144, 2)]
        assert "one train step of the model issues 6 small and 1 large " \
            "collective ops" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "allreduce.json", "allreduce_worker1.json"]  # chief, then task 1
    data = json.load(open(tmp_path / "allreduce.json"))
    assert data["replicas"] == 2
    # The traced Keras step (tf_keras 2.21, multi_worker_mirrored, loss +
    # 2 metrics): 1 gradient pack, 2 state reads per metric result (loss,
    # accuracy, top-5) (official_bench/allreduce/collectives.py); no log sums:
    # the trainer sets distribute_reduction_method "first" (tf_keras' "auto"
    # added 3 sums of already-global values).
    assert data["step_collectives"] == {
        "small": 6, "large": 1, "by_type": {"CollectiveReduceV2": 7}}
    latency = data["results"][-1]
    assert latency["latency"] and latency["per_step"] == 6
    assert latency["seconds"] > 0
    assert data["devices"] == ["/job:worker/replica:0/task:0/device:CPU:0"]
    # The gradient's all-reduce and the 6 small collectives timed between
    # compute steps on both workers; compute after a wait that long.
    wait = data["compute_after_wait"]
    in_step = wait["communication_in_step"]
    assert (in_step["small_collectives"], in_step["cycles"],
            in_step["processes"]) == (6, 5, 2)
    assert in_step["gradient_seconds"] > 0 and in_step["small_seconds"] > 0
    assert wait["gap_seconds"] == pytest.approx(
        in_step["gradient_seconds"] + in_step["small_seconds"])
    assert "Communication in the step's pattern: gradient all-reduce " \
        in outs[0]
    assert wait["after_wait_seconds"] > 0 and wait["back_to_back_seconds"] > 0
    assert wait["cycles"] == 5
    # both workers' timings reached the chief: the slowest counts
    assert wait["processes"] == 2 and len(wait["per_process"]) == 2
    # (a per-cycle max's median is at least each process's median)
    assert wait["after_wait_seconds"] >= max(
        p["after_wait_seconds"] for p in wait["per_process"])
    assert wait["back_to_back_seconds"] == \
        wait["per_process"][0]["back_to_back_seconds"]
    # no file is written by the second, one-device set-up
    assert not (tmp_path / "params.yaml").exists()


def test_the_time_grows_with_the_buffer_on_cpu_replicas(tmp_path):
    """Mirrored over 2 logical CPU devices reduces with add_n: buffers made
    in the graph (tf.ones) were constant-folded, so 64 KB and 64 MB both
    "took" ~0.4 ms (175 GB/s on 2 cores). Four thousand times the bytes
    must take at least twice as long (18x for 1,000x when quiet; a loaded
    machine stretches the small one's dispatch to 3 ms against 9 ms for
    64 MB); not a speed target, a check that the bytes are moved at all."""
    p = bench([f"--model_dir={tmp_path}", "--sizes=64K,256M",
               "--dtypes=float32", "--iters=5", "--warmup=2",
               "--compute_wait_cycles=0",
               f"--params_override={TINY},runtime.distribution_strategy="
               "mirrored,runtime.cpu_devices=2"])
    assert p.returncode == 0, p.stdout[-3000:]
    small, large = [l for l in map(parse_line, p.stdout.splitlines()) if l]
    assert (small.nbytes, large.nbytes) == (65536, 256 << 20)
    assert large.seconds > 2 * small.seconds, (small, large)
