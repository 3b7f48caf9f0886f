"""The one TF_CONFIG reader: its accepted shapes, every malformed one, and
the trainer and launcher each turning a bad one into their one-line error."""

import json
import random

import pytest

from official_bench.contracts import exit_status
from official_bench.contracts.tf_config import (
    TFConfig,
    TFConfigError,
    parse_tf_config,
)
from support.helpers import TINY_OVERRIDE, cli, without_module_env
from support.launch_cli import script

W2 = ["10.0.0.1:5000", "10.0.0.2:5000"]


def tf(cluster, task):
    return json.dumps({"cluster": cluster, "task": task})


def test_accepted_shapes_and_the_chief_rule():
    got = parse_tf_config(tf({"worker": W2}, {"type": "worker", "index": 1}))
    assert got == TFConfig({"worker": W2}, "worker", 1)
    assert got.chief == ("worker", 0) and not got.is_chief
    assert got.address == "10.0.0.2:5000"
    # A digit string index, as templated Kubernetes manifests write it.
    got = parse_tf_config(tf({"worker": W2}, {"type": "worker", "index": "0"}))
    assert got.task_index == 0 and got.is_chief
    got = parse_tf_config(tf({"chief": ["[::1]:7"], "worker": W2},
                             {"type": "worker", "index": 0}))
    assert got.chief == ("chief", 0) and not got.is_chief
    assert parse_tf_config(tf({"chief": ["[::1]:7"], "worker": W2},
                              {"type": "chief", "index": 0})).is_chief


@pytest.mark.parametrize("jobs", [
    {"worker": W2}, {"chief": ["c:1"], "worker": W2},
    {"chief": ["c:1"], "worker": W2, "ps": ["p:1", "p:2"]},
    {"worker": W2, "ps": ["p:1"]}])
def test_trainer_cluster_and_tf_config_share_the_chief_rule(jobs):
    """runtime.cluster.Cluster (the trainer's view) asks the same rule as
    TFConfig (the launcher's): every task of each cluster agrees."""
    from official_bench.runtime.cluster import Cluster
    chiefs = []
    for job, addresses in jobs.items():
        for index in range(len(addresses)):
            parsed = parse_tf_config(tf(jobs, {"type": job, "index": index}))
            cluster = Cluster(
                workers=list(jobs.get("worker", [])), task_type=job,
                task_index=index,
                extra_jobs={k: v for k, v in jobs.items() if k != "worker"})
            assert cluster.is_chief == parsed.is_chief, (job, index)
            if parsed.is_chief:
                chiefs.append((job, index))
    assert chiefs == [("chief", 0) if "chief" in jobs else ("worker", 0)]


@pytest.mark.parametrize("text, words", [
    ("{not json", "TF_CONFIG is not valid JSON"),
    ("[1, 2]", "TF_CONFIG must be a JSON object"),
    ('"worker"', 'TF_CONFIG must be a JSON object'),
    (json.dumps({"task": {"type": "worker", "index": 0}}),
     "TF_CONFIG cluster must be a non-empty mapping"),
    (tf(None, None), "TF_CONFIG cluster must be a non-empty mapping of job "
                     "-> list of \"host:port\" strings"),
    (tf({}, {"type": "worker", "index": 0}), "cluster must be a non-empty"),
    (tf(["h:1"], {"type": "worker", "index": 0}), 'got ["h:1"]'),
    (tf({"worker": "h:1"}, {"type": "worker", "index": "0"}),
     'TF_CONFIG cluster.worker must be a list of "host:port" strings, '
     'got "h:1"'),
    (tf({"worker": ["h:1", 5]}, {"type": "worker", "index": 0}),
     "TF_CONFIG cluster.worker[1] must be a \"host:port\" string, got 5"),
    (tf({"worker": ["h:1", "h:0"]}, {"type": "worker", "index": 0}),
     "cluster.worker[1] is not host:port or [IPv6]:port (it has a bad port"),
    (tf({"worker": ["::1:5000"]}, {"type": "worker", "index": 0}),
     "[address]:port"),
    (tf({"worker": W2}, None), 'TF_CONFIG task must be a mapping {"type": '
                               'job, "index": n}, got null'),
    (json.dumps({"cluster": {"worker": W2}}), "TF_CONFIG task must be a "
                                              "mapping"),
    (tf({"worker": W2}, ["worker", 0]), 'got ["worker", 0]'),
    (tf({"worker": W2}, {"type": "ps", "index": 0}),
     'TF_CONFIG task.type must name a job of the cluster (worker), got "ps"'),
    (tf({"worker": W2}, {"index": 0}), "task.type must name a job"),
    (tf({"worker": W2}, {"type": "worker"}), "TF_CONFIG task.index is "
                                             "missing"),
    (tf({"worker": W2}, {"type": "worker", "index": "one"}),
     'TF_CONFIG task.index must be an integer (or a string of digits such '
     'as "0"), got "one"'),
    (tf({"worker": W2}, {"type": "worker", "index": 1.0}), "got 1.0"),
    (tf({"worker": W2}, {"type": "worker", "index": True}), "got true"),
    (tf({"worker": W2}, {"type": "worker", "index": "-1"}), 'got "-1"'),
    (tf({"worker": W2}, {"type": "worker", "index": 2}),
     "TF_CONFIG task.index is outside cluster.worker, which has 2 task(s) "
     "(0..1), got 2"),
    (tf({"worker": W2}, {"type": "worker", "index": -1}), "outside"),
    (tf({"worker": W2}, {"type": "worker", "index": "7"}), 'got "7"'),
])
def test_malformed_shapes_name_the_field_and_value(text, words):
    with pytest.raises(TFConfigError) as e:
        parse_tf_config(text)
    assert words in str(e.value)


