"""Helpers writing small benchmark logs for the extractor tests (no tests
here).

The log format is written out literally here rather than taken from
official_bench.extract, so that the tests check the parser against the
contract in docs/design.md and not against itself.
"""

import datetime
import json
import os

BASE_TIME = datetime.datetime(2020, 11, 21, 12, 0, 0)
THREAD = 140234


def absl_prefix(when, level="I"):
    """absl's record prefix:
    'I1121 23:59:40.123456 140234 callbacks.py:88] '."""
    return "%s%02d%02d %s %d callbacks.py:88] " % (
        level, when.month, when.day, when.strftime("%H:%M:%S.%f"), THREAD)


def throughput_line(start, end, eps, seconds, when=None):
    """A TimeHistory line exactly as the contract formats it."""
    text = ("TimeHistory: %.2f seconds, %.2f examples/second between steps "
            "%d and %d" % (seconds, eps, start, end))
    return (absl_prefix(when) if when is not None else "") + text


def run_lines(speeds, log_steps=100, global_batch=128, start=BASE_TIME,
              finished=True, exception=None, first_step=0):
    """Lines of a run whose k-th interval ran at ``speeds[k]`` examples/s.

    The clock advances by each interval's true duration
    (global_batch * log_steps / speed), so the time method can be checked.
    ``exception`` ends the log with a traceback raising that line.
    """
    lines = [absl_prefix(start) + "official_bench: config loaded",
             "Epoch 1/1"]
    when = start
    for k, eps in enumerate(speeds):
        seconds = global_batch * log_steps / eps
        when += datetime.timedelta(seconds=seconds)
        a = first_step + k * log_steps
        lines.append(throughput_line(a, a + log_steps, eps, seconds, when))
    if exception:
        lines += ["Traceback (most recent call last):",
                  '  File "official_bench/trainer.py", line 120, in run',
                  "    history = model.fit(dataset)", exception]
    if finished:
        lines.append(absl_prefix(when) + "official_bench: run finished")
    return lines


def log_path(log_dir, case, batch=128, dtype="fp32", index=1):
    """Where the run scripts put a run's log (docs/design.md layout)."""
    return os.path.join(str(log_dir), case,
                        "rn50_b%d_%s_%d.log" % (batch, dtype, index))


def devices(case):
    """'2n8g' -> 16."""
    nodes, gpus = case[:-1].split("n")
    return int(nodes) * int(gpus)


def write_lines(path, lines):
    """Write lines (newline-terminated) creating directories."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def write_run(log_dir, case, speeds, batch=128, dtype="fp32", index=1, **kw):
    """Write a run's log under log_dir; returns its path."""
    lines = run_lines(speeds, global_batch=batch * devices(case), **kw)
    return write_lines(log_path(log_dir, case, batch, dtype, index), lines)


def environment(**overrides):
    """An environment block like the trainer's result JSON."""
    env = {"python": "3.11.7", "tensorflow": "2.21.0", "tf_keras": "2.21.0",
           "hostname": "node1", "gpu_names": ["NVIDIA A100-SXM4-40GB"] * 2,
           "cuda_version": "12.5", "cudnn_version": "9", "num_workers": 1,
           "num_replicas": 2, "strategy": "mirrored", "dtype": "fp32"}
    env.update(overrides)
    return env


def result_json(intervals, global_batch, num_replicas, env=None):
    """A trainer result JSON (schema official_bench.result/1) as a dict.

    ``intervals``: list of (start, end, examples_per_second); seconds follow.
    """
    items = [{"start_step": a, "end_step": b,
              "seconds": global_batch * (b - a) / eps,
              "examples_per_second": eps} for a, b, eps in intervals]
    speeds = [i["examples_per_second"] for i in items]
    return {"schema": "official_bench.result/1",
            "config": {"train": {"steps": 600}},
            "stats": {"average_examples_per_second": sum(speeds) / len(speeds),
                      "median_examples_per_second":
                          sorted(speeds)[len(speeds) // 2],
                      "global_batch_size": global_batch,
                      "per_replica_batch_size": global_batch // num_replicas,
                      "num_replicas": num_replicas, "log_steps": 100,
                      "warmup_steps": 100, "intervals": items},
            "environment": env if env is not None else environment(
                num_replicas=num_replicas)}


def history_result(rates, warmup=10, model_dir=None):
    """A tiny run's result JSON as the history tests store it: one
    replica, global batch 8, resnet_cifar depth 8 on 16 px, a warm-up
    interval of ``warmup`` steps, then one interval of 10 steps per rate
    in ``rates``; the config's model_dir where given."""
    intervals = [(0, warmup, 5.0)] + [
        (warmup + 10 * k, warmup + 10 * (k + 1), r)
        for k, r in enumerate(rates)]
    data = result_json(intervals, 8, 1, environment(
        num_replicas=1, num_workers=1, dtype="fp32", gpu_names=[]))
    data["stats"]["warmup_steps"] = warmup
    data["config"] = {"model": {"name": "resnet_cifar",
                                "model_params": {"depth": 8}},
                      "train_dataset": {"image_size": 16}}
    if model_dir is not None:
        data["config"]["model_dir"] = model_dir
    return data


def write_json(path, data):
    """Write ``data`` as JSON (or raw text when given a str)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))
    return path
