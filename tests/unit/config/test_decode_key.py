"""train_dataset.decode (config/schema.py): cpu or gpu, refused in one line
where it cannot run (config/backends.py): on tensorflow, on a builder
without record files, and on jax without GPUs; in the datasets the run
reads only, on both backends."""

import pytest

from official_bench import config as C
from official_bench.config import backends
from support.helpers import config_error_lines

JAX_GPU = "runtime.backend=jax,runtime.num_gpus=1,"


def test_cpu_is_the_default_and_gpu_is_taken_on_jax_with_records():
    assert C.load_config().train_dataset.decode == "cpu"
    cfg = C.load_config(params_override=JAX_GPU + (
        "train_dataset.builder=records,train_dataset.decode=gpu,"
        "validation_dataset.decode=gpu,evaluation.skip_eval=true"))
    assert cfg.train_dataset.decode == "gpu"
    assert backends.refusals(cfg) == []


def test_an_unknown_value_names_the_valid_ones():
    lines = config_error_lines("train_dataset.decode=nvjpeg")
    assert lines[0].startswith("train_dataset.decode: unknown decode "
                               "'nvjpeg'; valid: cpu, gpu"), lines


@pytest.mark.parametrize("override, words", [
    ("train_dataset.decode=gpu",
     "train_dataset.decode: 'gpu' needs runtime.backend jax"),
    (JAX_GPU + "train_dataset.decode=gpu",
     "train_dataset.decode: 'gpu' decodes record files' JPEGs; builder "
     "'synthetic' has none"),
    ("runtime.backend=jax,runtime.num_gpus=0,train_dataset.builder=records,"
     "train_dataset.decode=gpu,evaluation.skip_eval=true",
     "train_dataset.decode: 'gpu' needs a GPU, and runtime.num_gpus is 0"),
])
def test_refused_in_one_line_where_it_cannot_run(override, words):
    lines = config_error_lines(override)
    assert len(lines) == 1 and lines[0].startswith(words), lines


@pytest.mark.parametrize("override, refused", [
    ("", ["train_dataset.decode", "validation_dataset.decode"]),
    ("evaluation.skip_eval=true", ["train_dataset.decode"]),
    ("mode=train", ["train_dataset.decode"]),
    ("mode=eval", ["validation_dataset.decode"]),
    ("mode=export_only", []),
])
def test_tensorflow_refuses_gpu_decode_in_the_datasets_the_run_reads(
        override, refused):
    both = "train_dataset.decode=gpu,validation_dataset.decode=gpu"
    if not refused:
        C.load_config(params_override=f"{both},{override}")
        return
    lines = config_error_lines(",".join(filter(None, [both, override])))
    assert [line.split(":")[0] for line in lines] == refused, lines