def _random_value(rng, depth=0):
    """A random JSON value: scalars, strings that look like addresses or
    digits, and nested lists/dicts."""
    kinds = ["null", "bool", "int", "float", "str", "addr", "digits"]
    if depth < 3:
        kinds += ["list", "dict"]
    kind = rng.choice(kinds)
    if kind == "null":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        return rng.randint(-3, 5)
    if kind == "float":
        return rng.uniform(-2, 4)
    if kind == "str":
        return rng.choice(["", "worker", "chief", "ps", "h", "[", "::1"])
    if kind == "addr":
        return rng.choice(["h:1", "[::1]:5", "h:0", "h", "[h]:1", "::1:2"])
    if kind == "digits":
        return str(rng.randint(0, 4))
    if kind == "list":
        return [_random_value(rng, depth + 1)
                for _ in range(rng.randint(0, 3))]
    return {rng.choice(["worker", "chief", "ps", "type", "index"]):
            _random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def _random_tf_config(rng):
    """Random shapes at the cluster, task and index positions."""
    cluster = rng.choice([
        lambda: _random_value(rng),
        lambda: {rng.choice(["worker", "chief", "ps"]):
                 rng.choice([_random_value(rng),
                             [rng.choice(["h:1", "h:2", "[::1]:3"]),
                              _random_value(rng)]])},
        lambda: {"worker": ["h:1", "h:2"]},
        lambda: {"worker": ["h:1", "[::1]:2"], "chief": ["h:3"]},
    ])()
    task = rng.choice([
        lambda: _random_value(rng),
        lambda: {"type": rng.choice(["worker", "chief", _random_value(rng)]),
                 "index": _random_value(rng)},
        lambda: {"type": "worker", "index": rng.choice([0, 1, "1", 2])},
    ])()
    full = {"cluster": cluster, "task": task}
    data = rng.choice([full, full, full, {"cluster": cluster}, {"task": task},
                       _random_value(rng)])
    return json.dumps(data)


def test_seeded_fuzz_only_the_contract_error_comes_out():
    rng = random.Random(20261123)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(300):
        text = _random_tf_config(rng)
        try:
            got = parse_tf_config(text)
        except TFConfigError as e:
            assert str(e).startswith("TF_CONFIG"), (text, e)
            outcomes["error"] += 1
        else:
            assert got.jobs[got.task_type][got.task_index], text
            outcomes["ok"] += 1
    # The fuzz reaches both sides of the contract.
    assert outcomes["ok"] >= 5 and outcomes["error"] > 100, outcomes


TRAINER_CASES = [
    (tf({"worker": "h:1"}, {"type": "worker", "index": "0"}),
     "TF_CONFIG cluster.worker must be a list"),
    (tf(None, None), "TF_CONFIG cluster must be a non-empty mapping"),
]


@pytest.mark.parametrize("tf_config, words", TRAINER_CASES)
def test_trainer_exits_2_with_one_error_line(tmp_path, tf_config, words):
    """Before TensorFlow loads: the CLI runs here where it cannot be
    imported, and still ends with the TF_CONFIG's error."""
    env = without_module_env(tmp_path, "tensorflow", {"TF_CONFIG": tf_config})
    out = cli(["--mode=train", f"--model_dir={tmp_path}",
               f"--params_override={TINY_OVERRIDE},"
               "runtime.distribution_strategy=multi_worker_mirrored"],
              env=env, timeout=120)
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    assert out.returncode == exit_status.CONFIG, out.stdout[-2000:]
    assert lines[-1].startswith("error: ") and words in lines[-1], lines[-3:]
    assert "Traceback" not in out.stdout


@pytest.mark.parametrize("tf_config, words", TRAINER_CASES)
def test_launcher_exits_3_with_one_error_line(tmp_path, tf_config, words):
    out = script("two", tmp_path, "--dry-run", TF_CONFIG=tf_config)
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert out.returncode == exit_status.CLUSTER, out.stderr
    assert lines == [lines[-1]] and lines[-1].startswith(
        "error: run_two_node.sh: TF_CONFIG is not valid: ")
    assert words in lines[-1] and "Traceback" not in out.stderr
