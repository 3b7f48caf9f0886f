"""Keys and flags as peer tools write them (config/peer_keys.py): Model
Garden's list form of train.metrics, keys at another level or under another
name, and peers' trainer flags, each answered with our key."""

import pytest

from official_bench import config as C
from official_bench.training.objectives import wanted_metrics


def _errors(override):
    with pytest.raises(C.ConfigError) as e:
        C.load_config(params_override=override)
    return [line.strip() for line in str(e.value).splitlines()[1:]]


@pytest.mark.parametrize("names, wanted", [
    ("[accuracy, top_5]", (True, True)),  # Model Garden's ResNet config
    ("[top_5]", (False, True)),
    ("[acc]", (True, False)),
    ("[top_1, top_5]", (True, True)),
    ("[]", (False, False)),
])
def test_metrics_list_form_turns_on_the_named_ones(names, wanted):
    """peers 6: the list was refused as 'expected a mapping'."""
    cfg = C.load_config(params_override=f"{{train: {{metrics: {names}}}}}")
    assert wanted_metrics(cfg) == wanted


def test_metrics_mapping_form_is_kept_and_a_later_list_replaces_it(tmp_path):
    cfg = C.load_config(params_override="train.metrics.top_5=false")
    assert wanted_metrics(cfg) == (True, False)
    f = tmp_path / "mg.yaml"
    f.write_text("train:\n  metrics:\n  - accuracy\n")
    cfg = C.load_config(f, "train.metrics.top_5=true")
    assert wanted_metrics(cfg) == (True, True)
    cfg = C.load_config({"train": {"metrics": {"top_5": True}}},
                        {"train": {"metrics": ["accuracy"]}})
    assert wanted_metrics(cfg) == (True, False)


def test_unknown_metric_names_are_refused_with_the_valid_ones():
    (line,) = _errors("{train: {metrics: [accuracy, top5]}}")
    assert line.startswith(
        "train.metrics: unknown metric name(s) 'top5'; valid: acc, accuracy,"
        " top_1, top_5 (a list, as Model Garden writes it), or a mapping "
        "{accuracy: bool, top_5: bool} (from --params_override"), line
    (line,) = _errors("{train: {metrics: top_5}}")
    assert line.startswith("train.metrics: expected a mapping (or a list of "
                           "names), got str 'top_5'"), line


def test_keys_at_another_level_name_ours_not_a_dump(tmp_path):
    """peers 7: Model Garden's examples YAML puts model_dir and mode under
    runtime and spells model.name model_name; the errors listed all 32
    runtime keys and suggested 'model_params'."""
    f = tmp_path / "gpu.yaml"
    f.write_text("runtime:\n  model_dir: /tmp/x\n  mode: train\n"
                 "model:\n  model_name: resnet\n")
    with pytest.raises(C.ConfigError) as e:
        C.load_config(f)
    lines = [line.strip() for line in str(e.value).splitlines()[1:]]
    source = f" (from file {f})"
    assert lines == [
        "runtime.model_dir: unknown key here; model_dir is a top-level key "
        "(not under runtime)" + source,
        "runtime.mode: unknown key here; mode is a top-level key (not under "
        "runtime)" + source,
        "model.model_name: unknown key; did you mean 'name'? (model.name, as "
        "in Model Garden r2.3)" + source]


def test_every_peer_key_names_a_key_of_ours():
    """The table's targets exist, and its sources do not (else they would
    load, not be refused)."""
    from official_bench.config import peer_keys
    tree = C.load_config().as_dict()

    def has(path):
        node = tree
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True
    for theirs, ours in peer_keys.KEYS.items():
        assert has(ours) and not has(theirs), (theirs, ours)
    for key, _ in peer_keys.FLAGS.values():
        assert has(key), key




def test_peer_flags_name_our_key_and_absl_flags_are_never_offered():
    """peers 5: --precision was offered --showprefixforinfo, --worker_hosts
    --verbosity, --iter_unit --run_with_pdb (absl's own flags)."""
    from support.helpers import flag_errors
    cases = {
        "--precision=fp16": "unknown flag --precision; it is the config key "
        "train_dataset.dtype here: --params_override=train_dataset.dtype="
        "float16; see --help",
        "--worker_hosts=a:1,b:2": "unknown flag --worker_hosts; it is the "
        "config key runtime.worker_hosts here: --params_override=runtime."
        "worker_hosts='a:1,b:2'; see --help",
        "--use_xla": "unknown flag --use_xla; it is the config key runtime."
        "enable_xla here: --params_override=runtime.enable_xla=true; see "
        "--help",
        "--data_format=NCHW": "unknown flag --data_format; it is the config "
        "key model.model_params.data_format here: --params_override=model."
        "model_params.data_format=channels_first; see --help",
        "--task_index": "unknown flag --task_index; it is the config key "
        "runtime.task_index here: --params_override=runtime.task_index="
        "<value>; see --help",
        "--iter_unit=batch": "unknown flag --iter_unit; see --help",
        "--all_reduce_alg=nccl": "unknown flag --all_reduce_alg; it is the "
        "config key runtime.all_reduce_alg here: --params_override=runtime."
        "all_reduce_alg=nccl; see --help",
        "--model_dri=/x": "unknown flag --model_dri (did you mean "
        "--model_dir?); see --help",
        "--verbos": "unknown flag --verbos (did you mean --verbose?); see "
        "--help",
    }
    lines, stderr = flag_errors(cases)
    assert lines == [f"error: {want}" for want in cases.values()], stderr


def test_the_flag_table_names_no_flag_the_trainer_defines():
    from absl import flags

    from official_bench import classifier_trainer  # noqa: F401
    from official_bench.config import peer_keys
    assert not set(peer_keys.FLAGS) & set(flags.FLAGS)
