"""The hints a peer's flag gets (config/peer_keys.flag_hint) say the right
thing: a boolean flag's false value never turns the feature on, a peer's
strategy or model is translated or said to have no equivalent, Model
Garden's batch-size flags are answered, `--tpu=X` is told to drop the flag,
and docs/configuration.md's peer-flag table is the module's."""

import os
import re

import pytest

from official_bench import config as C
from official_bench.config import peer_keys
from official_bench.config.schema import STRATEGIES
from support.helpers import REPO, flag_errors

hint = peer_keys.flag_hint


def _override(text):
    """The --params_override value a hint suggests."""
    found = re.search(r"--params_override=(\S+)", text)
    assert found, text
    return found[1].strip("'")


@pytest.mark.parametrize("name, value", [
    ("use_fp16", "false"), ("use_fp16", "False"), ("use_fp16", "0"),
    ("use_fp16", "f"), ("use_fp16", "no"), ("nouse_fp16", None),
    ("fp16", "FALSE"), ("xla", "False"), ("noxla", None),
    ("use_xla", "0"), ("enable_xla", "false"), ("skip_eval", "false"),
    ("noskip_eval", None),
])
def test_a_false_boolean_sets_the_default_never_the_feature(name, value):
    """walk_peers F1: --use_fp16=false was told train_dataset.dtype=float16,
    --xla=False enable_xla=true; --nouse_fp16 got no hint."""
    text = hint(name, value)
    key, on = peer_keys.FLAGS[name.removeprefix("no")
                             if name.startswith("no") else name]
    off = peer_keys.OFF[key]
    assert text is not None
    assert f"{key}={on}" not in text, text
    assert f"false means {key}={off}, the default" in text, text
    assert _override(text) == f"{key}={off}"


@pytest.mark.parametrize("name, value", [
    ("use_fp16", None), ("use_fp16", "true"), ("use_fp16", "1"),
    ("xla", "True"), ("skip_eval", "yes"), ("enable_xla", "t"),
])
def test_a_true_boolean_turns_the_feature_on(name, value):
    key, on = peer_keys.FLAGS[name]
    assert hint(name, value) == (f"it is the config key {key} here: "
                                 f"--params_override={key}={on}")


def test_a_boolean_value_absl_would_not_read_is_said_to_be_neither():
    text = hint("use_fp16", "maybe")
    assert "'maybe' is neither" in text and "float16 for true" in text \
        and "float32 (the default) for false" in text, text


def test_the_off_values_are_our_defaults():
    """The hint says 'the default': it must be."""
    tree = C.load_config().as_dict()
    for key, off in peer_keys.OFF.items():
        section, leaf = key.split(".")
        assert str(tree[section][leaf]).lower() == off, key
    assert {key for key, on in peer_keys.FLAGS.values() if on} \
        == set(peer_keys.OFF)


def test_no_form_of_a_flag_that_is_not_boolean_gets_no_hint():
    assert hint("nobatch_size", None) is None
    assert hint("nomodel_dri", None) is None


@pytest.mark.parametrize("name, value, ours", [
    ("strategy_type", "multiworker", "multi_worker_mirrored"),
    ("strategy_type", "mirrored", "mirrored"),
    ("variable_update", "distributed_replicated", "multi_worker_mirrored"),
    ("variable_update", "collective_all_reduce", "multi_worker_mirrored"),
    ("variable_update", "distributed_all_reduce", "multi_worker_mirrored"),
    ("variable_update", "replicated", "mirrored"),
    ("variable_update", "horovod", "horovod"),
    ("variable_update", "parameter_server", "parameter_server"),
])
def test_peer_strategies_are_translated_to_a_value_that_loads(
        name, value, ours):
    """walk_peers F2: --strategy_type=multiworker was echoed, and the
    suggested override was refused as an unknown strategy."""
    text = hint(name, value)
    pair = _override(text)
    assert pair == f"runtime.distribution_strategy={ours}", text
    assert C.load_config(params_override=pair).runtime.distribution_strategy \
        == ours


def test_one_host_parameter_server_is_pointed_at_mirrored():
    assert "on one host, mirrored is the nearest" in hint(
        "variable_update", "parameter_server")


@pytest.mark.parametrize("name, value, why", [
    ("variable_update", "independent", "trains a separate model on each"),
    ("strategy_type", "tpu", "TPUs are not supported"),
    ("distribution_strategy", "bogus", ""),
])
def test_a_strategy_with_no_equivalent_is_said_to_have_none(name, value, why):
    text = hint(name, value)
    assert "--params_override" not in text, text
    assert f"no equivalent of {value!r}" in text and why in text, text
    assert text.endswith("valid: " + ", ".join(STRATEGIES)), text


def test_every_translated_strategy_is_one_of_ours():
    table = peer_keys.VALUES["runtime.distribution_strategy"]
    assert set(table.values()) <= set(STRATEGIES)
    assert not set(peer_keys.NO_EQUIVALENT["runtime.distribution_strategy"]
                   ) & set(STRATEGIES)


