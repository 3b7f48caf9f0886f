"""config/paths.check_checkpoint: eval, and export without
export.checkpoint, are refused before TensorFlow starts when model_dir has
no checkpoint state file (the file tf.train.latest_checkpoint reads)."""

import pytest

from official_bench import config as C
from official_bench.config.paths import (
    CHECKPOINT_STATE,
    check_checkpoint,
    no_checkpoint_message,
)


def _cfg(mode, model_dir, **export):
    layer = {"mode": mode, "model_dir": model_dir}
    if export:
        layer["export"] = export
    return C.load_config(params_override=[layer])


@pytest.mark.parametrize("mode", ["eval", "export_only"])
def test_no_state_file_is_refused_naming_model_dir(tmp_path, mode):
    (tmp_path / "model.ckpt-0001.index").write_text("")  # no state file
    with pytest.raises(C.ConfigError) as e:
        check_checkpoint(_cfg(mode, str(tmp_path)))
    assert str(e.value) == no_checkpoint_message(str(tmp_path))
    assert repr(str(tmp_path)) in str(e.value)


def test_a_missing_model_dir_is_refused(tmp_path):
    with pytest.raises(C.ConfigError):
        check_checkpoint(_cfg("eval", str(tmp_path / "never")))


@pytest.mark.parametrize("mode", ["eval", "export_only"])
def test_a_state_file_passes(tmp_path, mode):
    (tmp_path / CHECKPOINT_STATE).write_text(
        'model_checkpoint_path: "model.ckpt-0001"\n')
    check_checkpoint(_cfg(mode, str(tmp_path)))


def test_what_does_not_read_model_dirs_checkpoint_passes(tmp_path):
    check_checkpoint(_cfg("train", str(tmp_path)))
    check_checkpoint(_cfg("train_and_eval", str(tmp_path)))
    # export of a named checkpoint: TensorFlow checks that one
    check_checkpoint(_cfg("export_only", str(tmp_path),
                          checkpoint=str(tmp_path / "model.ckpt-0003")))
    # a URL: TensorFlow's file system reads it, not this check
    check_checkpoint(_cfg("eval", "gs://bucket/run1"))
