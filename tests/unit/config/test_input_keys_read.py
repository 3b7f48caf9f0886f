"""Input keys set where nothing reads them are refused in one line naming
the key, the value and what reads it (config/backends.py): the JAX input
workers' num_workers and worker_timeout_seconds off JAX's records feed,
skip_bad_records with a builder that reads no record files; in the
datasets the run reads only, as decode (and worker_decode_share, which
follows it) is."""

import pytest

from official_bench import config as C
from support.helpers import config_error_lines

JAX_RECORDS = ("runtime.backend=jax,train_dataset.builder=records,"
               "evaluation.skip_eval=true,")
WORKERS = "the JAX backend's input workers read it, with builder records"


@pytest.mark.parametrize("override, line", [
    ("train_dataset.builder=records,train_dataset.num_workers=3",
     "train_dataset.num_workers: 3 has no effect with runtime.backend "
     f"tensorflow ({WORKERS}); remove it"),
    ("train_dataset.builder=records,"
     "train_dataset.worker_timeout_seconds=5",
     "train_dataset.worker_timeout_seconds: 5.0 has no effect with "
     f"runtime.backend tensorflow ({WORKERS}); remove it"),
    ("runtime.backend=jax,train_dataset.num_workers=4",
     "train_dataset.num_workers: 4 has no effect with builder 'synthetic' "
     f"({WORKERS}); remove it"),
    ("runtime.backend=jax,train_dataset.builder=python,"
     "train_dataset.python_source=m:f,train_dataset.worker_timeout_seconds=1",
     "train_dataset.worker_timeout_seconds: 1.0 has no effect with builder "
     f"'python' ({WORKERS}); remove it"),
    ("runtime.backend=jax,train_dataset.skip_bad_records=true",
     "train_dataset.skip_bad_records: true has no effect with builder "
     "'synthetic' (the records and tfds builders read it); remove it"),
    ("train_dataset.skip_bad_records=true",
     "train_dataset.skip_bad_records: true has no effect with builder "
     "'synthetic' (the records and tfds builders read it); remove it"),
    ("evaluation.skip_eval=false,validation_dataset.num_workers=2",
     "validation_dataset.num_workers: 2 has no effect with runtime.backend "
     f"tensorflow ({WORKERS}); remove it"),
])
def test_a_key_nothing_reads_is_one_line_naming_what_reads_it(override,
                                                              line):
    lines = config_error_lines(override + ",mode=train_and_eval")
    assert len(lines) == 1 and lines[0].startswith(line), lines


@pytest.mark.parametrize("override", [
    "",  # the defaults
    "train_dataset.num_workers=auto,train_dataset.worker_timeout_seconds="
    "300",  # set to the defaults
    JAX_RECORDS + "train_dataset.num_workers=3,"
    "train_dataset.worker_timeout_seconds=5,train_dataset.skip_bad_records="
    "true",
    "train_dataset.builder=records,train_dataset.skip_bad_records=true",
    "train_dataset.builder=tfds,train_dataset.skip_bad_records=true",
    # datasets the run does not read are left alone, as decode is
    "mode=train,validation_dataset.num_workers=2,"
    "validation_dataset.skip_bad_records=true",
    "evaluation.skip_eval=true,validation_dataset.worker_timeout_seconds=9",
])
def test_where_they_are_read_or_left_at_their_defaults_they_load(override):
    C.load_config(params_override=override)


def test_worker_decode_share_is_left_alone_in_a_dataset_not_read():
    """As decode: gpu is (docs/data.md); read, the share is refused."""
    C.load_config(params_override=(
        "mode=train,validation_dataset.worker_decode_share=0.5"))
    lines = config_error_lines("validation_dataset.worker_decode_share=0.5")
    assert len(lines) == 1 and lines[0].startswith(
        "validation_dataset.worker_decode_share: 0.5 applies to decode: "
        "gpu_trainer"), lines
