"""A validated config is frozen (config/frozen.py): a write after
load_config raises naming the key; derived values make a new config."""

import copy
import dataclasses
import pickle

import pytest

from official_bench import config as C


@pytest.mark.parametrize("key,value", [
    ("train_dataset.num_devices", 8),
    ("model_dir", "/elsewhere"),
    ("runtime.horovod.fp16_allreduce", True),
    ("model.learning_rate.initial_lr", 1.0),
])
def test_a_write_after_load_config_raises_naming_the_key(key, value):
    cfg = C.load_config(params_override="train.steps=3")
    *parents, leaf = key.split(".")
    node = cfg
    for part in parents:
        node = getattr(node, part)
    before = getattr(node, leaf)
    with pytest.raises(C.FrozenConfigError) as e:
        setattr(node, leaf, value)
    assert str(e.value) == (
        f"config is frozen after validation: {key}; use config.replace_keys "
        "or dataclasses.replace for a copy with new values")
    assert isinstance(e.value, AttributeError)
    assert getattr(node, leaf) == before
    with pytest.raises(C.FrozenConfigError, match="frozen after validation: "
                       "train.steps;"):
        del cfg.train.steps


def test_configs_are_mutable_until_validated():
    cfg = C.ExperimentConfig()
    cfg.train_dataset.num_devices = 4
    cfg.runtime = C.RuntimeConfig(num_gpus=2)
    assert (cfg.train_dataset.num_devices, cfg.runtime.num_gpus) == (4, 2)
    assert C.load_config(cfg).train_dataset.num_devices == 4  # a layer


def test_replace_keys_derives_a_frozen_copy_and_shares_the_rest():
    cfg = C.load_config(params_override="train.steps=3")
    new = C.replace_keys(cfg, {"train_dataset.num_devices": 4,
                               "validation_dataset.num_devices": 4,
                               "mode": "train"})
    assert (new.train_dataset.num_devices, new.validation_dataset.num_devices,
            new.mode) == (4, 4, "train")
    assert (cfg.train_dataset.num_devices, cfg.mode) == (1, "train_and_eval")
    assert new.runtime is cfg.runtime and new.model is cfg.model
    assert new.train_dataset.batch_size == cfg.train_dataset.batch_size
    with pytest.raises(C.FrozenConfigError,
                       match="validation_dataset.num_devices;"):
        new.validation_dataset.num_devices = 8
    with pytest.raises(C.FrozenConfigError, match=": mode;"):
        new.mode = "eval"
    with pytest.raises(ValueError, match="train_dataset is set and so is"):
        C.replace_keys(cfg, {"train_dataset": None,
                             "train_dataset.num_devices": 2})


def test_dataclasses_replace_copy_deepcopy_and_pickle_stay_usable():
    cfg = C.load_config(params_override="train.steps=3")
    replaced = dataclasses.replace(cfg, model_dir="/m")
    assert replaced.model_dir == "/m" and replaced.train.steps == 3
    replaced.mode = "eval"  # the new top is a plain dataclass ...
    with pytest.raises(C.FrozenConfigError):
        replaced.train.steps = 4  # ... over the frozen parts it shares
    for twin in (copy.deepcopy(cfg), pickle.loads(pickle.dumps(cfg))):
        assert twin == cfg and twin.as_dict() == cfg.as_dict()
        with pytest.raises(C.FrozenConfigError, match="runtime.seed;"):
            twin.runtime.seed = 1
    assert "num_devices: 1" in cfg.to_yaml()
