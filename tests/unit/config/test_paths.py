"""config/paths' checks before TensorFlow starts: eval, and export without
export.checkpoint, are refused when model_dir has no checkpoint state file
(the file tf.train.latest_checkpoint reads); a python_source whose package
is not on sys.path is refused with the feed's own words, and one that is
found is not imported."""

import pytest

from official_bench import config as C
from official_bench.config.paths import (
    CHECKPOINT_STATE,
    check_checkpoint,
    check_python_sources,
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


def _python_cfg(spec):
    return C.load_config(params_override=[{"train_dataset": {
        "builder": "python", "python_source": spec}}])


@pytest.mark.parametrize("spec", ["nope_mod:f", "nope_pkg.sub:f"])
def test_a_source_module_not_on_the_path_is_refused_as_the_feed_would(spec):
    from official_bench.data.feeds.python_batches import load_source
    with pytest.raises(C.ConfigError) as early:
        check_python_sources(_python_cfg(spec))
    with pytest.raises(C.ConfigError) as late:
        load_source(spec)
    assert str(early.value) == str(late.value)
    assert "cannot import module" in str(early.value)


def test_a_found_module_is_not_imported(tmp_path, monkeypatch):
    """Found on sys.path is enough: importing it (it may import
    TensorFlow) is the data pipeline's job, which names its failure."""
    (tmp_path / "breaks_on_import.py").write_text("raise RuntimeError('x')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    check_python_sources(_python_cfg("breaks_on_import:f"))
    check_python_sources(_python_cfg("support.python_sources:float64_source"))
