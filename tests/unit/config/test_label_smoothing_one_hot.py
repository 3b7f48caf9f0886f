"""Label smoothing with integer labels is refused, and the refusal says what
Model Garden did with such a config (its tpu.yaml: one_hot false, smoothing
0.1; its classifier_trainer made both datasets one-hot) and how to get it."""

import pytest

from official_bench import config as C

MODEL_GARDEN = ("Model Garden's classifier_trainer ignored the datasets' "
                "one_hot and used one-hot labels whenever label_smoothing > "
                "0: to train as it did, set train_dataset.one_hot: true and "
                "validation_dataset.one_hot: true")

# Model Garden's legacy tpu.yaml, moved to GPU: the keys that matter here.
TPU_YAML_ON_GPU = """\
runtime:
  distribution_strategy: 'mirrored'
train_dataset:
  one_hot: false
validation_dataset:
  one_hot: false
model:
  loss:
    label_smoothing: 0.1
"""


def _error(**kwargs):
    with pytest.raises(C.ConfigError) as e:
        C.load_config(**kwargs)
    return str(e.value)


def test_one_hot_false_with_smoothing_says_what_model_garden_did(tmp_path):
    path = tmp_path / "tpu.yaml"
    path.write_text(TPU_YAML_ON_GPU)
    msg = _error(config_file=str(path))
    line, = [x for x in msg.splitlines() if "label_smoothing" in x]
    assert line.strip().startswith(
        "model.loss.label_smoothing: needs one-hot labels "
        "(train_dataset.one_hot: true, categorical_crossentropy); "
        + MODEL_GARDEN), msg
    assert line.endswith(f"(from file {path})"), msg


def test_following_the_message_loads(tmp_path):
    path = tmp_path / "tpu.yaml"
    path.write_text(TPU_YAML_ON_GPU)
    cfg = C.load_config(config_file=str(path), params_override=(
        "train_dataset.one_hot=true,validation_dataset.one_hot=true"))
    assert cfg.model.loss.label_smoothing == 0.1
    assert cfg.train_dataset.one_hot and cfg.validation_dataset.one_hot


def test_a_sparse_loss_name_is_not_told_about_one_hot_keys():
    """one_hot is already true: the loss name is what disagrees, so the
    Model Garden sentence (about the one_hot keys) would mislead."""
    msg = _error(params_override=(
        "model.loss.name=sparse_categorical_crossentropy,"
        "train_dataset.one_hot=true,model.loss.label_smoothing=0.1"))
    assert "needs one-hot labels" in msg
    assert "Model Garden" not in msg

