"""Dotted-key trees: the one walker the CLI, the launcher and
--params_override share."""

import pytest

from official_bench import config
from official_bench.config import dotted_keys


def test_put_makes_parents_and_get_reads_back():
    tree = {}
    dotted_keys.put(tree, "train.time_history.log_steps", 10)
    dotted_keys.put(tree, "train.steps", 5)
    assert tree == {"train": {"time_history": {"log_steps": 10}, "steps": 5}}
    assert dotted_keys.get(tree, "train.time_history.log_steps") == 10
    assert dotted_keys.get(tree, "train.missing.key") is None
    assert dotted_keys.get(tree, "train.steps.deeper") is None


def test_put_below_a_value_names_the_key_and_the_part():
    tree = {"train": {"steps": 5}}
    with pytest.raises(dotted_keys.TreeError,
                       match=r"'train.steps.x'.*'steps'.*int"):
        dotted_keys.put(tree, "train.steps.x", 1)
    with pytest.raises(config.ConfigError, match="train.steps.x"):
        config.parse_params_override("train.steps=5,train.steps.x=1")


def test_deep_merge_layers_without_touching_its_inputs():
    base = {"runtime": {"num_gpus": 8, "task_index": 0}, "mode": "train"}
    top = {"runtime": {"num_gpus": 0}, "extra": {"a": 1}}
    merged = dotted_keys.deep_merge(base, top)
    assert merged == {"runtime": {"num_gpus": 0, "task_index": 0},
                      "mode": "train", "extra": {"a": 1}}
    merged["extra"]["a"] = 2
    merged["runtime"]["task_index"] = 3
    assert top["extra"]["a"] == 1 and base["runtime"]["task_index"] == 0
