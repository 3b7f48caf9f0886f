"""A data_dir is never ignored (issue 40 §1): a dataset the run reads whose
builder does not read data_dir is refused when the config loads, in one
line naming the builder and the builders that would read it; the shipped
configs (ours and DLPerf's) with --data_dir still load."""

import glob
import os
import subprocess
import sys

import pytest

from official_bench import config as C
from official_bench.config.paths import DATA_DIR_READERS

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                    ".."))
CPU = os.path.join(REPO, "configs", "examples", "resnet", "imagenet",
                   "cpu_smoke.yaml")
# What each reader needs besides data_dir to load.
READER_KEYS = {"records": {}, "tfds": {},
               "service": {"data_service_address": "127.0.0.1:5050"},
               "python": {"python_source": "m:f"}}


def _load(train=None, validation=None, top=None, config_file=CPU):
    layer = dict(top or {})
    if train:
        layer["train_dataset"] = train
    if validation:
        layer["validation_dataset"] = validation
    return C.load_config(config_file=config_file, params_override=[layer])


@pytest.mark.parametrize("builder", ["synthetic", "zmq"])
def test_a_builder_that_ignores_data_dir_is_refused(builder):
    extra = {"zmq_endpoints": ["tcp://127.0.0.1:5555"]} \
        if builder == "zmq" else {}
    with pytest.raises(C.ConfigError) as e:
        _load(train={"builder": builder, "data_dir": "/data/in", **extra})
    lines = str(e.value).splitlines()
    assert lines[1:] == [
        f"  train_dataset.data_dir: '/data/in' is not read by train_dataset."
        f"builder '{builder}'; builders that read it: records, tfds, "
        "service, python (TFRecords: set train_dataset.builder=records), or "
        f"drop data_dir for {builder} data (from params_override dict)"]


@pytest.mark.parametrize("builder", DATA_DIR_READERS)
def test_every_reader_takes_data_dir(builder):
    cfg = _load(train=dict(READER_KEYS[builder], builder=builder,
                           data_dir="/data/in"))
    assert cfg.train_dataset.data_dir == "/data/in"


def test_validation_data_dir_counts_only_when_evaluation_reads_it():
    # cpu_smoke skips evaluation: validation_dataset is not read.
    _load(validation={"data_dir": "/data/in"})
    with pytest.raises(C.ConfigError, match=r"validation_dataset.data_dir: "
                       r"'/data/in' is not read by validation_dataset."
                       r"builder 'synthetic'"):
        _load(validation={"data_dir": "/data/in"},
              top={"evaluation": {"skip_eval": False}})


SHIPPED = sorted(glob.glob(os.path.join(REPO, "configs", "**", "*.yaml"),
                           recursive=True) +
                 glob.glob(os.path.join(REPO, "tests", "fixtures", "dlperf",
                                        "*.yaml")))


@pytest.mark.parametrize("path", SHIPPED,
                         ids=[os.path.relpath(p, REPO) for p in SHIPPED])
def test_shipped_configs_take_data_dir_as_model_garden_passes_it(path):
    """DLPerf passes --data_dir with Model Garden's builder: records; our
    configs (records on GPU) must load with it. cpu_smoke is synthetic:
    the run scripts switch its builder to records with DATA_DIR
    (launch/overrides.py)."""
    both = {"data_dir": "/data/imagenet"}
    if os.path.basename(path) == "cpu_smoke.yaml":
        both = dict(both, builder="records")
    cfg = _load(train=both, validation=both, config_file=path)
    assert cfg.train_dataset.builder in DATA_DIR_READERS


def test_trainer_refuses_data_dir_on_a_synthetic_config(tmp_path):
    """The trainer's own flag, before TensorFlow starts: exit 2, the error
    names the builder and the flag."""
    done = subprocess.run(
        [sys.executable, "-m", "official_bench.classifier_trainer",
         f"--config_file={CPU}", "--data_dir=/nonexistent",
         f"--model_dir={tmp_path / 'm'}"], cwd=REPO, capture_output=True,
        text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "train_dataset.data_dir: '/nonexistent' is not read by " \
        "train_dataset.builder 'synthetic'" in done.stderr
    assert "(from flags)" in done.stderr
    assert not (tmp_path / "m").exists()
