"""A type error of a key with choices or a range names them
(config/ranges.py's valid_values through config/builder.py), as its
value errors do; a quoted num_workers count is refused saying to write it
without quotes."""

import pytest

from official_bench import config as C
from support.helpers import config_error_lines


@pytest.mark.parametrize("override, line", [
    ("train_dataset.num_workers=1.5",
     "train_dataset.num_workers: expected int or str, got float 1.5; must "
     "be 'auto' or 1..1024 (from"),
    ("train_dataset.decode=null",
     "train_dataset.decode: expected str, got NoneType None; valid: cpu, "
     "cpu_window, gpu, gpu_trainer (from"),
    ("validation_dataset.worker_decode_share=[1]",
     "validation_dataset.worker_decode_share: expected float, got list [1]; "
     "must be in [0, 1) (from"),
    ("train_dataset.worker_timeout_seconds=true",
     "train_dataset.worker_timeout_seconds: expected float, got bool True; "
     "must be > 0 and <= 604800 (from"),
    ("train_dataset.builder=3",
     "train_dataset.builder: expected str, got int 3; valid: synthetic, "
     "records, tfds, python, zmq, service (from"),
    ("model.optimizer.name=1",
     "model.optimizer.name: expected str, got int 1; valid: momentum, sgd, "
     "rmsprop, adam (from"),
    # no choices or range to name: the type alone
    ("train.steps=1.5", "train.steps: expected int or null, got float 1.5 "
     "(from"),
])
def test_a_type_error_names_the_values_the_key_takes(override, line):
    lines = config_error_lines(override)
    assert len(lines) == 1 and lines[0].startswith(line), lines


def test_a_quoted_count_says_to_write_it_without_quotes():
    with pytest.raises(C.ConfigError, match=(
            r"train_dataset.num_workers: must be 'auto' or 1..1024, got "
            r"'4': a string; write 4 without quotes \(from")):
        C.load_config(params_override={"train_dataset": {
            "builder": "records", "num_workers": "4"}})
