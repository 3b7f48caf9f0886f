"""train_dataset.decode (config/schema.py): cpu, cpu_window, gpu or
gpu_trainer, refused in one line where it cannot run
(config/backends.py): on tensorflow, on a builder without record files,
and (gpu, gpu_trainer) on jax without GPUs; in the datasets the run reads
only, on both backends."""

import pytest

from official_bench import config as C
from official_bench.config import backends
from support.helpers import config_error_lines

JAX_GPU = "runtime.backend=jax,runtime.num_gpus=1,"


@pytest.mark.parametrize("decode", ["gpu", "gpu_trainer"])
def test_cpu_is_the_default_and_gpu_is_taken_on_jax_with_records(decode):
    assert C.load_config().train_dataset.decode == "cpu"
    cfg = C.load_config(params_override=JAX_GPU + (
        f"train_dataset.builder=records,train_dataset.decode={decode},"
        f"validation_dataset.decode={decode},evaluation.skip_eval=true"))
    assert cfg.train_dataset.decode == decode
    assert backends.refusals(cfg) == []


def test_cpu_window_is_taken_on_jax_with_records_without_gpus():
    cfg = C.load_config(params_override=(
        "runtime.backend=jax,runtime.num_gpus=0,train_dataset.builder="
        "records,train_dataset.decode=cpu_window,evaluation.skip_eval=true"))
    assert cfg.train_dataset.decode == "cpu_window"
    assert backends.refusals(cfg) == []


def test_an_unknown_value_names_the_valid_ones():
    lines = config_error_lines("train_dataset.decode=nvjpeg")
    assert lines[0].startswith(
        "train_dataset.decode: unknown decode 'nvjpeg'; valid: cpu, "
        "cpu_window, gpu, gpu_trainer"), lines


REFUSALS = [
    ("train_dataset.decode={0}",
     "train_dataset.decode: '{0}' needs runtime.backend jax"),
    (JAX_GPU + "train_dataset.decode={0}",
     "train_dataset.decode: '{0}' decodes record files' JPEGs; builder "
     "'synthetic' has none"),
    ("runtime.backend=jax,runtime.num_gpus=0,train_dataset.builder=records,"
     "train_dataset.decode={0},evaluation.skip_eval=true",
     "train_dataset.decode: '{0}' needs a GPU, and runtime.num_gpus is 0"),
]


@pytest.mark.parametrize("override, words, decode", [
    (override, words, decode)
    for decode in ("gpu", "gpu_trainer", "cpu_window")
    for override, words in REFUSALS
    # cpu_window needs no GPU (taken above)
    if not (decode == "cpu_window" and "needs a GPU" in words)])
def test_refused_in_one_line_where_it_cannot_run(override, words, decode):
    lines = config_error_lines(override.format(decode))
    assert len(lines) == 1 and lines[0].startswith(words.format(decode)), \
        lines


@pytest.mark.parametrize("override, refused", [
    ("", ["train_dataset.decode", "validation_dataset.decode"]),
    ("evaluation.skip_eval=true", ["train_dataset.decode"]),
    ("mode=train", ["train_dataset.decode"]),
    ("mode=eval", ["validation_dataset.decode"]),
    ("mode=export_only", []),
])
@pytest.mark.parametrize("decode", ["gpu", "gpu_trainer", "cpu_window"])
def test_tensorflow_refuses_gpu_decode_in_the_datasets_the_run_reads(
        override, refused, decode):
    both = f"train_dataset.decode={decode},validation_dataset.decode={decode}"
    if not refused:
        C.load_config(params_override=f"{both},{override}")
        return
    lines = config_error_lines(",".join(filter(None, [both, override])))
    assert [line.split(":")[0] for line in lines] == refused, lines


GPU_TRAINER = (JAX_GPU + "train_dataset.builder=records,train_dataset."
               "decode=gpu_trainer,evaluation.skip_eval=true,")


def test_worker_decode_share_is_taken_with_gpu_trainer():
    assert C.load_config().train_dataset.worker_decode_share == 0.0
    cfg = C.load_config(params_override=GPU_TRAINER +
                        "train_dataset.worker_decode_share=0.5")
    assert cfg.train_dataset.worker_decode_share == 0.5
    assert backends.refusals(cfg) == []


@pytest.mark.parametrize("share", ["1.0", "-0.25", "1.5"])
def test_a_share_outside_0_1_is_one_line_with_the_range(share):
    lines = config_error_lines(GPU_TRAINER +
                               f"train_dataset.worker_decode_share={share}")
    assert len(lines) == 1 and lines[0].startswith(
        "train_dataset.worker_decode_share: must be in [0, 1) (the share "
        "of decode: gpu_trainer's JPEGs the input workers decode; 1, every "
        "image in the workers: use decode: cpu_window), got "
        f"{float(share)}"), lines


@pytest.mark.parametrize("decode", ["cpu", "gpu"])
def test_a_share_without_gpu_trainer_is_one_line_naming_the_decode(decode):
    lines = config_error_lines(
        JAX_GPU + "train_dataset.builder=records,evaluation.skip_eval=true,"
        f"train_dataset.decode={decode},"
        "train_dataset.worker_decode_share=0.5")
    assert len(lines) == 1 and lines[0].startswith(
        "train_dataset.worker_decode_share: 0.5 applies to decode: "
        "gpu_trainer (the share of its JPEGs the input workers decode), "
        f"the decode is '{decode}'; set decode: gpu_trainer or leave this "
        "at 0"), lines
