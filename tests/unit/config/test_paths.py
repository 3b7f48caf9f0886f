"""config/paths' checks before TensorFlow starts: eval, and export without
export.checkpoint, are refused when model_dir has no checkpoint state file
(the file tf.train.latest_checkpoint reads); a python_source whose package
is not on sys.path is refused with the feed's own words, and one that is
found is not imported; a config file's model_dir holding a run is not
trained into again."""

import pytest

from official_bench import config as C
from official_bench.config.paths import (
    CHECKPOINT_STATE,
    check_checkpoint,
    check_model_dir_free,
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


def _run_dir(tmp_path, *held):
    """A finished run's folder holding `held` and its params.yaml, which
    names the folder as its model_dir (as the trainer writes it)."""
    run = tmp_path / "run-1"
    run.mkdir()
    for name in held:
        (run / name).write_text("{}")
    params = run / "params.yaml"
    params.write_text(f"model_dir: {run}\nmode: train\n")
    return run, params


@pytest.mark.parametrize("held", [("result.json",), (CHECKPOINT_STATE,),
                                  ("result.json", CHECKPOINT_STATE)])
def test_a_params_yaml_given_back_does_not_train_into_its_run(tmp_path, held):
    """--config_file=run/params.yaml must not replace that run's files:
    refused, naming the folder, the file it came from, what it holds and
    the two ways on."""
    run, params = _run_dir(tmp_path, *held)
    cfg = C.load_config(str(params))
    with pytest.raises(C.ConfigError) as e:
        check_model_dir_free(cfg)
    assert str(e.value) == (
        f"model_dir {str(run)!r} (from file {params}) already holds a run "
        f"({' and '.join(held)}): this run would replace its files. Give "
        "this run a folder of its own (--model_dir, or model_dir in a "
        "params_override), or continue that run with "
        "train.resume_checkpoint=true")


@pytest.mark.parametrize("override", [
    {"train": {"resume_checkpoint": True}},  # continuing it: wanted
    {"mode": "eval"},                        # reads, writes no run
    None,                                    # with model_dir (below)
])
def test_what_does_not_replace_the_run_passes(tmp_path, override):
    run, params = _run_dir(tmp_path, "result.json", CHECKPOINT_STATE)
    layers = [override] if override else [{"model_dir": str(tmp_path / "b")}]
    check_model_dir_free(C.load_config(str(params), params_override=layers))


def test_a_model_dir_named_outside_a_file_is_the_users_choice(tmp_path):
    """--model_dir or a params_override naming a folder with a run in it:
    as before, the user said where this run goes."""
    run, params = _run_dir(tmp_path, "result.json")
    check_model_dir_free(C.load_config(
        str(params), params_override=[{"model_dir": str(run)}]))
    check_model_dir_free(C.load_config(str(params),
                                       overrides={"model_dir": str(run)}))


def test_a_config_file_naming_an_empty_folder_passes(tmp_path):
    run, params = _run_dir(tmp_path)  # params.yaml alone: no run yet
    check_model_dir_free(C.load_config(str(params)))