@pytest.mark.parametrize("value, model, depth", [
    ("resnet50", "resnet", 50), ("resnet50_v1.5", "resnet", 50),
    ("resnet101", "resnet", 101), ("resnet152", "resnet", 152),
    ("resnet18", "resnet", 18), ("resnet56", "resnet_cifar", 56),
    ("resnet20", "resnet_cifar", 20),
])
def test_tf_cnn_benchmarks_model_is_model_type_and_depth(value, model, depth):
    """walk_peers F3: --model=resnet50 was asked 'did you mean --mode?'."""
    text = hint("model", value)
    assert f"--model_type={model} " in text, text
    pair = _override(text)
    assert pair == f"model.model_params.depth={depth}", text
    dataset = "cifar10" if model == "resnet_cifar" else "imagenet"
    cfg = C.load_config(params_override=pair, model_type=model,
                        dataset=dataset)
    assert (cfg.model.name, cfg.model.model_params.depth) == (model, depth)


@pytest.mark.parametrize("value", ["trivial", "resnet50_v2", "inception3",
                                   "resnet51", None])
def test_a_model_with_no_equivalent_names_ours(value):
    text = hint("model", value)
    assert "--model_type=resnet (ResNet v1.5" in text and \
        "--model_type=resnet_cifar (depth 6n+2)" in text, text
    assert "--params_override" not in text, text
    if value:
        assert f"model {value!r} has no equivalent here" in text, text


def test_optimizer_data_name_and_display_every():
    assert hint("optimizer", "momentum") == (
        "it is the config key model.optimizer.name here: "
        "--params_override=model.optimizer.name=momentum")
    assert hint("data_name", "cifar10") == \
        "it is --dataset here: --dataset=cifar10"
    assert hint("display_every", "10") == \
        "it is --log_steps here: --log_steps=10"


@pytest.mark.parametrize("name, key", [
    ("train_batch_size", "train_dataset.batch_size"),
    ("eval_batch_size", "validation_dataset.batch_size"),
])
def test_model_garden_batch_size_flags_name_our_key(name, key):
    """walk_peers F9: no hint; Model Garden's classifier_trainer defined
    these flags but never read them."""
    text = hint(name, "64")
    assert _override(text) == f"{key}=64"
    assert "classifier_trainer defined the flag but ignored it" in text


def test_flag_targets_are_our_flags_and_sources_are_not():
    from absl import flags

    from official_bench import classifier_trainer  # noqa: F401 (its flags)
    assert set(peer_keys.AS_FLAGS.values()) <= set(flags.FLAGS)
    assert not (set(peer_keys.AS_FLAGS) | {"model"}) & set(flags.FLAGS)
    assert not {f"no{n}" for n, (_, on) in peer_keys.FLAGS.items() if on} \
        & set(flags.FLAGS)




def test_the_trainer_answers_peer_flags_with_the_hints():
    """End to end through absl: the name and value absl hands over (the
    --noX form included) reach the hint."""
    cases = {
        "--use_fp16=false": "unknown flag --use_fp16; it is the config key "
        "train_dataset.dtype here, and false means train_dataset.dtype="
        "float32, the default: drop the flag (or --params_override="
        "train_dataset.dtype=float32 over a config file that sets it); see "
        "--help",
        "--nouse_fp16": "unknown flag --nouse_fp16; it is the config key "
        "train_dataset.dtype here, and false means train_dataset.dtype="
        "float32, the default: drop the flag (or --params_override="
        "train_dataset.dtype=float32 over a config file that sets it); see "
        "--help",
        "--model=resnet101": "unknown flag --model; it is --model_type here "
        "(ResNet v1.5): --model_type=resnet --params_override=model."
        "model_params.depth=101; see --help",
        "--strategy_type=multiworker": "unknown flag --strategy_type; it is "
        "the config key runtime.distribution_strategy here: "
        "--params_override=runtime.distribution_strategy="
        "multi_worker_mirrored; see --help",
        "--data_name=imagenet": "unknown flag --data_name; it is --dataset "
        "here: --dataset=imagenet; see --help",
    }
    lines, stderr = flag_errors(cases)
    assert lines == [f"error: {want}" for want in cases.values()], stderr


def test_a_tpu_flag_is_told_to_drop_it_a_tpu_key_to_null():
    """walk_peers F8: --tpu=mytpu was told to 'set it to null'."""
    with pytest.raises(C.ConfigError) as e:
        C.load_config(overrides={"runtime": {"tpu": "mytpu"}})
    assert "runtime.tpu: TPUs are not supported; drop --tpu (from flags)" \
        in str(e.value)
    with pytest.raises(C.ConfigError) as e:
        C.load_config(params_override="runtime.tpu=local")
    assert "runtime.tpu: TPUs are not supported; set it to null (from " \
        "--params_override" in str(e.value)
    assert C.load_config(overrides={"runtime": {"tpu": ""}}).runtime.tpu \
        == ""


def test_the_docs_peer_flag_table_is_the_modules():
    with open(os.path.join(REPO, "docs", "configuration.md"),
              encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- peer-flag table: generated from official_bench/"
                  r"config/peer_keys.py, do not edit by hand -->\n(.*?)"
                  r"<!-- end peer-flag table -->", text, re.S)
    assert m, "docs/configuration.md lost its peer-flag table markers"
    assert m.group(1) == peer_keys.markdown_table(), (
        "docs/configuration.md's peer-flag table differs from official_bench/"
        "config/peer_keys.py: paste the output of `python -c 'from "
        "official_bench.config import peer_keys; print(peer_keys."
        "markdown_table(), end=\"\")'` between the markers")
